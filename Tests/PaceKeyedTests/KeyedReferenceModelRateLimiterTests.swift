import PaceTestSupport
import Testing

@testable import Pace

/// A keyed rate limiter equals one reference model (and one `RateLimiter`) per key, each key under
/// its own limit, on thousands of seeded random timelines: every decision exact (`remaining` and
/// `retryAfter`), every waiting request granted when a `RateLimiter` of its own grants it, on exact
/// timers and on timers that fire late.
@Suite(.offThePool) struct KeyedReferenceModelRateLimiterTests {
  /// The plans a key can be on: every policy.
  static let plans: [RateLimit] = [
    RateLimit(permits: 1, per: .milliseconds(100)),
    RateLimit(permits: 3, per: .milliseconds(300), burst: 5),
    RateLimit(permits: 7, per: .seconds(1), burst: 2),
    RateLimit(permits: 2, per: .milliseconds(700), burst: 6),
    .slidingWindow(permits: 3, per: .milliseconds(300)),
    .slidingWindow(permits: 5, per: .seconds(1)),
    .fixedWindow(permits: 2, per: .milliseconds(250)),
    .fixedWindow(permits: 6, per: .milliseconds(700)),
  ]

  /// Each key's limit on one timeline: one for every key (a uniform limiter), or a plan per key,
  /// which the timeline may change between calls (a key's plan changes are not modelled by a
  /// reference, so only when `changing` is false).
  struct Limits {
    var perKey: [RateLimit]
    var uniform: Bool

    static func random(keys: Int, _ generator: inout SeededGenerator) -> Self {
      if Bool.random(using: &generator) {
        return Self(perKey: Array(repeating: plans.randomElement(using: &generator)!, count: keys), uniform: true)
      }
      return Self(perKey: (0..<keys).map { _ in plans.randomElement(using: &generator)! }, uniform: false)
    }

    func limiter(clock: AsyncClock) -> KeyedRateLimiter<Int> {
      if uniform { return KeyedRateLimiter(limit: perKey[0], clock: clock) }
      let perKey = self.perKey
      return KeyedRateLimiter(limits: { perKey[$0] }, clock: clock)
    }
  }

  /// A `TestScheduler`, and the clock the limiters run on: the same, or one whose timers fire late.
  static func clock(_ lateness: KeyedReferenceModelTests.Lateness?) -> (TestScheduler, AsyncClock) {
    let (base, scheduler) = KeyedReferenceModelTests.schedulers(lateness)
    if let coarse = scheduler as? CoarseScheduler { return (base, AsyncClock(scheduler: coarse)) }
    return (base, AsyncClock(scheduler: base))
  }

  /// `tryAcquire` at the cost rule's edges and in between, on random keys and pauses, against one
  /// reference model per key.
  static func checkDecisions(seed: UInt64, lateness: KeyedReferenceModelTests.Lateness?) {
    var generator = SeededGenerator(seed: seed)
    let keys = Int.random(in: 1...6, using: &generator)
    let limits = Limits.random(keys: keys, &generator)
    let (scheduler, clock) = Self.clock(lateness)
    let keyed = limits.limiter(clock: clock)
    var models = limits.perKey.map { RateLimitReferenceModel(limit: $0) }
    let context = "seed \(seed), \(limits.uniform ? "uniform" : "per key"), " + (lateness.map { "\($0)" } ?? "exact")
    var time: Int64 = 0
    for step in 0..<Int.random(in: 1...80, using: &generator) {
      time += [0, 0, 1, 10, 50, 100, 150, 300, 700].randomElement(using: &generator)!
      scheduler.advance(to: ms(time))
      let key = Int.random(in: 0..<keys, using: &generator)
      let burst = limits.perKey[key].burst
      let cost = [0, 1, 1, 1, 2, burst, burst + 1, .max].randomElement(using: &generator)!
      let expected = models[key].tryAcquire(cost: cost, at: ms(time))
      #expect(KeyedReferenceModelTests.decide(keyed, key, cost: cost) == expected, "\(context), step \(step)")
      #expect(
        keyed.availablePermits(for: key) == models[key].availablePermits(at: ms(time)), "\(context), step \(step)")
    }
    // Every bucket fills up again, and then its key is forgotten.
    scheduler.advance(to: ms(time + 60_000))
    #expect(keyed.trackedKeyCount == 0, "\(context)")
    #expect(scheduler.pendingDeadlines.isEmpty, "\(context)")
    #expect(keyed.heldStorageBytes == 0, "\(context): storage held once quiet")
  }

  @Test(arguments: 0..<4)
  func everyDecisionIsTheReferenceModelsOnExactTimers(batch: UInt64) async {
    let runs = UInt64(fuzzRuns(500))
    for seed in batch * runs..<(batch + 1) * runs {
      await Task.yield()
      Self.checkDecisions(seed: seed, lateness: nil)
    }
  }

  @Test(arguments: 0..<2)
  func everyDecisionIsTheReferenceModelsWhenTimersFireLate(batch: UInt64) async {
    let runs = UInt64(fuzzRuns(500))
    for seed in batch * runs..<(batch + 1) * runs {
      await Task.yield()
      var generator = SeededGenerator(seed: seed &* 31 &+ 5)
      Self.checkDecisions(seed: seed, lateness: .random(&generator))
    }
  }

  /// Waiting requests, cancellations, decisions and pauses on several keys under their own plans,
  /// against one `RateLimiter` per key on a scheduler of its own, as late: after every step the
  /// same requests wait and the same permits remain.
  static func checkWaiting(seed: UInt64, lateness: KeyedReferenceModelTests.Lateness?) async {
    var generator = SeededGenerator(seed: seed)
    let keys = Int.random(in: 1...3, using: &generator)
    let limits = Limits.random(keys: keys, &generator)
    let (scheduler, clock) = Self.clock(lateness)
    let keyed = limits.limiter(clock: clock)
    let singles = limits.perKey.map { limit in
      let (scheduler, clock) = Self.clock(lateness)
      return (scheduler, RateLimiter(limit: limit, clock: clock))
    }
    let context = "seed \(seed), \(limits.uniform ? "uniform" : "per key"), " + (lateness.map { "\($0)" } ?? "exact")
    var requests: [(Task<Void, any Error>, Task<Void, any Error>)] = []
    let (finishedKeyed, finishedSingle) = (LockedState(0), LockedState(0))
    var time: Int64 = 0
    for step in 0..<Int.random(in: 1...40, using: &generator) {
      let key = Int.random(in: 0..<keys, using: &generator)
      let single = singles[key].1
      let cost = Int.random(in: 0...limits.perKey[key].burst, using: &generator)
      switch Int.random(in: 0..<6, using: &generator) {
      case 0, 1:
        // On late timers a request can join the queue as it grants an earlier one whose turn came
        // before the overdue timer fired: the waiting count stays, and the earlier request's
        // task finishes; both together say that the new request has arrived.
        let first = await startRequest(waitingCount: { keyed.waitingCount + finishedKeyed.withLock { $0 } }) {
          defer { finishedKeyed.withLock { $0 += 1 } }
          try await keyed.acquire(key, cost: cost)
        }
        let second = await startRequest(waitingCount: { single.waitingCount + finishedSingle.withLock { $0 } }) {
          defer { finishedSingle.withLock { $0 += 1 } }
          try await single.acquire(cost: cost)
        }
        requests.append((first, second))
      case 2:
        guard let (first, second) = requests.randomElement(using: &generator) else { break }
        first.cancel()
        second.cancel()
        // The cancellation handlers run as the tasks are cancelled: nothing is left to await.
        _ = await (first.result, second.result)
      case 3:
        #expect(
          KeyedReferenceModelTests.decide(keyed, key, cost: cost) == single.tryAcquire(cost: cost),
          "\(context), step \(step)")
      default:
        time += Int64.random(in: 0...400, using: &generator)
        scheduler.advance(to: ms(time))
        for (scheduler, _) in singles { scheduler.advance(to: ms(time)) }
      }
      #expect(keyed.waitingCount == singles.reduce(0) { $0 + $1.1.waitingCount }, "\(context), step \(step)")
      for (key, (_, single)) in singles.enumerated() {
        #expect(keyed.availablePermits(for: key) == single.availablePermits, "\(context), step \(step), key \(key)")
      }
    }
    time += 60_000
    scheduler.advance(to: ms(time))
    for (scheduler, _) in singles { scheduler.advance(to: ms(time)) }
    // Every request was granted; any left (a failure) is cancelled, so that the test ends.
    #expect(keyed.waitingCount == 0, "\(context)")
    for (first, second) in requests {
      first.cancel()
      second.cancel()
      _ = await (first.result, second.result)
    }
    #expect(keyed.trackedKeyCount == 0, "\(context)")
    #expect(scheduler.pendingDeadlines.isEmpty, "\(context)")
  }

  @Test func waitingRequestsAreGrantedAsByOneRateLimiterPerKeyOnExactTimers() async {
    for seed in 0..<UInt64(fuzzRuns(150)) {
      await Self.checkWaiting(seed: seed, lateness: nil)
    }
  }

  @Test func waitingRequestsAreGrantedAsByOneRateLimiterPerKeyWhenTimersFireLate() async {
    for seed in 0..<UInt64(fuzzRuns(150)) {
      var generator = SeededGenerator(seed: seed &* 13 &+ 3)
      await Self.checkWaiting(seed: seed, lateness: .random(&generator))
    }
  }
}
