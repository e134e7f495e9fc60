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
/// ``acquire(_:cost:)`` waits in first-come first-served order per key and is cancellable;
/// ``tryAcquire(_:cost:)-(_,Int)`` never waits. Keys never interfere.
///
/// A key costs 16 bytes of bucket state, an entry in its shard's table and one deadline in its
/// shard's heap; once its bucket is full again and nobody waits, the key is forgotten, so idle
/// keys take no memory.
///
/// ## Shared limits
///
/// With a ``RateLimitStore`` (``init(permits:per:burst:clock:store:)``) the decisions are the
/// store's, shared by every process that uses it: call the async
/// ``tryAcquire(_:cost:)-(_,Int)`` and ``acquire(_:cost:)`` with `try await`. The synchronous
/// ``tryAcquire(_:cost:)-(_,Int)`` of a store-backed limiter is a programming error. A waiting
/// ``acquire(_:cost:)`` asks the store again after each `retryAfter` the store returns, slept on
/// the limiter's clock; so with a store, waiters of one key are not served in strict FIFO order.
public final class KeyedRateLimiter<Key: Hashable & Sendable>: Sendable {
  private typealias Continuation = UnsafeContinuation<Void, any Error>

  private struct Waiter {
    let key: Key
    let permits: Int
    let continuation: Continuation
  }

  /// A key's bucket level and the deadline of its one live entry in the shard's heap.
  private struct KeyBucket {
    var level: TokenBucketLevel
    var checkAt: PaceInstant
  }

  /// The requests waiting for one key, in order; cancelled ones are skipped.
  private struct WaitQueue {
    var order = FIFO<UInt64>()
    var permits = 0
  }

  private struct Shard {
    var buckets: [Key: KeyBucket] = [:]
    var queues: [Key: WaitQueue] = [:]
    var waiters: [UInt64: Waiter] = [:]
    var timer = ShardTimer<Key>()
  }

  private struct Effects {
    var granted: [Continuation] = []
    var refused: Continuation?
    var arming: ShardTimer<Key>.Arming?

    var isEmpty: Bool { granted.isEmpty && refused == nil && arming == nil }
  }

  /// The limit every key has.
  public let limit: RateLimit
  private let rate: TokenBucketRate
  private let clock: AsyncClock
  private let sleep: @Sendable (Duration) async throws -> Void
  private let store: (any RateLimitStore<Key>)?
  private let shards: [ShardLock<Shard>]
  private let nextID = ShardLock<UInt64>(0)

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
  /// Call its async ``tryAcquire(_:cost:)-(_,Int)`` and ``acquire(_:cost:)`` with `try await`.
  ///
  /// - Parameters:
  ///   - permits: How many permits come back to a key per `interval`. Positive.
  ///   - interval: The period of the rate. Positive.
  ///   - burst: How many permits a key can take at once; `permits` by default. Positive.
  ///   - clock: The clock ``acquire(_:cost:)`` sleeps on between attempts.
  ///   - store: Where the buckets live and the decisions are made.
  public convenience init<C: Clock>(
    permits: Int, per interval: Duration, burst: Int? = nil, clock: C = ContinuousClock(),
    store: some RateLimitStore<Key>
  ) where C.Duration == Duration {
    self.init(permits: permits, interval: interval, burst: burst, clock: clock, store: store)
  }

  private init<C: Clock>(
    permits: Int, interval: Duration, burst: Int?, clock: C, store: (any RateLimitStore<Key>)?
  ) where C.Duration == Duration {
    precondition(permits > 0, "KeyedRateLimiter: permits must be positive (got \(permits))")
    precondition(interval > .zero, "KeyedRateLimiter: interval must be positive (got \(interval))")
    precondition((burst ?? permits) > 0, "KeyedRateLimiter: burst must be positive (got \(burst ?? permits))")
    limit = RateLimit(permits: permits, per: interval, burst: burst)
    rate = TokenBucketRate(permits: permits, per: interval, burst: limit.burst)
    self.clock = AsyncClock(clock)
    sleep = { duration in try await clock.sleep(for: duration) }
    self.store = store
    shards = (0..<keyedShardCount).map { _ in ShardLock(Shard()) }
  }

  deinit {
    // Waiters hold the limiter while they wait, so only the timers can be left.
    for shard in shards {
      shard.withLock { $0.timer.removeAll() }?.cancel()
    }
  }

  // MARK: Decisions

  /// Takes `cost` permits for `key` if they are available now and no request for `key` waits;
  /// never waits. In-memory limiters only.
  ///
  /// - Parameters:
  ///   - key: Whose bucket to take from.
  ///   - cost: How many permits to take; 1 by default. Not negative.
  /// - Returns: `.allowed(remaining:)` with the whole permits left for `key`, or
  ///   `.limited(retryAfter:)` with how long until the same request would be allowed if nothing
  ///   else is taken (an estimate that counts the waiting requests' permits, while some wait).
  public func tryAcquire(_ key: Key, cost: Int = 1) -> RateLimitDecision {
    precondition(
      store == nil,
      "KeyedRateLimiter.tryAcquire: this limiter decides in its RateLimitStore; use `try await limiter.tryAcquire(key)`"
    )
    precondition(cost >= 0, "KeyedRateLimiter.tryAcquire: cost must not be negative (got \(cost))")
    return decide(key, cost: cost)
  }

  /// Takes `cost` permits for `key` if they are available now; never waits for them.
  ///
  /// In memory, the same decision as the synchronous ``tryAcquire(_:cost:)-(_,Int)``; with a
  /// store, the store's.
  ///
  /// - Parameters:
  ///   - key: Whose bucket to take from.
  ///   - cost: How many permits to take; 1 by default. Not negative.
  /// - Throws: What the store throws when it cannot decide.
  public func tryAcquire(_ key: Key, cost: Int = 1) async throws -> RateLimitDecision {
    precondition(cost >= 0, "KeyedRateLimiter.tryAcquire: cost must not be negative (got \(cost))")
    if let store { return try await store.tryAcquire(key, cost: cost, limit: limit) }
    return decide(key, cost: cost)
  }

  /// Waits until `cost` permits are available for `key`, then takes them.
  ///
  /// In memory, a key's requests are served in the order they arrive; a request for more than
  /// the burst waits for a full bucket and leaves it in debt. With a store, it asks the store and
  /// sleeps on the limiter's clock for each `retryAfter` until the store allows it.
  ///
  /// - Parameters:
  ///   - key: Whose bucket to take from.
  ///   - cost: How many permits to take; 1 by default. Not negative.
  /// - Throws: `CancellationError` if the task is cancelled before the permits are granted (then
  ///   nothing is taken), or what the store throws.
  public func acquire(_ key: Key, cost: Int = 1) async throws {
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
    if decide(key, cost: cost).isAllowed { return }
    let id = nextID.withLock { id in
      id &+= 1
      return id
    }
    let index = shardIndex(for: key)
    try await withTaskCancellationHandler {
      try await withUnsafeThrowingContinuation { (continuation: Continuation) in
        let now = clock.now()
        let effects = shards[index].withLock { shard -> Effects in
          guard !Task.isCancelled else { return Effects(refused: continuation) }
          shard.waiters[id] = Waiter(key: key, permits: cost, continuation: continuation)
          shard.queues[key, default: WaitQueue()].order.append(id)
          shard.queues[key]!.permits += cost
          if shard.buckets[key] == nil {
            shard.buckets[key] = KeyBucket(level: rate.full(at: now), checkAt: PaceInstant(nanoseconds: .max))
          }
          var effects = Effects()
          effects.granted = grant(key, now: now, consumedCheck: false, in: &shard)
          effects.arming = shard.timer.armIfNeeded()
          return effects
        }
        carryOut(effects, shard: index)
      }
    } onCancel: {
      let now = clock.now()
      let effects = shards[index].withLock { shard -> Effects in
        guard let waiter = shard.waiters.removeValue(forKey: id) else { return Effects() }
        shard.queues[key]?.permits -= waiter.permits
        // The head may have changed: the next requests may fit now, or need another deadline.
        var effects = Effects(refused: waiter.continuation)
        effects.granted = grant(key, now: now, consumedCheck: false, in: &shard)
        effects.arming = shard.timer.armIfNeeded()
        return effects
      }
      carryOut(effects, shard: index)
    }
  }

  /// The whole permits `key` could take now; 0 while its bucket is in debt. In memory only: a
  /// store-backed limiter does not know.
  public func availablePermits(for key: Key) -> Int {
    let now = clock.now()
    let rate = self.rate
    return shards[shardIndex(for: key)].withLock { shard in
      guard let bucket = shard.buckets[key] else { return limit.burst }
      var tokens = TokenBucket(rate: rate, level: bucket.level)
      tokens.refill(now: now)
      return tokens.availablePermits
    }
  }

  /// How many keys hold state now: a bucket that is not full, or waiting requests. Idle keys
  /// are forgotten and not counted.
  public var trackedKeyCount: Int {
    shards.reduce(0) { count, shard in count + shard.withLock { $0.buckets.count } }
  }

  /// How many ``acquire(_:cost:)`` calls wait, over all keys.
  public var waitingCount: Int {
    shards.reduce(0) { count, shard in count + shard.withLock { $0.waiters.count } }
  }

  // MARK: Under the lock

  private func shardIndex(for key: Key) -> Int {
    key.hashValue & (keyedShardCount - 1)
  }

  // Not `@inlinable` (the bucket arithmetic is internal), so specialised here for the usual keys:
  // unspecialised, the table's hashing goes through witness tables on every call.
  @_specialize(exported: false, where Key == Int)
  @_specialize(exported: false, where Key == String)
  private func decide(_ key: Key, cost: Int) -> RateLimitDecision {
    let now = clock.now()
    let rate = self.rate
    let index = shardIndex(for: key)
    var arming: ShardTimer<Key>.Arming?
    let decision = shards[index].withLock { shard -> RateLimitDecision in
      guard var bucket = shard.buckets[key] else {
        // A key with no state has a full bucket, which any request fits (a larger one than
        // the burst leaves it in debt).
        guard cost > 0 else { return .allowed(remaining: limit.burst) }
        var tokens = TokenBucket(rate: rate, level: rate.full(at: now))
        tokens.take(cost)
        // A bucket that fills again only beyond the end of the timeline is never checked.
        let checkAt = tokens.fullTime
        shard.buckets[key] = KeyBucket(level: tokens.level, checkAt: checkAt ?? .max)
        if let checkAt { shard.timer.add(checkAt, for: key) }
        arming = shard.timer.armIfNeeded()
        return .allowed(remaining: tokens.availablePermits)
      }
      var tokens = TokenBucket(rate: rate, level: bucket.level)
      tokens.refill(now: now)
      defer {
        bucket.level = tokens.level
        shard.buckets[key] = bucket
      }
      if let queue = shard.queues[key], !queue.order.isEmpty {
        return .limited(retryAfter: now.duration(to: tokens.readyTime(for: queue.permits &+ cost) ?? .max))
      }
      guard tokens.canTake(cost) else {
        return .limited(retryAfter: now.duration(to: tokens.readyTime(for: cost) ?? .max))
      }
      tokens.take(cost)
      return .allowed(remaining: tokens.availablePermits)
    }
    if let arming { carryOut(Effects(arming: arming), shard: index) }
    return decision
  }

  /// Grants `key`'s waiting requests that fit, in order, then forgets the key if its bucket is
  /// full and nobody waits, or makes sure its heap entry comes by its next event.
  ///
  /// - Parameter consumedCheck: Whether the key's heap entry has just come out of the heap.
  private func grant(_ key: Key, now: PaceInstant, consumedCheck: Bool, in shard: inout Shard) -> [Continuation] {
    guard var bucket = shard.buckets[key] else { return [] }
    var tokens = TokenBucket(rate: rate, level: bucket.level)
    tokens.refill(now: now)
    var granted: [Continuation] = []
    var next = tokens.fullTime
    if var queue = shard.queues[key] {
      while let id = queue.order.first {
        guard let waiter = shard.waiters[id] else {
          _ = queue.order.popFirst()  // cancelled
          continue
        }
        guard tokens.canTake(waiter.permits) else {
          next = tokens.readyTime(for: waiter.permits)
          break
        }
        tokens.take(waiter.permits)
        _ = queue.order.popFirst()
        queue.permits -= waiter.permits
        shard.waiters[id] = nil
        granted.append(waiter.continuation)
      }
      shard.queues[key] = queue.order.isEmpty ? nil : queue
    }
    if shard.queues[key] == nil, tokens.isFull {
      shard.buckets[key] = nil
      return granted
    }
    bucket.level = tokens.level
    if let next, consumedCheck || next < bucket.checkAt {
      bucket.checkAt = next
      shard.timer.add(next, for: key)
    } else if next == nil, consumedCheck {
      // Ready only beyond the end of the timeline: no check; waiters wait until cancelled, as
      // with RateLimiter.
      bucket.checkAt = .max
    }
    shard.buckets[key] = bucket
    return granted
  }

  private func timerFired(shard index: Int, generation: UInt64) {
    let now = clock.now()
    let effects = shards[index].withLock { shard -> Effects in
      guard let due = shard.timer.fired(generation: generation, now: now) else { return Effects() }
      var effects = Effects()
      for entry in due where shard.buckets[entry.key]?.checkAt == entry.deadline {
        effects.granted += grant(entry.key, now: now, consumedCheck: true, in: &shard)
      }
      shard.buckets.shrinkIfSparse()
      shard.queues.shrinkIfSparse()
      effects.arming = shard.timer.armIfNeeded()
      return effects
    }
    carryOut(effects, shard: index)
  }

  // MARK: After the lock

  private func carryOut(_ effects: Effects, shard index: Int) {
    if effects.isEmpty { return }
    if let arming = effects.arming {
      arming.superseded?.cancel()
      let generation = arming.generation
      let timer = clock.schedule(arming.deadline) { [weak self] in
        self?.timerFired(shard: index, generation: generation)
      }
      if !shards[index].withLock({ $0.timer.armed(timer, generation: generation) }) {
        timer.cancel()
      }
    }
    effects.refused?.resume(throwing: CancellationError())
    for continuation in effects.granted { continuation.resume() }
  }
}

extension TokenBucket {
  /// When the bucket is full again if nothing is taken: a request larger than the burst waits
  /// for exactly that. `nil` if that is beyond the end of the timeline.
  var fullTime: PaceInstant? { readyTime(for: .max) }

  /// Whether the bucket holds its whole capacity.
  var isFull: Bool { balance >= capacity }
}
