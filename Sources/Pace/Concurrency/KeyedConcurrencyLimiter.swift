/// A ``ConcurrencyLimiter`` per key: at most `maximumInFlight` calls at once for each key (a
/// client, a tenant, an upstream host), each key with its own queue, under the same rules.
///
/// ```swift
/// let perTenant = KeyedConcurrencyLimiter<String>(maximumInFlight: 4, maximumQueued: 20)
/// let rows = try await perTenant.withPermit(tenant, priority: .critical) { try await query(tenant) }
/// ```
///
/// Every key has the same settings, and ``maximumInFlight`` changes them all at once. A key with
/// no call in flight and none waiting is forgotten, so memory follows the keys in use, not every
/// key ever seen.
public final class KeyedConcurrencyLimiter<Key: Hashable & Sendable>: Sendable {
  private let engine: ConcurrencyLimiterEngine<Key>

  /// How many calls may wait, for each key.
  public let maximumQueued: Int
  /// Which waiting call of a class goes first.
  public let order: ConcurrencyQueueOrder
  /// How long a call may wait; `nil` for as long as it takes.
  public let maximumWait: Duration?
  /// How much of a key's limit each class may fill.
  public let shares: PriorityShares

  /// A limit of `maximumInFlight` calls at once for each key.
  ///
  /// - Parameters:
  ///   - maximumInFlight: How many calls of one key may be in flight at once. Positive.
  ///   - maximumQueued: How many calls of one key may wait; no bound by default. Not negative.
  ///   - order: Which waiting call of a class goes first; the oldest by default.
  ///   - maximumWait: How long a call may wait before it is refused; as long as it takes by
  ///     default. Positive.
  ///   - shares: How much of a key's limit each class may fill; all of it by default.
  ///   - clock: The clock that measures the wait: `ContinuousClock` by default, or a ``TestScheduler``.
  public init<C: Clock>(
    maximumInFlight: Int,
    maximumQueued: Int = .max,
    order: ConcurrencyQueueOrder = .oldestFirst,
    maximumWait: Duration? = nil,
    shares: PriorityShares = .unreserved,
    clock: C = ContinuousClock()
  ) where C.Duration == Duration {
    let configuration = checkedConcurrencyConfiguration(
      "KeyedConcurrencyLimiter", maximumInFlight: maximumInFlight, maximumQueued: maximumQueued, order: order,
      maximumWait: maximumWait, shares: shares)
    engine = ConcurrencyLimiterEngine(configuration: configuration, clock: AsyncClock(clock), forgetsIdleKeys: true)
    self.maximumQueued = maximumQueued
    self.order = order
    self.maximumWait = maximumWait
    self.shares = shares
  }

  /// How many calls of each key may be in flight at once. Set it at any time, from any thread: a
  /// higher limit admits waiting calls at once; a lower one lets the calls in flight finish and
  /// admits none until they are fewer than it. Positive. Setting it visits every key in use.
  public var maximumInFlight: Int {
    get { engine.maximumInFlight }
    set {
      precondition(newValue > 0, "KeyedConcurrencyLimiter: maximumInFlight must be positive (got \(newValue))")
      engine.setMaximumInFlight(newValue)
    }
  }

  /// How many calls hold a place now, over every key.
  public var inFlightCount: Int { engine.inFlightCount }

  /// How many calls wait now, over every key.
  public var waitingCount: Int { engine.waitingCount }

  /// How many calls of `key` hold a place now.
  public func inFlightCount(for key: Key) -> Int { engine.inFlightCount(for: key) }

  /// How many calls of `key` wait now.
  public func waitingCount(for key: Key) -> Int { engine.waitingCount(for: key) }

  /// How many keys the limiter holds: those with calls in flight or waiting.
  public var keyCount: Int { engine.keyCount }

  /// How many keys the table has room for: for tests that its storage is given back.
  var tableCapacity: Int { engine.tableCapacity }

  /// How many ``ConcurrencyPermit``s were released by their deinit rather than by `release()`:
  /// each one a bug in the caller. A test expects 0.
  public var forgottenPermitCount: Int { engine.forgottenPermitCount }

  /// Runs `body` holding one of `key`'s places, waiting for one as ``ConcurrencyLimiter``'s rules
  /// say; the place is given back when `body` returns or throws.
  ///
  /// - Parameters:
  ///   - key: The key the call counts for.
  ///   - priority: The call's class; `.default` by default.
  ///   - isolation: The caller's actor; leave the default.
  ///   - body: The work.
  /// - Returns: What `body` returns.
  /// - Throws: ``ConcurrencyLimiterError`` or `CancellationError` without running `body` when the
  ///   call is refused or cancelled before it is admitted; else what `body` throws.
  public func withPermit<Result>(
    _ key: Key,
    priority: AdmissionPriority = .default,
    isolation: isolated (any Actor)? = #isolation,
    _ body: () async throws -> Result
  ) async throws -> Result {
    try await engine.acquire(key, priority: priority, isolation: isolation)
    defer { engine.releaseSlot(key) }
    return try await body()
  }

  /// Runs `body` holding one of `key`'s places if its class has room now; never waits.
  ///
  /// - Parameters:
  ///   - key: The key the call counts for.
  ///   - priority: The call's class; `.default` by default.
  ///   - isolation: The caller's actor; leave the default.
  ///   - body: The work.
  /// - Returns: What `body` returns, or `nil` without running it when the class has no room.
  public func tryWithPermit<Result>(
    _ key: Key,
    priority: AdmissionPriority = .default,
    isolation: isolated (any Actor)? = #isolation,
    _ body: () async throws -> Result
  ) async rethrows -> Result? {
    guard engine.tryAcquire(key, priority: priority) else { return nil }
    defer { engine.releaseSlot(key) }
    return try await body()
  }

  /// Waits for one of `key`'s places and returns it as a permit to release when the work is over.
  ///
  /// - Parameters:
  ///   - key: The key the call counts for.
  ///   - priority: The call's class; `.default` by default.
  ///   - isolation: The caller's actor; leave the default.
  /// - Returns: The permit; release it on every path.
  /// - Throws: ``ConcurrencyLimiterError`` when refused, `CancellationError` when the task is
  ///   cancelled before it is admitted.
  public func acquire(
    _ key: Key, priority: AdmissionPriority = .default, isolation: isolated (any Actor)? = #isolation
  ) async throws -> ConcurrencyPermit {
    try await engine.acquire(key, priority: priority, isolation: isolation)
    return LimiterPermit(engine: engine, key: key, priority: priority)
  }

  /// A permit for `key` if the class has room now; never waits.
  ///
  /// - Parameters:
  ///   - key: The key the call counts for.
  ///   - priority: The call's class; `.default` by default.
  /// - Returns: The permit, or `nil` when the class has no room (nothing is taken).
  public func tryAcquire(_ key: Key, priority: AdmissionPriority = .default) -> ConcurrencyPermit? {
    guard engine.tryAcquire(key, priority: priority) else { return nil }
    return LimiterPermit(engine: engine, key: key, priority: priority)
  }
}
