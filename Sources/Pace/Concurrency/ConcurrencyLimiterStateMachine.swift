/// One concurrency limit, apart from any clock, lock or continuation: `now` comes in, admissions,
/// refusals and the next deadline come out. ``ConcurrencyLimiter`` keeps one;
/// ``KeyedConcurrencyLimiter`` one per key.
///
/// The rules (the article states them for users):
/// - A call of class `c` is admitted when the calls in flight are fewer than `c`'s share of the
///   limit (``PriorityShares/maximumInFlight(for:of:)``). After every event, waiting calls are
///   admitted highest class first, within a class in the queue's order, while the head's class
///   has room; so a waiting call is never admissible, and a call arriving can be admitted at once
///   exactly when its class has room.
/// - A waiting call is refused with `maximumWaitReached` at `enqueued + maximumWait`: every event
///   at or after that instant refuses it before it admits anyone.
/// - When `maximumQueued` wait and another must wait, the one among them all that would be
///   admitted last (the lowest class; within it the newest in oldest-first order, the oldest in
///   newest-first order) is refused with `queueFull`.
package struct ConcurrencyLimiterStateMachine: Sendable {
  /// The limit's settings, checked by the limiters' initialisers.
  package struct Configuration: Sendable, Hashable {
    /// How many calls may be in flight at once. Positive.
    package var maximumInFlight: Int
    /// How many calls may wait. Not negative.
    package var maximumQueued: Int
    /// Which waiting call of a class goes first.
    package var order: ConcurrencyQueueOrder
    /// How long a call may wait; `nil` for as long as it takes. Positive.
    package var maximumWait: Duration?
    /// How much of the limit each class may fill.
    package var shares: PriorityShares

    package init(
      maximumInFlight: Int, maximumQueued: Int = .max, order: ConcurrencyQueueOrder = .oldestFirst,
      maximumWait: Duration? = nil, shares: PriorityShares = .unreserved
    ) {
      self.maximumInFlight = maximumInFlight
      self.maximumQueued = maximumQueued
      self.order = order
      self.maximumWait = maximumWait
      self.shares = shares
    }
  }

  /// Why a waiting call leaves the queue without a permit.
  package enum Refusal: Sendable, Hashable {
    /// Refused with this error.
    case error(ConcurrencyLimiterError)
    /// Its task was cancelled.
    case cancelled
  }

  /// A waiting call refused, by the id it was queued with.
  package struct Refused: Sendable, Hashable {
    package var id: UInt64
    package var refusal: Refusal

    package init(_ id: UInt64, _ refusal: Refusal) {
      self.id = id
      self.refusal = refusal
    }
  }

  /// What an event does.
  package struct Action: Sendable, Hashable {
    /// The calls admitted, in the order they were admitted: each now holds a permit.
    package var admitted: [UInt64]
    /// The waiting calls refused.
    package var refused: [Refused]
    /// The earliest instant at which a waiting call reaches its maximum wait: the one timer to
    /// keep armed; `nil` when none is needed.
    package var wakeAt: PaceInstant?

    package init(admitted: [UInt64] = [], refused: [Refused] = [], wakeAt: PaceInstant? = nil) {
      self.admitted = admitted
      self.refused = refused
      self.wakeAt = wakeAt
    }
  }

  private struct Waiter: Sendable {
    var priority: AdmissionPriority
    var enqueuedAt: PaceInstant
  }

  /// One class's waiting calls' ids in arrival order, from `head`; ids no longer in `waiters`
  /// (cancelled, refused) are skipped as they surface and compacted away.
  private struct ClassQueue: Sendable {
    var ids: [UInt64] = []
    var head = 0
    var count = 0
  }

  package private(set) var configuration: Configuration
  /// The calls holding a permit.
  package private(set) var inFlight = 0
  private var waiters: [UInt64: Waiter] = [:]
  /// Indexed by ``AdmissionPriority/rawValue``.
  private var queues = [ClassQueue](repeating: ClassQueue(), count: AdmissionPriority.allCases.count)

  package init(_ configuration: Configuration) {
    self.configuration = configuration
  }

  /// How many calls wait.
  package var waitingCount: Int { waiters.count }

  /// How many calls of `priority` wait.
  package func waitingCount(priority: AdmissionPriority) -> Int { queues[priority.rawValue].count }

  /// Whether the limit holds nothing worth keeping: no call in flight, none waiting.
  package var isIdle: Bool { inFlight == 0 && waiters.isEmpty }

  /// How many calls may be in flight when one of `priority` is admitted.
  package func ceiling(_ priority: AdmissionPriority) -> Int {
    configuration.shares.maximumInFlight(for: priority, of: configuration.maximumInFlight)
  }

  /// A call of `priority` that does not wait: admitted (`true`, it holds a permit) if its class
  /// has room now, else nothing changes.
  package mutating func tryAcquire(priority: AdmissionPriority) -> Bool {
    guard inFlight < ceiling(priority) else { return false }
    inFlight += 1
    return true
  }

  /// A call of `priority` arrives at `now`, ready to wait as `id`: admitted at once (`id` in
  /// `admitted`), refused (`id` in `refused`), or queued.
  package mutating func enqueue(id: UInt64, priority: AdmissionPriority, now: PaceInstant) -> Action {
    var action = Action()
    expire(now: now, into: &action)
    if inFlight < ceiling(priority) {
      inFlight += 1
      action.admitted.append(id)
    } else if waiters.count < configuration.maximumQueued {
      append(id, Waiter(priority: priority, enqueuedAt: now))
    } else if let last = admittedLast(),
      last.priority < priority || (last.priority == priority && configuration.order == .newestFirst)
    {
      // The newcomer is admitted before the last of the queue: the last makes room.
      let waiter = remove(last.id)!
      action.refused.append(
        Refused(
          last.id,
          .error(.queueFull(maximumQueued: configuration.maximumQueued, waited: waiter.enqueuedAt.duration(to: now)))))
      append(id, Waiter(priority: priority, enqueuedAt: now))
    } else {
      action.refused.append(Refused(id, .error(.queueFull(maximumQueued: configuration.maximumQueued, waited: .zero))))
    }
    action.wakeAt = earliestDeadline()
    return action
  }

  /// A call in flight releases its permit at `now`.
  package mutating func release(now: PaceInstant) -> Action {
    precondition(inFlight > 0, "ConcurrencyLimiter: a permit released that was never granted")
    inFlight -= 1
    return settle(now: now)
  }

  /// The waiting call `id`'s task is cancelled at `now`: it leaves the queue (refused as
  /// cancelled), if it is still there.
  package mutating func cancel(id: UInt64, now: PaceInstant) -> Action {
    var action = Action()
    if remove(id) != nil { action.refused.append(Refused(id, .cancelled)) }
    let rest = settle(now: now)
    action.admitted = rest.admitted
    action.refused += rest.refused
    action.wakeAt = rest.wakeAt
    return action
  }

  /// The timer armed for `wakeAt` fires at `now`.
  package mutating func timerFired(now: PaceInstant) -> Action {
    settle(now: now)
  }

  /// The limit changes at `now`: a higher one admits waiting calls at once; a lower one lets the
  /// calls in flight finish and admits none until they are below it.
  package mutating func setMaximumInFlight(_ maximumInFlight: Int, now: PaceInstant) -> Action {
    configuration.maximumInFlight = maximumInFlight
    return settle(now: now)
  }

  /// Refuses the calls past their maximum wait, then admits what has room.
  private mutating func settle(now: PaceInstant) -> Action {
    var action = Action()
    expire(now: now, into: &action)
    admit(into: &action)
    action.wakeAt = earliestDeadline()
    return action
  }

  /// Admits waiting calls, highest class first, while the head's class has room.
  private mutating func admit(into action: inout Action) {
    for priority in AdmissionPriority.allCases.reversed() {
      while queues[priority.rawValue].count > 0 {
        // Lower classes have no more room than this one.
        guard inFlight < ceiling(priority) else { return }
        let id = configuration.order == .oldestFirst ? oldest(priority)! : newest(priority)!
        remove(id)
        inFlight += 1
        action.admitted.append(id)
      }
    }
  }

  /// Refuses the waiting calls whose maximum wait has passed at `now`, lowest class first, oldest
  /// first.
  private mutating func expire(now: PaceInstant, into action: inout Action) {
    guard let maximumWait = configuration.maximumWait, !waiters.isEmpty else { return }
    for priority in AdmissionPriority.allCases {
      while let id = oldest(priority), let waiter = waiters[id], waiter.enqueuedAt.advanced(by: maximumWait) <= now {
        remove(id)
        action.refused.append(Refused(id, .error(.maximumWaitReached(waited: waiter.enqueuedAt.duration(to: now)))))
      }
    }
  }

  /// The earliest instant a waiting call reaches its maximum wait: each class's oldest call's.
  private mutating func earliestDeadline() -> PaceInstant? {
    guard let maximumWait = configuration.maximumWait else { return nil }
    var earliest: PaceInstant?
    for priority in AdmissionPriority.allCases {
      guard let id = oldest(priority), let waiter = waiters[id] else { continue }
      let deadline = waiter.enqueuedAt.advanced(by: maximumWait)
      if earliest.map({ deadline < $0 }) ?? true { earliest = deadline }
    }
    return earliest
  }

  /// The waiting call that would be admitted last: the lowest class's, last in the queue's order.
  private mutating func admittedLast() -> (id: UInt64, priority: AdmissionPriority)? {
    for priority in AdmissionPriority.allCases where queues[priority.rawValue].count > 0 {
      let id = configuration.order == .oldestFirst ? newest(priority)! : oldest(priority)!
      return (id, priority)
    }
    return nil
  }

  private mutating func append(_ id: UInt64, _ waiter: Waiter) {
    waiters[id] = waiter
    queues[waiter.priority.rawValue].ids.append(id)
    queues[waiter.priority.rawValue].count += 1
  }

  /// Takes `id` out of the queue; its slot in its class's ids is skipped later.
  @discardableResult
  private mutating func remove(_ id: UInt64) -> Waiter? {
    guard let waiter = waiters.removeValue(forKey: id) else { return nil }
    let index = waiter.priority.rawValue
    queues[index].count -= 1
    let slots = queues[index].ids.count - queues[index].head
    if queues[index].count == 0 {
      queues[index].ids.removeAll(keepingCapacity: slots <= 64)
      queues[index].head = 0
    } else if slots > 64, slots > 2 * queues[index].count {
      // Compacted once half the slots are dead: amortised O(1) per call.
      let waiters = self.waiters
      queues[index].ids = queues[index].ids[queues[index].head...].filter { waiters[$0] != nil }
      queues[index].head = 0
    }
    return waiter
  }

  /// The oldest waiting call of `priority`, skipping (and dropping) the dead slots before it.
  private mutating func oldest(_ priority: AdmissionPriority) -> UInt64? {
    let index = priority.rawValue
    while queues[index].head < queues[index].ids.count {
      let id = queues[index].ids[queues[index].head]
      if waiters[id] != nil { return id }
      queues[index].head += 1
    }
    return nil
  }

  /// The newest waiting call of `priority`, skipping (and dropping) the dead slots after it.
  private mutating func newest(_ priority: AdmissionPriority) -> UInt64? {
    let index = priority.rawValue
    while queues[index].head < queues[index].ids.count {
      let id = queues[index].ids[queues[index].ids.count - 1]
      if waiters[id] != nil { return id }
      queues[index].ids.removeLast()
    }
    return nil
  }
}
