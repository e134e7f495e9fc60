/// The logic of both rate limiters as a value type: one key's counter of permits, under any
/// ``RateLimit/Algorithm`` (a ``RateLimitCounting``), and the requests waiting for it, in arrival order.
///
/// ``RateLimiter`` keeps one machine; ``KeyedRateLimiter`` builds one for a key from the key's
/// stored state and queue, runs one event and stores them back. So the decision, the cost rule,
/// the FIFO grant loop and the reported permits are written once, and both limiters give the same
/// answers for every algorithm.
///
/// The machine holds no continuation, lock or clock: requests are ids, `now` comes in and a
/// ``RateLimitAction`` (the ids to grant in order, the id refused, when to look again) comes out.
/// The driver keeps the continuations by id and arms its timer for ``RateLimitAction/wakeAt``.
///
/// - A request never overtakes an earlier one, even a small request behind a large one.
/// - A request of cost 0 waits as a request of cost 1 would, and takes nothing when its turn comes.
/// - ``tryAcquire(cost:now:)`` is refused while anyone waits, and never changes the queue.
/// - The driver refuses a cost above the burst before it queues it (it could never be granted).
///
/// `@inlinable` throughout, so that a ``KeyedRateLimiter``'s decision is specialised, and its
/// arithmetic inlined, in the module that calls it.
@usableFromInline
struct RateLimitMachine<Counter: RateLimitCounting> {
  @usableFromInline var counter: Counter
  /// The waiting requests; `nil` when none has waited yet, so that a key of a
  /// ``KeyedRateLimiter`` with no waiter pays for no queue. Empty and `nil` mean the same.
  @usableFromInline var queue: RateLimitQueue?

  @inlinable
  init(counter: Counter, queue: RateLimitQueue? = nil) {
    self.counter = counter
    self.queue = queue
  }

  /// How many requests wait.
  @inlinable var waitingCount: Int { queue?.count ?? 0 }

  /// Whether any request waits.
  @inlinable var isWaiting: Bool { waitingCount > 0 }

  /// The whole permits a request could take at `now`; 0 while a token bucket is in debt.
  @inlinable
  mutating func availablePermits(now: PaceInstant) -> Int {
    counter.refill(now: now)
    return counter.availablePermits
  }

  /// Takes `cost` permits if they are available and nobody waits; never changes the queue.
  ///
  /// The cost rule: a cost of 0 takes nothing and gets cost 1's answer; a cost above the burst is
  /// `.limited(retryAfter: RateLimitDecision.never)`. `cost` must not be negative.
  ///
  /// - Returns: `.allowed(remaining:)` with the whole permits left, or `.limited(retryAfter:)`
  ///   with how long until the same request would fit if nothing else is taken (behind the
  ///   waiting requests, granted in order first, while some wait).
  @inlinable
  mutating func tryAcquire(cost: Int, now: PaceInstant) -> RateLimitDecision {
    Self.tryAcquire(cost: cost, now: now, counter: &counter, queue: queue)
  }

  /// ``tryAcquire(cost:now:)`` on the counter alone, given the waiting requests (`nil` when nobody
  /// waits): the same decision for a caller that holds no machine, as ``KeyedRateLimiter`` on a
  /// key it stores, so that its hot path copies no queue.
  @inlinable @inline(__always)
  static func tryAcquire(
    cost: Int, now: PaceInstant, counter: inout Counter, queue: RateLimitQueue?
  ) -> RateLimitDecision {
    counter.refill(now: now)
    // The common case, kept small so that it inlines: nobody waits, a cost from 1 through the
    // burst (in one comparison), and the permits are there. Given `queue: nil`, a caller's
    // decision is then a few instructions on its counter, with no queue built or destroyed; a
    // keyed decision makes it between the key's cache miss and the lock's release.
    if queue?.isEmpty ?? true, UInt(bitPattern: cost &- 1) < UInt(bitPattern: counter.burst), counter.canTake(cost) {
      counter.take(cost)
      return .allowed(remaining: counter.availablePermits)
    }
    return decideWithoutTaking(cost: cost, now: now, counter: counter, queue: queue)
  }

  /// The rest of ``tryAcquire(cost:now:counter:queue:)``, on a counter refilled to `now`: a
  /// request refused (behind waiting requests, for want of permits, or for a cost above the
  /// burst), or a query (cost 0). None of them takes permits.
  @inlinable @inline(never)
  static func decideWithoutTaking(
    cost: Int, now: PaceInstant, counter: Counter, queue: RateLimitQueue?
  ) -> RateLimitDecision {
    if UInt(bitPattern: cost &- 1) < UInt(bitPattern: counter.burst) {
      if queue?.isEmpty == false {
        return .limited(retryAfter: wait(from: now, until: counter.readyTime(for: cost, behind: queue!)))
      }
      return .limited(retryAfter: wait(from: now, until: counter.readyTime(for: cost)))
    }
    if cost > counter.burst { return .limited(retryAfter: RateLimitDecision.never) }
    // Cost 0: cost 1's answer, taking nothing.
    if queue?.isEmpty == false {
      return .limited(retryAfter: wait(from: now, until: counter.readyTime(for: 1, behind: queue!)))
    }
    guard counter.canTake(1) else { return .limited(retryAfter: wait(from: now, until: counter.readyTime(for: 1))) }
    return .allowed(remaining: counter.availablePermits)
  }

  /// A refused request's `retryAfter`: from `now` until `ready`, never negative; and
  /// ``RateLimitDecision/never``, the one spelling of "no wait lets it through", when `ready` is
  /// `nil` (the permits never come back, even at the end of the timeline; it used to be the
  /// duration until ``PaceInstant/max``, 0 at that instant itself).
  @inlinable
  static func wait(from now: PaceInstant, until ready: PaceInstant?) -> Duration {
    guard let ready else { return RateLimitDecision.never }
    return ready > now ? now.duration(to: ready) : .zero
  }

  /// A request `id` for `cost` permits joins the end of the queue; the requests that fit are
  /// granted, in order.
  @inlinable
  mutating func enqueue(id: UInt64, cost: Int, now: PaceInstant) -> RateLimitAction {
    if queue == nil { queue = RateLimitQueue() }
    queue!.append(id: id, cost: cost)
    return grant(now: now)
  }

  /// The waiting request `id` leaves the queue, refused; the head may have changed, so the
  /// requests that fit now are granted. If `id` does not wait (it was granted), nobody is refused,
  /// and the action still says when to look again, so that the driver's timer stays right.
  @inlinable
  mutating func cancel(id: UInt64, now: PaceInstant) -> RateLimitAction {
    let removed = queue?.remove(id: id) ?? false
    var action = grant(now: now)
    if removed { action.refused = id }
    return action
  }

  /// The driver's timer fired: the requests that fit now are granted, in order.
  @inlinable
  mutating func timerFired(now: PaceInstant) -> RateLimitAction {
    grant(now: now)
  }

  /// Grants the waiting requests that fit, in order, and says when the next one will.
  @inlinable
  mutating func grant(now: PaceInstant) -> RateLimitAction {
    counter.refill(now: now)
    guard var queue = queue.take() else { return .none }
    defer { self.queue = queue }
    var action = RateLimitAction.none
    while let head = queue.first {
      // A request of cost 0 waits for what cost 1 would, and takes nothing.
      let needed = Swift.max(head.cost, 1)
      guard counter.canTake(needed) else {
        // Ready only beyond the end of the timeline: the request waits until it is cancelled,
        // with no timer (one armed at the end would find it still not ready, again and again).
        action.wakeAt = counter.readyTime(for: needed)
        return action
      }
      if head.cost > 0 { counter.take(head.cost) }
      queue.removeFirst()
      action.granted.append(head.id)
    }
    return action
  }
}

/// The token bucket's machine, which ``KeyedRateLimiter`` runs for each key.
@usableFromInline
typealias RateLimitStateMachine = RateLimitMachine<TokenBucket>

extension RateLimitMachine where Counter == TokenBucket {
  /// The token bucket.
  @inlinable var bucket: TokenBucket {
    get { counter }
    _modify { yield &counter }
  }

  @inlinable
  init(bucket: TokenBucket, queue: RateLimitQueue? = nil) {
    self.init(counter: bucket, queue: queue)
  }
}

/// A request waiting in a limiter's driver: its continuation, and whether its task is one a
/// ``TestScheduler`` counts (a pacer's invocation, a tracked task), which waits rather than runs
/// while it is here. Plain data, so a labelled tuple, which `@inlinable` code builds without an
/// initialiser of its own.
@usableFromInline
typealias RateLimitWaiter = (continuation: UnsafeContinuation<Void, any Error>, tracked: Bool)

/// What a ``RateLimitMachine`` asks its driver to do.
@usableFromInline
struct RateLimitAction: Equatable, Sendable {
  /// The waiting requests to resume, in this order.
  @usableFromInline var granted: [UInt64]
  /// The request to resume with `CancellationError`.
  @usableFromInline var refused: UInt64?
  /// When the first request still waiting fits: the timer's deadline. `nil` when nobody waits,
  /// or when the first request fits only beyond the end of the timeline.
  @usableFromInline var wakeAt: PaceInstant?

  @inlinable
  init(granted: [UInt64] = [], refused: UInt64? = nil, wakeAt: PaceInstant? = nil) {
    self.granted = granted
    self.refused = refused
    self.wakeAt = wakeAt
  }

  /// Nothing to resume and no timer needed.
  @inlinable static var none: Self { Self() }
}

/// The requests waiting for one bucket, in arrival order, with the permits they ask for.
///
/// A value, because ``KeyedRateLimiter`` keeps its keys' queues in a dictionary and reads them
/// by copy; the ids' ring is noncopyable, so it lives in an ``Order`` box that copies share until
/// one of them changes.
@usableFromInline
package struct RateLimitQueue {
  /// The box of the ids' ring, a class so that the queue stays copyable.
  @usableFromInline
  final class Order {
    /// The ids in arrival order; a cancelled one stays until it reaches the head.
    @usableFromInline var ring: RingBuffer<UInt64>

    /// Holds `ring`: empty for a new queue, a copy of a shared ring for a queue about to change it.
    @inlinable init(_ ring: consuming RingBuffer<UInt64> = RingBuffer()) {
      self.ring = ring
    }
  }

  /// The ids in arrival order, shared with this queue's copies until one of them changes.
  @usableFromInline var order = Order()
  /// The cost of each waiting request, by id; a cancelled request is removed here at once.
  @usableFromInline var costs: [UInt64: Int] = [:]
  /// The permits the waiting requests ask for, in all: what a refused `tryAcquire` waits behind.
  @usableFromInline var permits = 0

  @inlinable init() {}

  @inlinable var count: Int { costs.count }

  @inlinable var isEmpty: Bool { costs.isEmpty }

  /// The request `id` for `cost` permits joins the end, behind every request already waiting.
  @inlinable
  mutating func append(id: UInt64, cost: Int) {
    makeOrderUnique()
    order.ring.append(id)
    costs[id] = cost
    permits &+= cost
  }

  /// The first request still waiting; the cancelled ones before it are dropped.
  @inlinable
  var first: (id: UInt64, cost: Int)? {
    mutating get {
      while let id = order.ring.first {
        if let cost = costs[id] { return (id, cost) }
        makeOrderUnique()
        _ = order.ring.popFirst()
      }
      return nil
    }
  }

  /// Removes the first request; call after ``first`` found one.
  @inlinable
  mutating func removeFirst() {
    makeOrderUnique()
    guard let id = order.ring.popFirst(), let cost = costs.removeValue(forKey: id) else { return }
    permits &-= cost
  }

  /// Removes the request `id` wherever it waits; `false` if it does not wait.
  @inlinable
  mutating func remove(id: UInt64) -> Bool {
    guard let cost = costs.removeValue(forKey: id) else { return false }
    permits &-= cost
    // With nobody left, the skipped ids go too, so the order keeps no garbage; its storage stays,
    // so that a queue which fills and empties in turn does not allocate each time.
    if costs.isEmpty {
      if isKnownUniquelyReferenced(&order) {
        order.ring.removeAll(keepingCapacity: true)
      } else {
        order = Order()
      }
    }
    return true
  }

  /// Calls `body` with the cost of each waiting request, in arrival order.
  @inlinable
  func forEachWaitingCost(_ body: (Int) -> Void) {
    guard !isEmpty else { return }
    var ring = order.ring.copy()
    while let id = ring.popFirst() {
      if let cost = costs[id] { body(cost) }
    }
  }

  /// Gives this queue an order of its own before it changes, so that its copies keep theirs.
  @inlinable
  mutating func makeOrderUnique() {
    if !isKnownUniquelyReferenced(&order) { order = Order(order.ring.copy()) }
  }
}
