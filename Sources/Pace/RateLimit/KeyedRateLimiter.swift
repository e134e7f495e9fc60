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
/// Each key has its own counter under its limit's policy (a token bucket, a sliding or a fixed
/// window: ``RateLimit/Algorithm``) with exactly the arithmetic of ``RateLimiter``.
/// ``acquire(_:cost:isolation:)`` waits in first-come first-served order per key and is cancellable;
/// `tryAcquire(_:cost:)` never waits. Keys never interfere: a key's decisions are those of a
/// `RateLimiter` asked at the same instants, and its waiting requests are granted in the same
/// order, when its shard's timer takes the deadline a `RateLimiter`'s timer would be armed for,
/// by the keyed pacers' rule (see "When timers fire late" in the Keyed pacing article).
///
/// ## Limits per key
///
/// ``init(limits:clock:)`` looks each key's limit up at each call (a plan from the key, say),
/// outside the limiter's locks; ``limit(for:)`` answers it. A key whose limit changes between
/// calls keeps what it used that still counts and is read under the new limit (see
/// ``init(limits:clock:)``).
///
/// ## Costs
///
/// The same rule in `tryAcquire(_:cost:)`, ``decide(_:cost:)`` and ``acquire(_:cost:isolation:)``,
/// in memory and in every store: a cost of 0 gets the answer a cost of 1 would get and takes
/// nothing (so it never passes a key that would refuse a cost of 1); a cost above the key's burst
/// is never granted (`tryAcquire` answers `.limited(retryAfter: RateLimitDecision.never)`, the
/// throwing calls throw ``InvalidInput/costAboveBurst(cost:burst:)``), and a negative cost is
/// ``InvalidInput/negativeCost(_:)`` from the throwing calls; a refused cost takes nothing.
///
/// ## Memory
///
/// A key costs an entry in its shard's table (the key, its hash, two words of state and the time
/// of its next check: 40 bytes for an `Int` key) and one deadline in its shard's heap, whatever
/// its policy; a key under a sliding window also has its log in a side table (the key, 48 bytes,
/// and 16 bytes per instant with a grant still in the window, at most `permits`). A per-key limit costs nothing
/// per key. Once nothing it was granted counts any more and nobody waits, the key is forgotten,
/// so idle keys take no memory.
///
/// ## Shared limits
///
/// A limit shared by every process that uses a ``RateLimitStore`` is a
/// ``StoreBackedRateLimiter``, which offers only the store's asynchronous decision. The
/// initialisers that give this type a store (``init(limit:clock:store:)``,
/// ``init(limits:clock:store:)``) are deprecated: their `decide` and `acquire` ask the store, but
/// their synchronous `tryAcquire(_:cost:)` cannot, and decides in this process's memory.
public final class KeyedRateLimiter<Key: Hashable & Sendable>: Sendable {
  // The decisions and the timer's path are `@inlinable` (with what they touch
  // `@usableFromInline`), so that they are specialised for `Key` in the module that calls them:
  // unspecialised, every table operation goes through witness tables and generic metadata,
  // which doubles the cost of a decision (measured with a struct key in `Benchmarks`).
  @usableFromInline typealias Continuation = UnsafeContinuation<Void, any Error>

  /// A waiting request: its continuation, and whether a ``TestScheduler`` counts its task.
  @usableFromInline typealias Waiter = RateLimitWaiter

  /// A key's bucket level and the deadline of its one live entry in the shard's heap: plain
  /// data, so a labelled tuple, which `@inlinable` code builds without an initialiser of its own.
  @usableFromInline typealias KeyBucket = (level: TokenBucketLevel, checkAt: PaceInstant)

  @usableFromInline
  struct Shard: ~Copyable {
    @usableFromInline var buckets = KeyTable<Key, KeyBucket>()
    /// The queues of the keys with waiting requests, apart from the buckets so that an idle key
    /// pays for none.
    @usableFromInline var queues: [Key: WaitingRequests] = [:]
    /// The grants of the keys under a sliding window that still count, apart from the table so
    /// that the other keys' entries stay small.
    @usableFromInline var logs: [Key: SlidingWindowLog] = [:]
    /// The rate each bucket of a per-key limiter was stored under, so that a key whose limit
    /// changed is converted (``loadCounter(level:log:bucketRate:rate:now:)``); empty for one limit.
    @usableFromInline var bucketRates: [Key: TokenBucketRate] = [:]
    /// The fixed window each key of a limiter that detects changes of limit was stored under,
    /// where it is not the first the shard saw (``SeenLimits/firstFixedRate``): empty while one
    /// fixed window is in use.
    @usableFromInline var fixedRates: [Key: WindowRate] = [:]
    /// When each key of a limiter that detects changes of limit was last found under a new
    /// limit, while the key is tracked: empty while no key's limit changed. A later change counts
    /// the use before it (see "A limit that changes unannounced" in
    /// KeyedRateLimiter+LimitHistory.swift).
    @usableFromInline var limitChanges: [Key: PaceInstant] = [:]
    /// The waiting requests' continuations, by the ids their keys' queues hold.
    @usableFromInline var waiters: [UInt64: Waiter] = [:]
    @usableFromInline var timer = ShardTimer<Key>()
    /// What a key with no state owes under the default of the plans the limiter was made with,
    /// after the default changed; `nil` once that no longer matters.
    @usableFromInline var defaultChange: DefaultLimitChange?
    /// The plans' version of the latest change applied here: a decision made with a limit read
    /// at an earlier version read it before that change, and reads it again.
    @usableFromInline var planVersion: UInt64 = 0
    /// The limits this shard's decisions were made under, for a limiter that detects changes of
    /// limit (``detectsLimitChanges``): one it had not seen is added to the limiter's
    /// ``seenLimits`` once the lock is released.
    @usableFromInline var seenLimits = SeenLimits()

    /// Gives back the storage of the table, the queues and the waiters once they are sparse,
    /// after requests were granted or cancelled: a shard whose keys have gone quiet holds none.
    @inlinable
    mutating func shrinkIfSparse() {
      buckets.shrinkIfSparse()
      queues.shrinkIfSparse()
      logs.shrinkIfSparse()
      bucketRates.shrinkIfSparse()
      fixedRates.shrinkIfSparse()
      limitChanges.shrinkIfSparse()
      waiters.shrinkIfSparse()
    }

    /// Forgets what the side tables hold of `key` (its bucket's rate, its fixed window, its last
    /// change of limit), as the key itself is forgotten.
    @inlinable
    mutating func removeSideEntries(of key: Key) {
      if !bucketRates.isEmpty { bucketRates.removeValue(forKey: key) }
      if !fixedRates.isEmpty { fixedRates.removeValue(forKey: key) }
      if !limitChanges.isEmpty { limitChanges.removeValue(forKey: key) }
    }
  }

  @usableFromInline
  struct Effects {
    @usableFromInline var granted: [Waiter] = []
    @usableFromInline var refused: Waiter?
    /// A request refused before it waited (its task was cancelled first).
    @usableFromInline var refusedAtOnce: Continuation?
    /// A request that did not wait, decided under a limit read before a plan change.
    @usableFromInline var staleAtOnce: Continuation?
    /// The shard's timer, reserved for an earliest deadline earlier than the one it was armed for.
    @usableFromInline var arming: ShardTimer<Key>.Arming?
    /// Whether a request started waiting: told to a ``TestScheduler``.
    @usableFromInline var queued = false
    /// Keys of a per-key limiter idle under the limit they were stored under: forgotten once
    /// their limit now (asked outside the lock) finds them idle too.
    @usableFromInline var idle: [Key] = []

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
      granted.isEmpty && refused == nil && refusedAtOnce == nil && staleAtOnce == nil && arming == nil && !queued
        && idle.isEmpty
    }
  }

  /// The limit every key has, for a limiter made with one limit.
  ///
  /// A limiter with per-key limits (``init(limits:clock:)``) has no one limit: this property then
  /// answers `RateLimit(permits: Int.max, per: .nanoseconds(1))`, a limit no key has. Read
  /// ``limit(for:)``, which answers every limiter truly.
  @available(*, deprecated, message: "A limiter with limits per key has no one limit: use limit(for:)")
  public var limit: RateLimit { uniformLimit ?? RateLimit(permits: .max, per: .nanoseconds(1)) }

  /// The one limit of a limiter made with one; `nil` for a limiter with limits per key.
  package var uniformLimit: RateLimit? { limits.uniformLimit }
  /// Where each key's limit comes from.
  @usableFromInline let limits: Limits
  /// Whether the keys keep their buckets as the instant they are full again (a per-key limiter,
  /// whose keys' limits may change between calls), rather than as a balance in units of the one
  /// rate; see ``TokenBucketRate/fullInstantForm(of:)``.
  @usableFromInline let storesFullInstants: Bool
  /// Whether a key's state under another limit is converted with the use it no longer records
  /// at the key's first decision under a new limit, and a key is kept until idle under
  /// ``longestLookBack``: a limiter with a `limits` closure, which is not told of changes.
  @usableFromInline let detectsLimitChanges: Bool
  /// What a limiter that ``detectsLimitChanges`` knows of the limits it decided under: a key is
  /// forgotten only once idle under each (see "A limit that changes unannounced" in
  /// KeyedRateLimiter+LimitHistory.swift). Grows only, rarely: each shard notes its own first.
  @usableFromInline let seenLimits = LockedState(SeenLimits())
  @usableFromInline let clock: AsyncClock
  /// The store's limiter, for a limiter made with a store (deprecated): its `decide` and
  /// `acquire` go there.
  @usableFromInline let storeBacked: StoreBackedRateLimiter<Key>?
  @usableFromInline let shards: Shards<Shard>
  private let nextID = LockedState<UInt64>(0)
  /// The latest limits of the plans' default and keys, for a limiter made with plans: changed
  /// and read only as the plans tell of a change.
  let planHistories = LockedState(PlanHistories())

  /// An in-memory keyed rate limiter granting each key `permits` per `interval`: the same as
  /// ``init(limit:clock:)`` with `RateLimit(permits:per:burst:)`.
  ///
  /// - Parameters:
  ///   - permits: How many permits come back to a key per `interval`. Positive.
  ///   - interval: The period of the rate. At least 1 ns.
  ///   - burst: The capacity of each key's bucket: how many permits a key can take at once after
  ///     a quiet period; `permits` by default. Positive.
  ///   - clock: The clock that measures time: `ContinuousClock` by default, or a ``TestScheduler``.
  public convenience init<C: Clock>(
    permits: Int, per interval: Duration, burst: Int? = nil, clock: C = ContinuousClock()
  ) where C.Duration == Duration {
    self.init(limit: Self.tokenBucket(permits: permits, per: interval, burst: burst), clock: clock)
  }

  /// A keyed rate limiter whose `decide` and `acquire` are made by `store`, shared beyond this
  /// process, and whose `tryAcquire` decides in this process's memory: the same as
  /// ``init(limit:clock:store:)`` with `RateLimit(permits:per:burst:)`.
  ///
  /// Deprecated: a ``StoreBackedRateLimiter`` offers only the store's decision.
  ///
  /// - Parameters:
  ///   - permits: How many permits come back to a key per `interval`. Positive.
  ///   - interval: The period of the rate. At least 1 ns.
  ///   - burst: How many permits a key can take at once; `permits` by default. Positive.
  ///   - clock: The clock ``acquire(_:cost:isolation:)`` sleeps on between attempts.
  ///   - store: Where the buckets live and the decisions are made.
  @available(
    *, deprecated,
    message: "Use StoreBackedRateLimiter(permits:per:burst:clock:store:): this tryAcquire decides in memory"
  )
  public convenience init<C: Clock>(
    permits: Int, per interval: Duration, burst: Int? = nil, clock: C = ContinuousClock(),
    store: some RateLimitStore<Key>
  ) where C.Duration == Duration {
    self.init(limit: Self.tokenBucket(permits: permits, per: interval, burst: burst), clock: clock, store: store)
  }

  /// An in-memory keyed rate limiter with one limit for every key.
  ///
  /// - Parameters:
  ///   - limit: Every key's limit.
  ///   - clock: The clock that measures time: `ContinuousClock` by default, or a ``TestScheduler``.
  public convenience init<C: Clock>(limit: RateLimit, clock: C = ContinuousClock()) where C.Duration == Duration {
    self.init(limits: .uniform(KeyLimit(limit)), clock: clock, store: nil)
  }

  /// A keyed rate limiter with one limit for every key, whose `decide` and `acquire` are made by
  /// `store`, and whose `tryAcquire` decides in this process's memory.
  ///
  /// Deprecated: a ``StoreBackedRateLimiter`` offers only the store's decision.
  ///
  /// - Parameters:
  ///   - limit: Every key's limit, passed to the store with each decision.
  ///   - clock: The clock ``acquire(_:cost:isolation:)`` sleeps on between attempts.
  ///   - store: Where the buckets live and the decisions are made.
  @available(
    *, deprecated,
    message: "Use StoreBackedRateLimiter(limit:clock:store:): this tryAcquire decides in memory"
  )
  public convenience init<C: Clock>(
    limit: RateLimit, clock: C = ContinuousClock(), store: some RateLimitStore<Key>
  ) where C.Duration == Duration {
    self.init(limits: .uniform(KeyLimit(limit)), clock: clock, store: store)
  }

  /// An in-memory keyed rate limiter whose keys have limits of their own: a plan looked up from
  /// the key, say.
  ///
  /// ```swift
  /// let limiter = KeyedRateLimiter<String>(limits: { apiKey in
  ///   plans[apiKey] == .paid ? RateLimit(permits: 1_000, per: .seconds(60)) : RateLimit(permits: 100, per: .seconds(60))
  /// })
  /// ```
  ///
  /// A key whose limit changes (its plan, its algorithm, its window) keeps what it used that
  /// still counts, read under the new limit: a bucket's permits owed stay owed, paid back at the
  /// new rate (a bucket holds the new burst less what it owes); a window's count, or a bucket's
  /// permits owed, count in the new window as grants made as late as they can have been; a sliding
  /// window's grants count in the new window where they were made. So a change never lets a key
  /// start afresh, nor forgives what it owes. A key is forgotten only once it is idle under the
  /// limit it has then (the timer asks it, outside the locks, before forgetting a key) and
  /// under every limit the limiter has decided under.
  ///
  /// What this guarantees: every request granted after a change is one that the old limit or
  /// the new one would have allowed over the key's whole history. Where the new limit looks
  /// further back and allows more at once than the old one (a longer window with more permits, a
  /// slower bucket with a larger burst, or another algorithm), the limiter finds the change at
  /// the key's first decision under the new limit, and takes the part of the new look-back that
  /// the key's state no longer records as used at the old limit's maximum, as
  /// ``RateLimitPlans`` does at the change (from that decision: stricter, never looser). A key
  /// is forgotten only once it is idle under every limit the limiter has decided under, so a key
  /// idle under its old limit still has its state when its limit changes. A key whose limit
  /// changes again within the new limit's look-back takes the new limit as used to its maximum
  /// at its previous change (the state records only what its limit counted since). One case is
  /// left, which a limiter made with ``RateLimitPlans`` (``init(plans:clock:)``) covers, since
  /// it is told of each change: a limit the limiter never decided under before the key was
  /// forgotten. A slower bucket assumes at most its whole burst owed. And
  /// once both windows have passed since a change, a window is exactly the new limit's.
  ///
  /// - Parameters:
  ///   - limits: A key's limit. Called at each decision and before a key is forgotten, outside
  ///     the limiter's locks, so it may read a table of its own; it should be quick, and answer
  ///     the same limit for a key until the key's plan changes.
  ///   - clock: The clock that measures time: `ContinuousClock` by default, or a ``TestScheduler``.
  public convenience init<C: Clock>(
    limits: @escaping @Sendable (Key) -> RateLimit, clock: C = ContinuousClock()
  ) where C.Duration == Duration {
    self.init(limits: .perKey(limits), clock: clock, store: nil)
  }

  /// A keyed rate limiter whose keys have limits of their own, whose `decide` and `acquire` are
  /// made by `store` (each passes the key's limit to the store), and whose `tryAcquire` decides in
  /// this process's memory.
  ///
  /// Deprecated: a ``StoreBackedRateLimiter`` offers only the store's decision.
  ///
  /// - Parameters:
  ///   - limits: A key's limit. Called at each decision, outside the limiter's locks.
  ///   - clock: The clock ``acquire(_:cost:isolation:)`` sleeps on between attempts.
  ///   - store: Where the buckets live and the decisions are made.
  @available(
    *, deprecated,
    message: "Use StoreBackedRateLimiter(limits:clock:store:): this tryAcquire decides in memory"
  )
  public convenience init<C: Clock>(
    limits: @escaping @Sendable (Key) -> RateLimit, clock: C = ContinuousClock(), store: some RateLimitStore<Key>
  ) where C.Duration == Duration {
    self.init(limits: .perKey(limits), clock: clock, store: store)
  }

  private convenience init<C: Clock>(
    limits: Limits, clock: C, store: (any RateLimitStore<Key>)?
  ) where C.Duration == Duration {
    let sleep: @Sendable (Duration) async throws -> Void = { duration in try await clock.sleep(for: duration) }
    let asyncClock = AsyncClock(clock)
    self.init(
      limits: limits, clock: asyncClock,
      storeBacked: store.map { StoreBackedRateLimiter(limits: limits, clock: asyncClock, sleep: sleep, store: $0) })
  }

  /// A limiter whose `decide` and `acquire` are `storeBacked`'s and whose `tryAcquire` decides in
  /// this process's memory under its limits: what a limiter made with a store (deprecated) is.
  package convenience init(sharing storeBacked: StoreBackedRateLimiter<Key>) {
    self.init(limits: storeBacked.limits, clock: storeBacked.clock, storeBacked: storeBacked)
  }

  /// An in-memory keyed rate limiter on `clock`: for tests whose clock is a scheduler with timing
  /// of its own (``AsyncClock/init(scheduler:)``).
  convenience init(permits: Int, per interval: Duration, burst: Int? = nil, clock: AsyncClock) {
    self.init(limit: Self.tokenBucket(permits: permits, per: interval, burst: burst), clock: clock)
  }

  /// An in-memory keyed rate limiter with one limit on `clock`, for tests.
  convenience init(limit: RateLimit, clock: AsyncClock) {
    self.init(limits: .uniform(KeyLimit(limit)), clock: clock, storeBacked: nil)
  }

  /// An in-memory keyed rate limiter with per-key limits on `clock`, for tests.
  convenience init(limits: @escaping @Sendable (Key) -> RateLimit, clock: AsyncClock) {
    self.init(limits: .perKey(limits), clock: clock, storeBacked: nil)
  }

  private init(limits: Limits, clock: AsyncClock, storeBacked: StoreBackedRateLimiter<Key>?) {
    if case .uniform(let uniform) = limits {
      self.limits = .uniform(KeyLimit(uniform.limit, unixNanosecondsAtOrigin: clock.unixNanosecondsAtOrigin))
    } else {
      self.limits = limits
    }
    if case .uniform = limits { storesFullInstants = false } else { storesFullInstants = true }
    if case .perKey = limits { detectsLimitChanges = true } else { detectsLimitChanges = false }
    self.clock = clock
    self.storeBacked = storeBacked
    shards = Shards(count: keyedShardCount) { Shard() }
  }

  /// The token bucket of the `permits:per:burst:` initialisers, whose preconditions name them.
  private static func tokenBucket(permits: Int, per interval: Duration, burst: Int?) -> RateLimit {
    precondition(permits > 0, "KeyedRateLimiter: permits must be positive (got \(permits))")
    precondition(interval >= .nanoseconds(1), "KeyedRateLimiter: interval must be at least 1 ns (got \(interval))")
    precondition((burst ?? permits) > 0, "KeyedRateLimiter: burst must be positive (got \(burst ?? permits))")
    return RateLimit(permits: permits, per: interval, burst: burst)
  }

  /// The limit of `key`: the one limit of a limiter made with one, or what its `limits` closure
  /// answers for `key` now.
  public func limit(for key: Key) -> RateLimit {
    limits.limit(for: key)
  }

  /// Whether the limiter decides in this process's memory (no store): then ``tryAcquire(_:cost:)``
  /// is the same decision as ``decide(_:cost:)`` for a key and cost that passed ``InputRules``,
  /// and a caller that cannot suspend cheaply (a future-based middleware) takes it at once.
  package var decidesInMemory: Bool { storeBacked == nil }

  /// `key`'s limit in units; calls a per-key limiter's closure, so never under a lock.
  @inlinable
  func keyLimit(for key: Key) -> KeyLimit {
    limits.keyLimit(for: key, clock: clock)
  }

  /// How long until the fixed window that counts `key`'s requests now ends; `nil` unless `key`'s
  /// limit is a ``RateLimit/Algorithm/fixedWindow``. Such windows start at whole multiples of the
  /// window in Unix time on a real clock (as a store's do, on the database's clock), so a
  /// store-backed limiter answers for the store's windows too, within the clocks' difference.
  ///
  /// For a response's `RateLimit` field, whose `t` of an allowed request is the window's end.
  public func timeUntilWindowEnds(for key: Key) -> Duration? {
    keyLimit(for: key).timeUntilWindowEnds(clock: clock)
  }

  /// The level a key's bucket is stored with, as the decisions read it at `now`.
  @inlinable
  func readLevel(_ stored: TokenBucketLevel, rate: TokenBucketRate, now: PaceInstant) -> TokenBucketLevel {
    storesFullInstants ? rate.level(fromFullInstantForm: stored, now: now) : stored
  }

  /// The level to store for a key's bucket.
  @inlinable
  func storedLevel(_ level: TokenBucketLevel, rate: TokenBucketRate) -> TokenBucketLevel {
    storesFullInstants ? rate.fullInstantForm(of: level) : level
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
  /// On a limiter made with a store (deprecated) it does not ask the store (it cannot wait for
  /// it): it decides with the limiter's own in-memory buckets under the same limit, so N processes
  /// allow up to N times the limit. A ``StoreBackedRateLimiter`` has no such call.
  ///
  /// - Parameters:
  ///   - key: Whose bucket to take from.
  ///   - cost: How many permits to take; 1 by default. Not negative (a cost from a request goes
  ///     through ``decide(_:cost:)``, which throws for it). 0 asks, and takes nothing: it gets
  ///     the answer a cost of 1 would get. A cost above the key's burst is never allowed:
  ///     `.limited(retryAfter: RateLimitDecision.never)`.
  /// - Returns: `.allowed(remaining:)` with the whole permits left for `key`, or
  ///   `.limited(retryAfter:)` with how long until the same request would be allowed if nothing
  ///   else is taken (an estimate that counts the waiting requests' permits, while some wait).
  @inlinable
  public func tryAcquire(_ key: Key, cost: Int = 1) -> RateLimitDecision {
    precondition(cost >= 0, "KeyedRateLimiter.tryAcquire: cost must not be negative (got \(cost))")
    let limit = keyLimit(for: key)
    if cost > limit.burst { return .limited(retryAfter: RateLimitDecision.never) }
    return decideLocally(key, cost: cost, limit: limit)
  }

  /// Takes `cost` permits for `key` if they are available now, deciding where the limiter's state
  /// lives; never waits for the permits.
  ///
  /// In memory, the same decision as the synchronous `tryAcquire(_:cost:)`; with a store, the
  /// store's. It is not an async overload of `tryAcquire` on purpose: in async code Swift would
  /// always pick such an overload, so `limiter.tryAcquire(key)` would stop compiling there.
  ///
  /// This is the path for keys and costs that come from requests: they are checked against
  /// ``InputRules`` (`String` keys and every cost), so hostile input is an error, never a trap, and
  /// the decision is the same in memory and in every store.
  ///
  /// - Parameters:
  ///   - key: Whose bucket to take from.
  ///   - cost: How many permits to take; 1 by default. 0 asks how many are left and takes none:
  ///     it gets the answer a cost of 1 would get, so it is limited where a cost of 1 would be.
  /// - Throws: ``InvalidInput`` for a key or cost outside ``InputRules`` (a negative cost, or one
  ///   above the key's burst); what the store throws when it cannot decide.
  public func decide(_ key: Key, cost: Int = 1) async throws -> RateLimitDecision {
    if let storeBacked { return try await storeBacked.decide(key, cost: cost) }
    let limit = keyLimit(for: key)
    try InputRules.check(cost: cost, limit: limit.limit)
    if let key = key as? String { try InputRules.check(key: key) }
    return decideLocally(key, cost: cost, limit: limit)
  }

  /// Waits until `cost` permits are available for `key`, then takes them.
  ///
  /// In memory, a key's requests are served in the order they arrive. With a store, it asks the
  /// store and sleeps on the limiter's clock for each `retryAfter` until the store allows it.
  ///
  /// A cost of 0 waits as a cost of 1 would, and takes nothing when its turn comes. A cost above
  /// the key's burst, or a negative one, throws at once, before the store is asked, and takes
  /// nothing: no wait would ever let it through.
  ///
  /// In memory, the request arrives on the caller's actor, before `acquire` first suspends: tasks
  /// started in order from one actor join the key's queue, and are granted, in that order.
  ///
  /// - Parameters:
  ///   - key: Whose bucket to take from.
  ///   - cost: How many permits to take; 1 by default. From 0 to the key's burst.
  ///   - isolation: The caller's actor; leave the default.
  /// - Throws: ``InvalidInput/negativeCost(_:)`` or ``InvalidInput/costAboveBurst(cost:burst:)``
  ///   for a cost no wait would let through; `CancellationError` if the task is cancelled before
  ///   the permits are granted (then nothing is taken); or what the store throws.
  public func acquire(_ key: Key, cost: Int = 1, isolation: isolated (any Actor)? = #isolation) async throws {
    if let storeBacked { return try await storeBacked.acquire(key, cost: cost) }
    while true {
      let limit = keyLimit(for: key)
      try InputRules.check(cost: cost, limit: limit.limit)
      try Task.checkCancellation()
      if decideLocally(key, cost: cost, limit: limit).isAllowed { return }
      do {
        return try await wait(key, cost: cost, limit: limit, isolation: isolation)
      } catch is StaleLimit {
        // Its limit was read before a plan change the key's shard has applied: read it again.
        continue
      }
    }
  }

  /// Why a request did not start waiting: the limit it was decided under was read before a plan
  /// change its key's shard has applied (``Shard/planVersion``), and queued under it, it would
  /// undo what the change assumed.
  @usableFromInline
  struct StaleLimit: Error {
    @inlinable init() {}
  }

  /// Queues a request for `cost` of `key`'s permits under `limit`, and waits for its turn.
  ///
  /// - Throws: `CancellationError`, or ``StaleLimit`` (at once, queuing nothing).
  private func wait(_ key: Key, cost: Int, limit: KeyLimit, isolation: isolated (any Actor)?) async throws {
    let id = nextID.withLock { id in
      id &+= 1
      return id
    }
    let hash = key.hashValue
    let index = Self.shardIndex(hash: hash)
    // A task that a TestScheduler counts as running (PaceTesting's `settle`) waits here: counted
    // out once queued, and in again by whatever grants or refuses it, before it can run.
    let tracked = clock.testScheduler?.followsCurrentTask ?? false
    // With `isolation`, neither the handler nor the continuation's body hops to another
    // executor: the request is queued before the first suspension, in the caller's order.
    try await withTaskCancellationHandler(
      operation: {
        try await withUnsafeThrowingContinuation(isolation: isolation) { (continuation: Continuation) in
          let now = clock.now()
          let effects = shards.withLock(index) { shard -> Effects in
            guard !Task.isCancelled else { return Effects(refusedAtOnce: continuation) }
            if limit.planVersion < shard.planVersion {
              var effects = Effects()
              effects.staleAtOnce = continuation
              return effects
            }
            shard.waiters[id] = (continuation: continuation, tracked: tracked)
            _ = shard.buckets.indexInserting(
              key, hash: hash,
              (level: freshLevel(limit.rate, now: now), checkAt: PaceInstant(nanoseconds: .max)))
            var effects = run(
              key, hash: hash, now: now, consumedCheck: false, limit: limit.rate, in: &shard,
              .enqueue(id: id, cost: cost))
            shard.shrinkIfSparse()
            effects.arming = shard.timer.reserveIfNeeded()
            effects.queued = true
            return effects
          }
          carryOut(effects, shard: index)
          // Counted out after the grants it made were counted in: the count never reads zero
          // while something is on its way.
          if tracked, effects.refusedAtOnce == nil, effects.staleAtOnce == nil {
            clock.testScheduler?.activityStopped()
          }
        }
      },
      onCancel: {
        let now = clock.now()
        let effects = shards.withLock(index) { shard -> Effects in
          guard shard.waiters[id] != nil else { return Effects() }
          var effects = run(key, hash: hash, now: now, consumedCheck: false, limit: nil, in: &shard, .cancel(id: id))
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
    let limit = keyLimit(for: key)
    let rate = limit.rate
    let now = clock.now()
    let hash = key.hashValue
    return shards.withLock(Self.shardIndex(hash: hash)) { shard in
      let level = shard.buckets.index(of: key, hash: hash).map {
        shard.buckets.unsafeValuePointer(at: $0).pointee.level
      }
      if level == nil, limit.isDefault, var owed = defaultChangeCounter(in: &shard, rate: rate, now: now) {
        return owed.available(now: now)
      }
      var counter = loadCounter(
        level: level, log: shard.logs.isEmpty ? nil : shard.logs[key],
        bucketRate: shard.bucketRates.isEmpty ? nil : shard.bucketRates[key], rate: rate, now: now,
        storedFixedRate: storedFixedRate(of: key, in: shard),
        earlierChange: shard.limitChanges.isEmpty ? nil : shard.limitChanges[key]
      ).counter
      return counter.available(now: now)
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
            + shard.queues.capacity * MemoryLayout<(Key, WaitingRequests)>.stride
            + shard.logs.capacity * MemoryLayout<(Key, SlidingWindowLog)>.stride
            + shard.logs.values.reduce(0) { $0 + $1.heldStorageBytes }
            + shard.bucketRates.capacity * MemoryLayout<(Key, TokenBucketRate)>.stride
            + shard.fixedRates.capacity * MemoryLayout<(Key, WindowRate)>.stride
            + shard.limitChanges.capacity * MemoryLayout<(Key, PaceInstant)>.stride
            + shard.waiters.capacity * MemoryLayout<(UInt64, Waiter)>.stride
        }
    }
  }

  /// How many ``acquire(_:cost:isolation:)`` calls wait, over all keys: the total of
  /// ``waitingCount(for:)``.
  public var waitingCount: Int {
    shards.indices.reduce(0) { count, index in count + shards.withLock(index) { $0.waiters.count } }
  }

  /// How many ``acquire(_:cost:isolation:)`` calls wait for `key`'s permits now.
  public func waitingCount(for key: Key) -> Int {
    let hash = key.hashValue
    return shards.withLock(Self.shardIndex(hash: hash)) { shard in
      shard.queues.isEmpty ? 0 : shard.queues[key]?.queue.count ?? 0
    }
  }

  // MARK: Under the lock

  @inlinable
  static func shardIndex(hash: Int) -> Int {
    keyedShardIndex(hash: hash)
  }

  /// The in-memory decision, for a cost from 0 to `limit`'s burst.
  @inlinable
  func decideLocally(_ key: Key, cost: Int, limit: KeyLimit) -> RateLimitDecision {
    let hash = key.hashValue
    let index = Self.shardIndex(hash: hash)
    // As in ``KeyedPacer/call(_:_:)``: the slot loads while the clock is read and the lock taken.
    KeyTable<Key, KeyBucket>.prefetch(shards.unsafeShard(index).pointee.state.buckets.unsafePrefetchHint, hash: hash)
    let now = clock.now()
    guard case .tokenBucket(let rate) = limit.rate else {
      return decideInWindow(key, hash: hash, shard: index, cost: cost, limit: limit, now: now)
    }
    var arming: ShardTimer<Key>.Arming?
    var newLimit = false
    let decision = shards.withLock(index) { shard -> RateLimitDecision? in
      // Noted once decided: the key's state was stored under a limit seen before.
      defer { if detectsLimitChanges { newLimit = shard.seenLimits.note(limit.rate) } }
      guard let slot = shard.buckets.index(of: key, hash: hash) else {
        return decideNew(key, hash: hash, cost: cost, limit: limit, rate: rate, now: now, in: &shard, arming: &arming)
      }
      let bucket = shard.buckets.unsafeValuePointer(at: slot)
      // A key stored under another limit is converted on the general path.
      if storesFullInstants, bucket.pointee.level.balance < 0 || shard.bucketRates[key] != rate { return nil }
      // The machine's decision on the stored level, behind the key's waiting requests, if any;
      // `tryAcquire` never changes a queue, so only the level is stored back.
      var tokens = TokenBucket(rate: rate, level: readLevel(bucket.pointee.level, rate: rate, now: now))
      defer { bucket.pointee.level = storedLevel(tokens.level, rate: rate) }
      // The queues are looked up only in a shard that has any. A literal `nil` elsewhere, not an
      // optional that happens to be empty, lets the machine's common case compile down to the
      // counter's arithmetic: this call is the one a million keys' traffic takes.
      guard !shard.queues.isEmpty else {
        return RateLimitStateMachine.tryAcquire(cost: cost, now: now, counter: &tokens, queue: nil)
      }
      return RateLimitStateMachine.tryAcquire(cost: cost, now: now, counter: &tokens, queue: shard.queues[key]?.queue)
    }
    if arming != nil { carryOut(Effects(arming: arming), shard: index) }
    if newLimit { noteSeen(limit.rate) }
    guard let decision else {
      return decideInWindow(key, hash: hash, shard: index, cost: cost, limit: limit, now: now)
    }
    return decision
  }

  /// ``decideLocally(_:cost:limit:)`` under the shard's lock for a key the shard holds no state
  /// for, under a token bucket; `nil` for the general path.
  ///
  /// Out of line: the first call on a key is rarer than the calls after it, whose path stays
  /// short, and the stored value is made here, where no autoclosure captures (and retains) the
  /// limiter for it.
  @inlinable @inline(never)
  func decideNew(
    _ key: Key, hash: Int, cost: Int, limit: KeyLimit, rate: TokenBucketRate, now: PaceInstant, in shard: inout Shard,
    arming: inout ShardTimer<Key>.Arming?
  ) -> RateLimitDecision? {
    // Under a default that changed recently, it may owe: the general path knows what.
    if limit.isDefault, shard.defaultChange != nil { return nil }
    // A key with no state has a full bucket and nobody waiting: any request fits, and a query
    // leaves it full, so unstored.
    var tokens = TokenBucket(rate: rate, level: rate.full(at: now))
    let decision = RateLimitStateMachine.tryAcquire(cost: cost, now: now, counter: &tokens, queue: nil)
    guard !tokens.isFull else { return decision }
    // A bucket that fills again only beyond the end of the timeline is never checked.
    let checkAt = tokens.fullTime
    let stored = (level: storedLevel(tokens.level, rate: rate), checkAt: checkAt ?? PaceInstant.max)
    _ = shard.buckets.indexInserting(key, hash: hash, stored)
    if storesFullInstants { shard.bucketRates[key] = rate }
    if let checkAt { shard.timer.add(checkAt, for: key) }
    arming = shard.timer.reserveIfNeeded()
    return decision
  }

  /// Adds a limit a shard saw for the first time to the limiter's ``seenLimits``.
  @usableFromInline
  func noteSeen(_ rate: KeyRate) {
    seenLimits.withLock { _ = $0.note(rate) }
  }

  /// Runs one event of `key`'s machine, built from its stored level and queue, then stores them
  /// back: forgets the key if its bucket is full and nobody waits, or makes sure its heap entry
  /// comes by its next event (its first request's turn, or its bucket full again).
  ///
  /// - Parameters:
  ///   - consumedCheck: Whether the key's heap entry has just come out of the heap.
  ///   - limit: The key's rate, from a request for it; `nil` for an event of the key's own (a
  ///     cancellation, a firing), which uses the rate of the key's waiting requests, the one
  ///     limit of a uniform limiter, or no rate at all for a check of a per-key limiter's key
  ///     that nobody waits for.
  /// - Returns: The continuations the event resumes; the caller reserves the shard's timer once
  ///   the event is done (not during a firing, which reserves it when it ends).
  @inlinable
  func run(
    _ key: Key, hash: Int, now: PaceInstant, consumedCheck: Bool, limit: KeyRate?, in shard: inout Shard,
    _ event: KeyEvent
  ) -> Effects {
    guard let slot = shard.buckets.index(of: key, hash: hash) else { return Effects() }
    var bucket = shard.buckets.unsafeValuePointer(at: slot).pointee
    let waiting = shard.queues.isEmpty ? nil : shard.queues.removeValue(forKey: key)
    let rate: KeyRate
    if let limit {
      rate = limit
    } else if let waiting {
      rate = waiting.rate
    } else if case .uniform(let limit) = limits {
      rate = limit.rate
    } else {
      var effects = Effects()
      if checkIdleInstant(of: key, at: slot, now: now, consumedCheck: consumedCheck, in: &shard) {
        effects.idle.append(key)
      }
      return effects
    }
    let log = shard.logs.isEmpty ? nil : shard.logs.removeValue(forKey: key)
    let bucketRate = shard.bucketRates.isEmpty ? nil : shard.bucketRates[key]
    var machine = RateLimitMachine(
      counter: loadCounterNotingChange(
        of: key, level: bucket.level, log: log, bucketRate: bucketRate, rate: rate, now: now, in: &shard),
      queue: waiting?.queue)
    let wasWaiting = machine.isWaiting
    let action =
      switch event {
      case .enqueue(let id, let cost): machine.enqueue(id: id, cost: cost, now: now)
      case .cancel(let id): machine.cancel(id: id, now: now)
      case .timerFired: machine.timerFired(now: now)
      }
    var effects = Effects()
    for id in action.granted {
      if let waiter = shard.waiters.removeValue(forKey: id) { effects.granted.append(waiter) }
    }
    if let id = action.refused { effects.refused = shard.waiters.removeValue(forKey: id) }
    let isWaiting = machine.isWaiting
    if isWaiting, let queue = machine.queue.take() {
      shard.queues[key] = WaitingRequests(queue: queue, rate: rate)
    } else if machine.counter.isIdle, !detectsLimitChanges {
      // (A limiter that detects changes keeps it until its check finds it idle under the
      // longest look-back it saw.)
      shard.buckets.remove(at: slot)
      if bucketRate != nil { shard.bucketRates.removeValue(forKey: key) }
      return effects
    }
    store(machine.counter, of: key, into: &bucket.level, logs: &shard.logs, bucketRates: &shard.bucketRates)
    noteStoredFixedRate(of: key, machine.counter, in: &shard)
    // Nobody waits: the key is looked at again when its counter is idle, to be forgotten. While
    // requests wait, the key's entry is the timer a `RateLimiter` arms for them: for the first
    // request's turn as it starts waiting (an entry for the idle counter goes stale, else its
    // firing, late on a tick, could grant the request before that timer fires), then moved only
    // earlier, as that timer is ("armed for earlier, it looks again when it fires").
    let next = isWaiting ? action.wakeAt : machine.counter.idleTime
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

  /// The check of a per-key limiter's key that nobody waits for: its stored state says when it
  /// is idle under the limit it was stored under (see ``idleInstant(of:now:)``), so the key's
  /// limit (user code) is not asked under the lock. A key idle under that limit is returned
  /// (`true`), to be forgotten once its limit now finds it idle too
  /// (``forgetIfIdle(_:shard:)``); otherwise it is looked at again when it is idle.
  @inlinable
  func checkIdleInstant(of key: Key, at slot: Int, now: PaceInstant, consumedCheck: Bool, in shard: inout Shard)
    -> Bool
  {
    guard consumedCheck else { return false }
    let bucket = shard.buckets.unsafeValuePointer(at: slot)
    var (idle, next) = Self.idleInstant(of: bucket.pointee.level, now: now)
    if detectsLimitChanges {
      next = keptUntil(
        level: bucket.pointee.level, log: shard.logs.isEmpty ? nil : shard.logs[key],
        bucketRate: shard.bucketRates.isEmpty ? nil : shard.bucketRates[key],
        seen: seenLimits.withLock { $0 })
      idle = next.map { now >= $0 } ?? false
    }
    if idle { return true }
    if let next {
      bucket.pointee.checkAt = next
      shard.timer.add(next, for: key)
    } else {
      bucket.pointee.checkAt = .max
    }
    return false
  }

  /// ``decideLocally(_:cost:limit:)`` for a window policy: the key's counter, built from its
  /// stored state (and its log, for a sliding window), decides, and is stored back.
  @inlinable
  func decideInWindow(_ key: Key, hash: Int, shard index: Int, cost: Int, limit: KeyLimit, now: PaceInstant)
    -> RateLimitDecision
  {
    let rate = limit.rate
    var arming: ShardTimer<Key>.Arming?
    var newLimit = false
    let decision = shards.withLock(index) { shard -> RateLimitDecision? in
      // A limit read before a change this shard has applied would undo what the change assumed.
      if limit.planVersion < shard.planVersion { return nil }
      defer { if detectsLimitChanges { newLimit = shard.seenLimits.note(limit.rate) } }
      let slot = shard.buckets.index(of: key, hash: hash)
      let level = slot.map { shard.buckets.unsafeValuePointer(at: $0).pointee.level }
      let log = shard.logs.isEmpty ? nil : shard.logs.removeValue(forKey: key)
      let bucketRate = shard.bucketRates.isEmpty ? nil : shard.bucketRates[key]
      var counter: RateLimitCounter
      if slot == nil, limit.isDefault, let owed = defaultChangeCounter(in: &shard, rate: rate, now: now) {
        counter = owed
      } else {
        counter = loadCounterNotingChange(
          of: key, level: level, log: log, bucketRate: bucketRate, rate: rate, now: now, in: &shard)
      }
      let queue = slot == nil || shard.queues.isEmpty ? nil : shard.queues[key]?.queue
      let decision = RateLimitMachine<RateLimitCounter>.tryAcquire(
        cost: cost, now: now, counter: &counter, queue: queue)
      if let slot {
        // The key's entry stays until its check finds it idle, as a token bucket's does.
        store(
          counter, of: key, into: &shard.buckets.unsafeValuePointer(at: slot).pointee.level, logs: &shard.logs,
          bucketRates: &shard.bucketRates)
        noteStoredFixedRate(of: key, counter, in: &shard)
      } else if !counter.isIdle {
        let checkAt = counter.idleTime
        var level = TokenBucketLevel(balance: 0, updated: now)
        store(counter, of: key, into: &level, logs: &shard.logs, bucketRates: &shard.bucketRates)
        noteStoredFixedRate(of: key, counter, in: &shard)
        _ = shard.buckets.indexInserting(key, hash: hash, (level: level, checkAt: checkAt ?? .max))
        if let checkAt { shard.timer.add(checkAt, for: key) }
        arming = shard.timer.reserveIfNeeded()
      }
      return decision
    }
    if arming != nil { carryOut(Effects(arming: arming), shard: index) }
    if newLimit { noteSeen(limit.rate) }
    guard let decision else {
      let current = keyLimit(for: key)
      if cost > current.burst { return .limited(retryAfter: RateLimitDecision.never) }
      return decideLocally(key, cost: cost, limit: current)
    }
    return decision
  }

  @inlinable
  func timerFired(shard index: Int, generation: UInt64) {
    let now = clock.now()
    var effects = shards.withLock(index) { shard -> Effects in
      guard shard.timer.beginFiring(generation: generation, now: now) else { return Effects() }
      var effects = Effects()
      while let entry = shard.timer.nextDue() {
        let hash = entry.key.hashValue
        guard let slot = shard.buckets.index(of: entry.key, hash: hash),
          shard.buckets.unsafeValuePointer(at: slot).pointee.checkAt == entry.deadline
        else { continue }
        let ran = run(entry.key, hash: hash, now: now, consumedCheck: true, limit: nil, in: &shard, .timerFired)
        effects.granted += ran.granted
        effects.idle += ran.idle
      }
      shard.timer.endFiring()
      if let change = shard.defaultChange, now >= change.until { shard.defaultChange = nil }
      shard.shrinkIfSparse()
      effects.arming = shard.timer.reserveIfNeeded()
      return effects
    }
    let idle = effects.idle
    effects.idle = []
    carryOut(effects, shard: index)
    if !idle.isEmpty { forgetIfIdle(idle, shard: index) }
  }

  /// Forgets the keys of a per-key limiter that were idle under the limit they were stored under
  /// if they are idle under the limit they have now, asked here, outside the lock: a longer
  /// window may still count what they were granted. A key not idle is stored under its limit now,
  /// and looked at again when it is idle; a key that changed meanwhile is left to its new state.
  @usableFromInline
  func forgetIfIdle(_ keys: [Key], shard index: Int) {
    let limits = keys.map { keyLimit(for: $0) }
    if detectsLimitChanges { seenLimits.withLock { seen in for limit in limits { _ = seen.note(limit.rate) } } }
    let now = clock.now()
    let arming = shards.withLock(index) { shard -> ShardTimer<Key>.Arming? in
      for (key, limit) in zip(keys, limits) {
        let hash = key.hashValue
        guard let slot = shard.buckets.index(of: key, hash: hash),
          shard.queues.isEmpty || shard.queues[key] == nil
        else { continue }
        let entry = shard.buckets.unsafeValuePointer(at: slot)
        if limit.planVersion < shard.planVersion {
          // Read before a change this shard applied: looked at again, with its limit read anew.
          entry.pointee.checkAt = now
          shard.timer.add(now, for: key)
          continue
        }
        let rate = limit.rate
        let log = shard.logs.isEmpty ? nil : shard.logs.removeValue(forKey: key)
        let bucketRate = shard.bucketRates.isEmpty ? nil : shard.bucketRates[key]
        var counter = loadCounterNotingChange(
          of: key, level: entry.pointee.level, log: log, bucketRate: bucketRate, rate: rate, now: now, in: &shard)
        if detectsLimitChanges { _ = shard.seenLimits.note(rate) }
        counter.refill(now: now)
        if counter.isIdle {
          shard.buckets.remove(at: slot)
          shard.removeSideEntries(of: key)
          continue
        }
        store(counter, of: key, into: &entry.pointee.level, logs: &shard.logs, bucketRates: &shard.bucketRates)
        noteStoredFixedRate(of: key, counter, in: &shard)
        let next = counter.idleTime
        entry.pointee.checkAt = next ?? .max
        if let next { shard.timer.add(next, for: key) }
      }
      shard.shrinkIfSparse()
      return shard.timer.reserveIfNeeded()
    }
    if arming != nil { carryOut(Effects(arming: arming), shard: index) }
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
    effects.staleAtOnce?.resume(throwing: StaleLimit())
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

extension KeyedRateLimiter {
  /// A limiter that looks each key's limit up in `plans` at each decision, so a plan changed at
  /// run time is in force from the key's next request: ``init(limits:clock:)`` with
  /// ``RateLimitPlans/limit(for:)``, except that the plans tell it of each change as it is made.
  /// So a key whose new limit looks further back and allows more at once than its old one also
  /// counts the use its state no longer records, taken at the old limit's maximum (the rule is
  /// in ``RateLimitPlans``), and no change lets it through more than either limit would have
  /// allowed over its history, forgotten keys included.
  ///
  /// - Parameters:
  ///   - plans: The default limit and the keys' own limits.
  ///   - clock: The clock that measures time: `ContinuousClock` by default, or a ``TestScheduler``.
  public convenience init<C: Clock>(plans: RateLimitPlans<Key>, clock: C = ContinuousClock())
  where C.Duration == Duration {
    self.init(limits: .planned(plans), clock: clock, store: nil)
    plans.observe { [weak self] change in
      guard let self else { return false }
      self.planChanged(change)
      return true
    }
  }
}
