/// At most `maximumInFlight` calls at once; the others wait in a bounded queue, in priority
/// classes, for at most `maximumWait`.
///
/// ```swift
/// let limiter = ConcurrencyLimiter(maximumInFlight: 8, maximumQueued: 100, maximumWait: .seconds(2))
/// let page = try await limiter.withPermit { try await render(request) }
/// let report = try await limiter.withPermit(priority: .sheddable) { try await buildReport() }
/// ```
///
/// The rules, exactly:
/// - **Admission.** A call of class `c` is admitted when the calls in flight, of every class, are
///   fewer than `c`'s share of the limit (``PriorityShares/maximumInFlight(for:of:)``; every class
///   has the whole limit by default). Otherwise it waits.
/// - **Order.** Whenever a place frees up, the waiting calls are admitted highest class first and,
///   within a class, in `order` (oldest or newest first), while the class at the head has room. A
///   lower class never overtakes a higher one; an arriving call overtakes only waiting calls of
///   lower classes.
/// - **Queue bound.** At most `maximumQueued` calls wait. When one more must wait, the one that
///   would be admitted last, among the waiting calls and the newcomer, is refused with
///   ``ConcurrencyLimiterError/queueFull(maximumQueued:waited:)``: the lowest class's, and within
///   it the newest in oldest-first order (the newcomer itself) or the oldest in newest-first order.
///   So under overload the lowest class is refused first and the highest last.
/// - **Maximum wait.** A call that has waited `maximumWait` is refused at that instant with
///   ``ConcurrencyLimiterError/maximumWaitReached(waited:)``, even if a place frees up at the same
///   instant. Lower classes, admitted last, reach it first.
/// - **Cancellation.** A waiting call whose task is cancelled leaves the queue at once and throws
///   `CancellationError`; a place granted as it was cancelled goes to the next waiting call.
/// - **Changing the limit** (``maximumInFlight``) takes effect at once: a higher limit admits
///   waiting calls, a lower one lets the calls in flight finish and admits none until they are
///   fewer than it.
///
/// ``withPermit(priority:isolation:_:)`` holds the place for the scope of its closure, so no throw,
/// cancellation or early return leaks it. ``tryWithPermit(priority:isolation:_:)`` and
/// ``tryAcquire(priority:)`` never wait. ``acquire(priority:isolation:)`` returns a
/// ``ConcurrencyPermit`` for work that ends elsewhere (a response body written later).
///
/// Works on any clock whose duration is `Duration`; pass a ``TestScheduler`` for virtual time.
/// Safe from any task; no lock is held while a caller is resumed or a closure runs.
public final class ConcurrencyLimiter: Sendable {
  /// The one key of the single limit's engine.
  struct SingleKey: Hashable, Sendable {}

  private let engine: ConcurrencyLimiterEngine<SingleKey>

  /// How many calls may wait.
  public let maximumQueued: Int
  /// Which waiting call of a class goes first.
  public let order: ConcurrencyQueueOrder
  /// How long a call may wait; `nil` for as long as it takes.
  public let maximumWait: Duration?
  /// How much of the limit each class may fill.
  public let shares: PriorityShares

  /// A limit of `maximumInFlight` calls at once.
  ///
  /// - Parameters:
  ///   - maximumInFlight: How many calls may be in flight at once. Positive.
  ///   - maximumQueued: How many calls may wait; no bound by default. Not negative: 0 refuses
  ///     every call that cannot be admitted at once.
  ///   - order: Which waiting call of a class goes first; the oldest by default.
  ///   - maximumWait: How long a call may wait before it is refused; as long as it takes by
  ///     default. Positive.
  ///   - shares: How much of the limit each class may fill; the whole limit for every class by
  ///     default.
  ///   - clock: The clock that measures the wait: `ContinuousClock` by default, or a ``TestScheduler``.
  public convenience init<C: Clock>(
    maximumInFlight: Int,
    maximumQueued: Int = .max,
    order: ConcurrencyQueueOrder = .oldestFirst,
    maximumWait: Duration? = nil,
    shares: PriorityShares = .unreserved,
    clock: C = ContinuousClock()
  ) where C.Duration == Duration {
    self.init(
      configuration: checkedConcurrencyConfiguration(
        "ConcurrencyLimiter", maximumInFlight: maximumInFlight, maximumQueued: maximumQueued, order: order,
        maximumWait: maximumWait, shares: shares),
      clock: AsyncClock(clock))
  }

  init(configuration: ConcurrencyLimiterStateMachine.Configuration, clock: AsyncClock) {
    engine = ConcurrencyLimiterEngine(configuration: configuration, clock: clock, forgetsIdleKeys: false)
    maximumQueued = configuration.maximumQueued
    order = configuration.order
    maximumWait = configuration.maximumWait
    shares = configuration.shares
  }

  /// How many calls may be in flight at once. Set it at any time, from any thread (an adaptive
  /// limit does, from measured latency): a higher limit admits waiting calls at once; a lower one
  /// lets the calls in flight finish and admits none until they are fewer than it. Positive.
  public var maximumInFlight: Int {
    get { engine.maximumInFlight }
    set {
      precondition(newValue > 0, "ConcurrencyLimiter: maximumInFlight must be positive (got \(newValue))")
      engine.setMaximumInFlight(newValue)
    }
  }

  /// How many calls hold a place now.
  public var inFlightCount: Int { engine.inFlightCount }

  /// How many calls wait now.
  public var waitingCount: Int { engine.waitingCount }

  /// How many ``ConcurrencyPermit``s were released by their deinit rather than by `release()`:
  /// each one a place held longer than its work, a bug in the caller. A test expects 0.
  public var forgottenPermitCount: Int { engine.forgottenPermitCount }

  /// Runs `body` holding a place, waiting for one as the rules say; the place is given back when
  /// `body` returns or throws.
  ///
  /// - Parameters:
  ///   - priority: The call's class; `.default` by default.
  ///   - isolation: The caller's actor; leave the default.
  ///   - body: The work.
  /// - Returns: What `body` returns.
  /// - Throws: ``ConcurrencyLimiterError`` or `CancellationError` without running `body` when the
  ///   call is refused or cancelled before it is admitted; else what `body` throws.
  public func withPermit<Result>(
    priority: AdmissionPriority = .default,
    isolation: isolated (any Actor)? = #isolation,
    _ body: () async throws -> Result
  ) async throws -> Result {
    try await engine.acquire(SingleKey(), priority: priority, isolation: isolation)
    defer { engine.releaseSlot(SingleKey()) }
    return try await body()
  }

  /// Runs `body` holding a place if its class has room now, and gives it back after; never waits.
  ///
  /// - Parameters:
  ///   - priority: The call's class; `.default` by default.
  ///   - isolation: The caller's actor; leave the default.
  ///   - body: The work.
  /// - Returns: What `body` returns, or `nil` without running it when the class has no room.
  public func tryWithPermit<Result>(
    priority: AdmissionPriority = .default,
    isolation: isolated (any Actor)? = #isolation,
    _ body: () async throws -> Result
  ) async rethrows -> Result? {
    guard engine.tryAcquire(SingleKey(), priority: priority) else { return nil }
    defer { engine.releaseSlot(SingleKey()) }
    return try await body()
  }

  /// Waits for a place, as ``withPermit(priority:isolation:_:)`` does, and returns it as a permit
  /// to release when the work is over.
  ///
  /// - Parameters:
  ///   - priority: The call's class; `.default` by default.
  ///   - isolation: The caller's actor; leave the default.
  /// - Returns: The permit; release it on every path.
  /// - Throws: ``ConcurrencyLimiterError`` when refused, `CancellationError` when the task is
  ///   cancelled before it is admitted.
  public func acquire(
    priority: AdmissionPriority = .default, isolation: isolated (any Actor)? = #isolation
  ) async throws -> ConcurrencyPermit {
    try await engine.acquire(SingleKey(), priority: priority, isolation: isolation)
    return LimiterPermit(engine: engine, key: SingleKey(), priority: priority)
  }

  /// A permit if the class has room now; never waits.
  ///
  /// - Parameter priority: The call's class; `.default` by default.
  /// - Returns: The permit, or `nil` when the class has no room (nothing is taken).
  public func tryAcquire(priority: AdmissionPriority = .default) -> ConcurrencyPermit? {
    guard engine.tryAcquire(SingleKey(), priority: priority) else { return nil }
    return LimiterPermit(engine: engine, key: SingleKey(), priority: priority)
  }
}

/// The settings of a concurrency limiter, checked: a bad one traps, naming `owner`.
func checkedConcurrencyConfiguration(
  _ owner: String, maximumInFlight: Int, maximumQueued: Int, order: ConcurrencyQueueOrder, maximumWait: Duration?,
  shares: PriorityShares
) -> ConcurrencyLimiterStateMachine.Configuration {
  precondition(maximumInFlight > 0, "\(owner): maximumInFlight must be positive (got \(maximumInFlight))")
  precondition(maximumQueued >= 0, "\(owner): maximumQueued must not be negative (got \(maximumQueued))")
  if let maximumWait {
    precondition(maximumWait > .zero, "\(owner): maximumWait must be positive (got \(maximumWait))")
  }
  return ConcurrencyLimiterStateMachine.Configuration(
    maximumInFlight: maximumInFlight, maximumQueued: maximumQueued, order: order, maximumWait: maximumWait,
    shares: shares)
}
