import PaceTestSupport
import Testing

@testable import Pace

/// The concurrency limiter's rules the slow, obvious way: every waiting call in one array in
/// arrival order, each choice a scan for the best or worst rank, every deadline checked at every
/// event. No class queues, no dead slots, no compaction.
struct ConcurrencyLimiterReferenceModel {
  struct Waiter {
    var id: UInt64
    var priority: AdmissionPriority
    var at: PaceInstant
  }

  typealias Action = ConcurrencyLimiterStateMachine.Action
  typealias Refused = ConcurrencyLimiterStateMachine.Refused

  var maximumInFlight: Int
  let maximumQueued: Int
  let order: ConcurrencyQueueOrder
  let maximumWait: Duration?
  let shares: PriorityShares
  var inFlight = 0
  var waiting: [Waiter] = []

  /// How many may be in flight when a call of `priority` is admitted, in floating point for a
  /// second opinion on the integer arithmetic.
  func ceiling(_ priority: AdmissionPriority) -> Int {
    let percent = [shares.sheddablePercent, shares.defaultPercent, 100][priority.rawValue]
    return Int((Double(maximumInFlight) * Double(percent) / 100).rounded(.down))
  }

  /// Larger is admitted first: the class, then the age (oldest first) or youth (newest first).
  func rank(_ waiter: Waiter) -> (Int, Int64) {
    (waiter.priority.rawValue, order == .oldestFirst ? -Int64(waiter.id) : Int64(waiter.id))
  }

  func wakeAt() -> PaceInstant? {
    guard let maximumWait else { return nil }
    return waiting.map { $0.at.advanced(by: maximumWait) }.min()
  }

  mutating func expire(now: PaceInstant, _ action: inout Action) {
    guard let maximumWait else { return }
    let expired = waiting.filter { $0.at.advanced(by: maximumWait) <= now }
      .sorted { ($0.priority.rawValue, $0.id) < ($1.priority.rawValue, $1.id) }
    for waiter in expired {
      action.refused.append(Refused(waiter.id, .error(.maximumWaitReached(waited: waiter.at.duration(to: now)))))
    }
    waiting.removeAll { $0.at.advanced(by: maximumWait) <= now }
  }

  mutating func admit(_ action: inout Action) {
    while let best = waiting.max(by: { rank($0) < rank($1) }), inFlight < ceiling(best.priority) {
      waiting.removeAll { $0.id == best.id }
      inFlight += 1
      action.admitted.append(best.id)
    }
  }

  mutating func settle(now: PaceInstant) -> Action {
    var action = Action()
    expire(now: now, &action)
    admit(&action)
    action.wakeAt = wakeAt()
    return action
  }

  mutating func tryAcquire(priority: AdmissionPriority) -> Bool {
    guard inFlight < ceiling(priority) else { return false }
    inFlight += 1
    return true
  }

  mutating func enqueue(id: UInt64, priority: AdmissionPriority, now: PaceInstant) -> Action {
    var action = Action()
    expire(now: now, &action)
    let newcomer = Waiter(id: id, priority: priority, at: now)
    if inFlight < ceiling(priority) {
      inFlight += 1
      action.admitted.append(id)
    } else if waiting.count < maximumQueued {
      waiting.append(newcomer)
    } else {
      let last = (waiting + [newcomer]).min { rank($0) < rank($1) }!
      if last.id == id {
        action.refused.append(Refused(id, .error(.queueFull(maximumQueued: maximumQueued, waited: .zero))))
      } else {
        waiting.removeAll { $0.id == last.id }
        action.refused.append(
          Refused(last.id, .error(.queueFull(maximumQueued: maximumQueued, waited: last.at.duration(to: now)))))
        waiting.append(newcomer)
      }
    }
    action.wakeAt = wakeAt()
    return action
  }

  mutating func release(now: PaceInstant) -> Action {
    inFlight -= 1
    return settle(now: now)
  }

  mutating func cancel(id: UInt64, now: PaceInstant) -> Action {
    var action = Action()
    if waiting.contains(where: { $0.id == id }) {
      waiting.removeAll { $0.id == id }
      action.refused.append(Refused(id, .cancelled))
    }
    let rest = settle(now: now)
    action.admitted = rest.admitted
    action.refused += rest.refused
    action.wakeAt = rest.wakeAt
    return action
  }

  mutating func setMaximumInFlight(_ maximum: Int, now: PaceInstant) -> Action {
    maximumInFlight = maximum
    return settle(now: now)
  }
}

/// The machine against the reference model on seeded random timelines: every action of every
/// event, and the counts, at every step; the timer fires at the `wakeAt` the machine asked for.
@Suite(.offThePool) struct ConcurrencyLimiterReferenceModelTests {
  @Test(arguments: 0..<UInt64(fuzzRuns(200)))
  func agreesWithTheReferenceModel(seed: UInt64) {
    var random = SeededGenerator(seed: seed)
    let maximumInFlight = Int.random(in: 1...6, using: &random)
    let maximumQueued = [0, 1, 2, 4, 8, Int.max].randomElement(using: &random)!
    let order: ConcurrencyQueueOrder = Bool.random(using: &random) ? .oldestFirst : .newestFirst
    let maximumWait = [nil, Duration.milliseconds(50), .milliseconds(300)].randomElement(using: &random)!
    let defaultPercent = [100, 80, 75, 50].randomElement(using: &random)!
    let shares = PriorityShares(
      defaultPercent: defaultPercent,
      sheddablePercent: [defaultPercent, defaultPercent / 2, 0].randomElement(using: &random)!)
    var machine = ConcurrencyLimiterStateMachine(
      .init(
        maximumInFlight: maximumInFlight, maximumQueued: maximumQueued, order: order, maximumWait: maximumWait,
        shares: shares))
    var model = ConcurrencyLimiterReferenceModel(
      maximumInFlight: maximumInFlight, maximumQueued: maximumQueued, order: order, maximumWait: maximumWait,
      shares: shares)
    var now = PaceInstant.zero
    var wakeAt: PaceInstant?
    var waiting: [UInt64] = []
    var nextID: UInt64 = 0
    let context =
      "seed \(seed) (limit \(maximumInFlight), queue \(maximumQueued), \(order), wait \(String(describing: maximumWait)), \(shares))"

    func check(
      _ step: Int, _ event: String, _ actual: ConcurrencyLimiterStateMachine.Action,
      _ expected: ConcurrencyLimiterStateMachine.Action
    ) {
      #expect(actual == expected, "\(context), step \(step) at \(now): \(event)")
      wakeAt = actual.wakeAt
      if !actual.admitted.isEmpty {
        // An admission never takes the calls in flight past the limit.
        #expect(machine.inFlight <= machine.configuration.maximumInFlight, "\(context), step \(step)")
      }
      let left = Set(actual.admitted + actual.refused.map(\.id))
      waiting.removeAll { left.contains($0) }
    }

    for step in 0..<400 {
      let target = now.advanced(by: .milliseconds(Int.random(in: 0...40, using: &random)))
      // The timer fires at the deadline it was armed for, if that comes first.
      if let deadline = wakeAt, deadline <= target {
        now = deadline
        check(step, "timer", machine.timerFired(now: now), model.settle(now: now))
        continue
      }
      now = target
      let priority = AdmissionPriority.allCases.randomElement(using: &random)!
      switch Int.random(in: 0..<12, using: &random) {
      case 0..<5:
        nextID += 1
        waiting.append(nextID)
        check(
          step, "enqueue \(nextID) \(priority)", machine.enqueue(id: nextID, priority: priority, now: now),
          model.enqueue(id: nextID, priority: priority, now: now))
      case 5:
        #expect(
          machine.tryAcquire(priority: priority) == model.tryAcquire(priority: priority), "\(context), step \(step)")
      case 6..<10 where machine.inFlight > 0:
        check(step, "release", machine.release(now: now), model.release(now: now))
      case 10 where !waiting.isEmpty:
        let id = waiting.randomElement(using: &random)!
        check(step, "cancel \(id)", machine.cancel(id: id, now: now), model.cancel(id: id, now: now))
      case 11:
        let limit = Int.random(in: 1...6, using: &random)
        check(
          step, "limit \(limit)", machine.setMaximumInFlight(limit, now: now), model.setMaximumInFlight(limit, now: now)
        )
      default:
        continue
      }
      #expect(machine.inFlight == model.inFlight, "\(context), step \(step)")
      #expect(machine.waitingCount == model.waiting.count, "\(context), step \(step)")
    }
  }
}
