/// One ``RateLimiter`` per key (per API key, per user, per IP), for as many keys as a server sees.
///
/// ```swift
/// let limiter = KeyedRateLimiter<String>(permits: 100, per: .seconds(60), burst: 20)
/// switch limiter.tryAcquire(apiKey) {
/// case .allowed(let remaining): response.headers["RateLimit-Remaining"] = "\(remaining)"
/// case .limited(let retryAfter): return .tooManyRequests(retryAfter: retryAfter)
/// }
/// try await limiter.acquire(apiKey)   // or wait for the key's turn
/// ```
///
/// Each key has its own token bucket with exactly the arithmetic of ``RateLimiter``: it starts
/// full with `burst` permits, and permits come back at `permits` per `interval`, exactly.
/// ``acquire(_:cost:isolation:)`` waits in first-come first-served order per key and is cancellable;
/// `tryAcquire(_:cost:)` never waits. Keys never interfere: a key's decisions are those of a
/// `RateLimiter` asked at the same instants, and its waiting requests are granted in the same
/// order, when its shard's timer takes the deadline a `RateLimiter`'s timer would be armed for,
/// by the keyed pacers' rule (see "When timers fire late" in the Keyed pacing article).
///
/// A key costs 16 bytes of bucket state, an entry in its shard's table and one deadline in its
/// shard's heap; once its bucket is full again and nobody waits, the key is forgotten, so idle
/// keys take no memory.
///
/// ## Shared limits
///
/// With a ``RateLimitStore`` (``init(permits:per:burst:clock:store:)``) the decisions are the
/// store's, shared by every process that uses it: call ``decide(_:cost:)`` and
/// ``acquire(_:cost:isolation:)`` with `try await`. The synchronous `tryAcquire(_:cost:)` cannot wait
/// for a store: it decides in this process's memory, a per-process limit. A waiting
/// ``acquire(_:cost:isolation:)`` asks the store again after each `retryAfter` the store returns, slept on
/// the limiter's clock; so with a store, waiters of one key are not served in strict FIFO order.
public final class KeyedRateLimiter<Key: Hashable & Sendable>: Sendable {
  // The decisions and the timer's path are `@inlinable` (with what they touch
  // `@usableFromInline`), so that they are specialised for `Key` in the module that calls them:
  // unspecialised, every table operation goes through witness tables and generic metadata,
  // which doubles the cost of a decision (measured with a struct key in `Benchmarks`).
  @usableFromInline typealias Continuation = UnsafeContinuation<Void, any Error>

  /// A waiting request: its continuation, and whether its task is one a ``TestScheduler``
  /// counts (a pacer's invocation, a tracked task), which waits rather than runs while it is here.
  @usableFromInline
  struct Waiter {
    @usableFromInline let continuation: Continuation
    @usableFromInline let tracked: Bool

    @inlinable init(continuation: Continuation, tracked: Bool) {
      self.continuation = continuation
      self.tracked = tracked
    }
  }

  /// A key's bucket level and the deadline of its one live entry in the shard's heap.
  @usableFromInline
  struct KeyBucket {
    @usableFromInline var level: TokenBucketLevel
    @usableFromInline var checkAt: PaceInstant

    @inlinable init(level: TokenBucketLevel, checkAt: PaceInstant) {
      self.level = level
      self.checkAt = checkAt
    }
  }

  @usableFromInline
  struct Shard: ~Copyable {
    @usableFromInline var buckets = KeyTable<Key, KeyBucket>()
    /// The queues of the keys with waiting requests, apart from the buckets so that an idle key
    /// pays for none.
    @usableFromInline var queues: [Key: RateLimitQueue] = [:]
    /// The waiting requests' continuations, by the ids their keys' queues hold.
    @usableFromInline var waiters: [UInt64: Waiter] = [:]
    @usableFromInline var timer = ShardTimer<Key>()

    /// Gives back the storage of the table, the queues and the waiters once they are sparse,
    /// after requests were granted or cancelled: a shard whose keys have gone quiet holds none.
    @inlinable
    mutating func shrinkIfSparse() {
      buckets.shrinkIfSparse()
      queues.shrinkIfSparse()
      waiters.shrinkIfSparse()
    }
  }

  @usableFromInline
  struct Effects {
    @usableFromInline var granted: [Waiter] = []
    @usableFromInline var refused: Waiter?
    /// A request refused before it waited (its task was cancelled first).
    @usableFromInline var refusedAtOnce: Continuation?
    /// The shard's timer, reserved for an earliest deadline earlier than the one it was armed for.
    @usableFromInline var arming: ShardTimer<Key>.Arming?
    /// Whether a request started waiting: told to a ``TestScheduler``.
    @usableFromInline var queued = false

    @inlinable init(
      granted: [Waiter] = [], refused: Waiter? = nil, refusedAtOnce: Continuation? = nil,
      arming: ShardTimer<Key>.Arming? = nil
    ) {
      self.granted = granted
      self.refused = refused
      self.refusedAtOnce = refusedAtOnce
      self.arming = arming
    }

    @inlinable var isEmpty: Bool {
      granted.isEmpty && refused == nil && refusedAtOnce == nil && arming == nil && !queued
    }
  }

  /// The limit every key has.
  public let limit: RateLimit
  @usableFromInline let rate: TokenBucketRate
  @usableFromInline let clock: AsyncClock
  private let sleep: @Sendable (Duration) async throws -> Void
  @usableFromInline let store: (any RateLimitStore<Key>)?
  @usableFromInline let shards: Shards<Shard>
  private let nextID = LockedState<UInt64>(0)

  /// An in-memory keyed rate limiter granting each key `permits` per `interval`.
  ///
  /// - Parameters:
  ///   - permits: How many permits come back to a key per `interval`. Positive.
  ///   - interval: The period of the rate. Positive.
  ///   - burst: The capacity of each key's bucket: how many permits a key can take at once after
  ///     a quiet period; `permits` by default. Positive.
  ///   - clock: The clock that measures time: `ContinuousClock` by default, or a ``TestScheduler``.
  public convenience init<C: Clock>(
    permits: Int, per interval: Duration, burst: Int? = nil, clock: C = ContinuousClock()
  ) where C.Duration == Duration {
    self.init(permits: permits, interval: interval, burst: burst, clock: clock, store: nil)
  }

  /// A keyed rate limiter whose decisions are made by `store`, shared beyond this process.
  ///
  /// Call its ``decide(_:cost:)`` and ``acquire(_:cost:isolation:)`` with `try await`.
  ///
  /// - Parameters:
  ///   - permits: How many permits come back to a key per `interval`. Positive.
  ///   - interval: The period of the rate. Positive.
  ///   - burst: How many permits a key can take at once; `permits` by default. Positive.
  ///   - clock: The clock ``acquire(_:cost:isolation:)`` sleeps on between attempts.
  ///   - store: Where the buckets live and the decisions are made.
  public convenience init<C: Clock>(
    permits: Int, per interval: Duration, burst: Int? = nil, clock: C = ContinuousClock(),
    store: some RateLimitStore<Key>
  ) where C.Duration == Duration {
    self.init(permits: permits, interval: interval, burst: burst, clock: clock, store: store)
  }

  private convenience init<C: Clock>(
    permits: Int, interval: Duration, burst: Int?, clock: C, store: (any RateLimitStore<Key>)?
  ) where C.Duration == Duration {
    self.init(
      permits: permits, interval: interval, burst: burst, clock: AsyncClock(clock),
      sleep: { duration in try await clock.sleep(for: duration) }, store: store)
  }

  /// An in-memory keyed rate limiter on `clock`: for tests whose clock is a scheduler with timing
  /// of its own (``AsyncClock/init(scheduler:)``).
  convenience init(permits: Int, per interval: Duration, burst: Int? = nil, clock: AsyncClock) {
    self.init(
      permits: permits, interval: interval, burst: burst, clock: clock, sleep: { _ in }, store: nil)
  }

  private init(
    permits: Int, interval: Duration, burst: Int?, clock: AsyncClock,
    sleep: @escaping @Sendable (Duration) async throws -> Void, store: (any RateLimitStore<Key>)?
  ) {
    precondition(permits > 0, "KeyedRateLimiter: permits must be positive (got \(permits))")
    precondition(interval > .zero, "KeyedRateLimiter: interval must be positive (got \(interval))")
    precondition((burst ?? permits) > 0, "KeyedRateLimiter: burst must be positive (got \(burst ?? permits))")
    limit = RateLimit(permits: permits, per: interval, burst: burst)
    rate = TokenBucketRate(permits: permits, per: interval, burst: limit.burst)
    self.clock = clock
    self.sleep = sleep
    self.store = store
    shards = Shards(count: keyedShardCount) { Shard() }
  }

  deinit {
    // Waiters hold the limiter while they wait, so only the timers can be left.
    for index in shards.indices {
      shards.withLock(index) { $0.timer.removeAll() }?.cancel()
    }
  }

  // MARK: Decisions

  /// Takes `cost` permits for `key` if they are available now and no request for `key` waits;
  /// never waits, and always decides in this process's memory.
  ///
  /// On a store-backed limiter it does not ask the store (it cannot wait for it): it decides with
  /// the limiter's own in-memory buckets under the same limit, as a `.fallback` failure policy
  /// does during an outage, so N processes allow up to N times the limit. Call
  /// ``decide(_:cost:)`` for the store's shared decision.
  ///
  /// - Parameters:
  ///   - key: Whose bucket to take from.
  ///   - cost: How many permits to take; 1 by default. Not negative.
  /// - Returns: `.allowed(remaining:)` with the whole permits left for `key`, or
  ///   `.limited(retryAfter:)` with how long until the same request would be allowed if nothing
  ///   else is taken (an estimate that counts the waiting requests' permits, while some wait).
  @inlinable
  public func tryAcquire(_ key: Key, cost: Int = 1) -> RateLimitDecision {
    precondition(cost >= 0, "KeyedRateLimiter.tryAcquire: cost must not be negative (got \(cost))")
    return decideLocally(key, cost: cost)
  }

  /// Takes `cost` permits for `key` if they are available now, deciding where the limiter's state
  /// lives; never waits for the permits.
  ///
  /// In memory, the same decision as the synchronous `tryAcquire(_:cost:)`; with a store, the
  /// store's. It is not an async overload of `tryAcquire` on purpose: in async code Swift would
  /// always pick such an overload, so `limiter.tryAcquire(key)` would stop compiling there.
  ///
  /// This is the path for keys and costs that come from requests: they are checked against
  /// ``KeyPolicy`` (`String` keys and every cost), so hostile input is an error, never a trap, and
  /// the decision is the same in memory and in every store.
  ///
  /// - Parameters:
  ///   - key: Whose bucket to take from.
  ///   - cost: How many permits to take; 1 by default. 0 asks how many are left and takes none.
  /// - Throws: ``InvalidInput`` for a key or cost outside ``KeyPolicy``; what the store throws
  ///   when it cannot decide.
  public func decide(_ key: Key, cost: Int = 1) async throws -> RateLimitDecision {
    try KeyPolicy.check(cost: cost, limit: limit)
    if let key = key as? String { try KeyPolicy.check(key: key) }
    if let store { return try await store.tryAcquire(key, cost: cost, limit: limit) }
    return decideLocally(key, cost: cost)
  }

  /// Waits until `cost` permits are available for `key`, then takes them.
  ///
  /// In memory, a key's requests are served in the order they arrive; a request for more than
  /// the burst waits for a full bucket and leaves it in debt. With a store, it asks the store and
  /// sleeps on the limiter's clock for each `retryAfter` until the store allows it.
  ///
  /// In memory, the request arrives on the caller's actor, before `acquire` first suspends: tasks
  /// started in order from one actor join the key's queue, and are granted, in that order.
  ///
  /// - Parameters:
  ///   - key: Whose bucket to take from.
  ///   - cost: How many permits to take; 1 by default. Not negative.
  ///   - isolation: The caller's actor; leave the default.
  /// - Throws: `CancellationError` if the task is cancelled before the permits are granted (then
  ///   nothing is taken), or what the store throws.
  public func acquire(_ key: Key, cost: Int = 1, isolation: isolated (any Actor)? = #isolation) async throws {
    precondition(cost >= 0, "KeyedRateLimiter.acquire: cost must not be negative (got \(cost))")
    try Task.checkCancellation()
    if let store {
      while true {
        switch try await store.tryAcquire(key, cost: cost, limit: limit) {
        case .allowed: return
        case .limited(let retryAfter): try await sleep(Swift.max(retryAfter, .nanoseconds(1)))
        }
      }
    }
    if decideLocally(key, cost: cost).isAllowed { return }
    let id = nextID.withLock { id in
      id &+= 1
      return id
    }
    let hash = key.hashValue
    let index = Self.shardIndex(hash: hash)
    // A task that a TestScheduler counts as running (PaceTesting's `settle`) waits here: counted
    // out once queued, and in again by whatever grants or refuses it, before it can run.
    let tracked = clock.testScheduler.map { TestScheduler.tracking === $0 } ?? false
    // With `isolation`, neither the handler nor the continuation's body hops to another
    // executor: the request is queued before the first suspension, in the caller's order.
    try await withTaskCancellationHandler(
      operation: {
        try await withUnsafeThrowingContinuation(isolation: isolation) { (continuation: Continuation) in
          let now = clock.now()
          let effects = shards.withLock(index) { shard -> Effects in
            guard !Task.isCancelled else { return Effects(refusedAtOnce: continuation) }
            shard.waiters[id] = Waiter(continuation: continuation, tracked: tracked)
            _ = shard.buckets.indexInserting(
              key, hash: hash, KeyBucket(level: rate.full(at: now), checkAt: PaceInstant(nanoseconds: .max)))
            var effects = run(key, hash: hash, now: now, consumedCheck: false, in: &shard) {
              $0.enqueue(id: id, cost: cost, now: now)
            }
            shard.shrinkIfSparse()
            effects.arming = shard.timer.reserveIfNeeded()
            effects.queued = true
            return effects
          }
          carryOut(effects, shard: index)
          // Counted out after the grants it made were counted in: the count never reads zero
          // while something is on its way.
          if tracked, effects.refusedAtOnce == nil { clock.testScheduler?.activityStopped() }
        }
      },
      onCancel: {
        let now = clock.now()
        let effects = shards.withLock(index) { shard -> Effects in
          guard shard.waiters[id] != nil else { return Effects() }
          var effects = run(key, hash: hash, now: now, consumedCheck: false, in: &shard) {
            $0.cancel(id: id, now: now)
          }
          shard.shrinkIfSparse()
          effects.arming = shard.timer.reserveIfNeeded()
          return effects
        }
        carryOut(effects, shard: index)
      },
      isolation: isolation
    )
  }

  /// The whole permits `key` could take now; 0 while its bucket is in debt. In memory only: a
  /// store-backed limiter does not know.
  public func availablePermits(for key: Key) -> Int {
    let now = clock.now()
    let rate = self.rate
    let hash = key.hashValue
    return shards.withLock(Self.shardIndex(hash: hash)) { shard in
      let level = shard.buckets.index(of: key, hash: hash).map {
        shard.buckets.unsafeValuePointer(at: $0).pointee.level
      }
      var machine = RateLimitStateMachine(bucket: TokenBucket(rate: rate, level: level ?? rate.full(at: now)))
      return machine.availablePermits(now: now)
    }
  }

  /// How many keys hold state now: a bucket that is not full, or waiting requests. Idle keys
  /// are forgotten and not counted.
  public var trackedKeyCount: Int {
    shards.indices.reduce(0) { count, index in count + shards.withLock(index) { $0.buckets.count } }
  }

  /// The bytes of storage the shards hold beyond their fixed fields (tables, heaps, queues); 0
  /// once every key has gone quiet. For tests.
  var heldStorageBytes: Int {
    shards.indices.reduce(0) { bytes, index in
      bytes
        + shards.withLock(index) { shard in
          shard.buckets.capacity * KeyTable<Key, KeyBucket>.slotStride
            + shard.timer.capacity * MemoryLayout<ShardTimer<Key>.Entry>.stride
            + shard.queues.capacity * MemoryLayout<(Key, RateLimitQueue)>.stride
            + shard.waiters.capacity * MemoryLayout<(UInt64, Waiter)>.stride
        }
    }
  }

  /// How many ``acquire(_:cost:isolation:)`` calls wait, over all keys.
  public var waitingCount: Int {
    shards.indices.reduce(0) { count, index in count + shards.withLock(index) { $0.waiters.count } }
  }

  // MARK: Under the lock

  @inlinable
  static func shardIndex(hash: Int) -> Int {
    keyedShardIndex(hash: hash)
  }

  @inlinable
  func decideLocally(_ key: Key, cost: Int) -> RateLimitDecision {
    let hash = key.hashValue
    let index = Self.shardIndex(hash: hash)
    // As in ``KeyedPacer/call(_:_:)``: the slot loads while the clock is read and the lock taken.
    KeyTable<Key, KeyBucket>.prefetch(shards.unsafeShard(index).pointee.state.buckets.unsafePrefetchHint, hash: hash)
    let now = clock.now()
    let rate = self.rate
    var arming: ShardTimer<Key>.Arming?
    let decision = shards.withLock(index) { shard -> RateLimitDecision in
      guard let slot = shard.buckets.index(of: key, hash: hash) else {
        // A key with no state has a full bucket and nobody waiting: any request fits (a larger
        // one than the burst leaves it in debt), and a query leaves it full, so unstored.
        var tokens = TokenBucket(rate: rate, level: rate.full(at: now))
        let decision = RateLimitStateMachine.tryAcquire(cost: cost, now: now, bucket: &tokens, waitingPermits: nil)
        guard !tokens.isFull else { return decision }
        // A bucket that fills again only beyond the end of the timeline is never checked.
        let checkAt = tokens.fullTime
        _ = shard.buckets.indexInserting(
          key, hash: hash, KeyBucket(level: tokens.level, checkAt: checkAt ?? .max))
        if let checkAt { shard.timer.add(checkAt, for: key) }
        arming = shard.timer.reserveIfNeeded()
        return decision
      }
      let bucket = shard.buckets.unsafeValuePointer(at: slot)
      // The machine's decision on the stored level, with the permits of the key's waiting
      // requests, if any: the queues are looked up only in a shard that has any, and `tryAcquire`
      // never changes a queue, so only the level is stored back.
      var tokens = TokenBucket(rate: rate, level: bucket.pointee.level)
      let waitingPermits = shard.queues.isEmpty ? nil : shard.queues[key]?.waitingPermits
      defer { bucket.pointee.level = tokens.level }
      return RateLimitStateMachine.tryAcquire(cost: cost, now: now, bucket: &tokens, waitingPermits: waitingPermits)
    }
    if arming != nil { carryOut(Effects(arming: arming), shard: index) }
    return decision
  }

  /// Runs one event of `key`'s machine, built from its stored level and queue, then stores them
  /// back: forgets the key if its bucket is full and nobody waits, or makes sure its heap entry
  /// comes by its next event (its first request's turn, or its bucket full again).
  ///
  /// - Parameter consumedCheck: Whether the key's heap entry has just come out of the heap.
  /// - Returns: The continuations the event resumes; the caller reserves the shard's timer once
  ///   the event is done (not during a firing, which reserves it when it ends).
  @inlinable
  func run(
    _ key: Key, hash: Int, now: PaceInstant, consumedCheck: Bool, in shard: inout Shard,
    _ event: (inout RateLimitStateMachine) -> RateLimitAction
  ) -> Effects {
    guard let slot = shard.buckets.index(of: key, hash: hash) else { return Effects() }
    var bucket = shard.buckets.unsafeValuePointer(at: slot).pointee
    var machine = RateLimitStateMachine(
      bucket: TokenBucket(rate: rate, level: bucket.level),
      queue: shard.queues.isEmpty ? nil : shard.queues.removeValue(forKey: key))
    let wasWaiting = machine.isWaiting
    let action = event(&machine)
    var effects = Effects()
    for id in action.granted {
      if let waiter = shard.waiters.removeValue(forKey: id) { effects.granted.append(waiter) }
    }
    if let id = action.refused { effects.refused = shard.waiters.removeValue(forKey: id) }
    let isWaiting = machine.isWaiting
    if isWaiting, let queue = machine.queue.take() {
      shard.queues[key] = queue
    } else if machine.bucket.isFull {
      shard.buckets.remove(at: slot)
      return effects
    }
    bucket.level = machine.bucket.level
    // Nobody waits: the key is looked at again when its bucket is full, to be forgotten. While
    // requests wait, the key's entry is the timer a `RateLimiter` arms for them: for the first
    // request's turn as it starts waiting (an entry for the full bucket goes stale, else its
    // firing, late on a tick, could grant the request before that timer fires), then moved only
    // earlier, as that timer is ("armed for earlier, it looks again when it fires").
    let next = isWaiting ? action.wakeAt : machine.bucket.fullTime
    if let next, consumedCheck || next < bucket.checkAt || (isWaiting && !wasWaiting && next != bucket.checkAt) {
      bucket.checkAt = next
      shard.timer.add(next, for: key)
    } else if next == nil, consumedCheck {
      // Ready only beyond the end of the timeline: no check; waiters wait until cancelled, as
      // with RateLimiter.
      bucket.checkAt = .max
    }
    shard.buckets.unsafeValuePointer(at: slot).pointee = bucket
    return effects
  }

  @inlinable
  func timerFired(shard index: Int, generation: UInt64) {
    let now = clock.now()
    let effects = shards.withLock(index) { shard -> Effects in
      guard shard.timer.beginFiring(generation: generation, now: now) else { return Effects() }
      var effects = Effects()
      while let entry = shard.timer.nextDue() {
        let hash = entry.key.hashValue
        guard let slot = shard.buckets.index(of: entry.key, hash: hash),
          shard.buckets.unsafeValuePointer(at: slot).pointee.checkAt == entry.deadline
        else { continue }
        effects.granted +=
          run(entry.key, hash: hash, now: now, consumedCheck: true, in: &shard) {
            $0.timerFired(now: now)
          }.granted
      }
      shard.timer.endFiring()
      shard.shrinkIfSparse()
      effects.arming = shard.timer.reserveIfNeeded()
      return effects
    }
    carryOut(effects, shard: index)
  }

  // MARK: After the lock

  @inlinable
  func carryOut(_ effects: Effects, shard index: Int) {
    if effects.isEmpty { return }
    if let ticket = effects.arming {
      let timer = clock.schedule(ticket.deadline) { [weak self] in
        self?.timerFired(shard: index, generation: ticket.generation)
      }
      let (installed, superseded) = shards.withLock(index) { $0.timer.install(timer, for: ticket) }
      superseded?.cancel()
      if !installed { timer.cancel() }
    }
    if let scheduler = clock.testScheduler { countOnTestScheduler(effects, scheduler) }
    effects.refusedAtOnce?.resume(throwing: CancellationError())
    effects.refused?.continuation.resume(throwing: CancellationError())
    for waiter in effects.granted { waiter.continuation.resume() }
  }

  /// Tells a ``TestScheduler`` clock how many callers wait here now, and counts in the tracked
  /// requests about to run (PaceTesting's `settle` and `waitForSuspendedCallers`).
  @usableFromInline
  func countOnTestScheduler(_ effects: Effects, _ scheduler: TestScheduler) {
    let left = effects.granted.count + (effects.refused == nil ? 0 : 1)
    scheduler.suspendedCallersChanged(by: (effects.queued ? 1 : 0) - left)
    for waiter in effects.granted + [effects.refused].compactMap({ $0 }) where waiter.tracked {
      scheduler.activityStarted()
    }
  }
}

extension TokenBucket {
  /// When the bucket is full again if nothing is taken: a request larger than the burst waits
  /// for exactly that. `nil` if that is beyond the end of the timeline.
  @inlinable var fullTime: PaceInstant? { readyTime(for: .max) }

  /// Whether the bucket holds its whole capacity.
  @inlinable var isFull: Bool { balance >= capacity }
}
