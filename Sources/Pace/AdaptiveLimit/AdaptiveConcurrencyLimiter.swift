/// A ``ConcurrencyLimiter`` whose limit an ``AdaptiveLimit`` sets: each call that completes is a
/// sample (its round trip from admission, whether it was dropped, how many were in flight when it
/// was admitted), and the limiter's `maximumInFlight` follows the limit the sample gives.
///
/// ```swift
/// let limiter = AdaptiveConcurrencyLimiter(.gradient2(initialLimit: 8, maximumLimit: 100))
/// let page = try await limiter.withPermit { try await render(request) }
/// ```
///
/// Admission, the queue, priorities and the maximum wait are ``limiter``'s rules. By default no
/// call waits (`maximumQueued: 0`): a call beyond the limit is refused at once with
/// ``ConcurrencyLimiterError``, since a wait before admission is latency the samples do not see.
///
/// A sample is recorded, and the new limit set on ``limiter``, before the call's place is given
/// back, so a place freed by a call that lowered the limit goes to no one while the calls in
/// flight exceed it. `onLimitChange` hears of each change, with no lock held: log it, count it.
public final class AdaptiveConcurrencyLimiter: Sendable {
  /// What became of a call, as its caller reports it.
  public enum Outcome: Sendable, Hashable {
    /// It completed: its round trip is a sample.
    case success
    /// It failed, was refused further on, or timed out: a sample that is dropped.
    case dropped
    /// It says nothing of the service (cancelled by its caller, refused for its input): no sample.
    case ignored
  }

  /// The limiter that admits the calls, whose `maximumInFlight` this one sets: read its counts
  /// here; setting its `maximumInFlight` yourself lasts until the next sample.
  public let limiter: ConcurrencyLimiter

  private struct State {
    var limit: AdaptiveLimit
    /// Permits out: admitted and not yet released.
    var inFlight = 0
  }

  private let state: LockedState<State>
  private let clock: AsyncClock
  private let onLimitChange: (@Sendable (_ from: Int, _ to: Int) -> Void)?

  /// A concurrency limiter that adapts its limit with `limit`'s algorithm, starting at its
  /// current limit.
  ///
  /// - Parameters:
  ///   - limit: The algorithm, with its floor, ceiling and initial limit.
  ///   - maximumQueued: How many calls may wait for a place; none by default. Not negative.
  ///   - order: Which waiting call of a class goes first; the oldest by default.
  ///   - maximumWait: How long a call may wait before it is refused; as long as it takes by
  ///     default. Positive.
  ///   - shares: How much of the limit each class may fill; the whole limit for every class by
  ///     default.
  ///   - clock: The clock that times the round trips and the waits: `ContinuousClock` by default,
  ///     or a ``TestScheduler``.
  ///   - onLimitChange: Called with the old and the new limit at each change, with no lock held,
  ///     on the thread whose call completed.
  public init<C: Clock>(
    _ limit: AdaptiveLimit,
    maximumQueued: Int = 0,
    order: ConcurrencyQueueOrder = .oldestFirst,
    maximumWait: Duration? = nil,
    shares: PriorityShares = .unreserved,
    clock: C = ContinuousClock(),
    onLimitChange: (@Sendable (_ from: Int, _ to: Int) -> Void)? = nil
  ) where C.Duration == Duration {
    limiter = ConcurrencyLimiter(
      configuration: checkedConcurrencyConfiguration(
        "AdaptiveConcurrencyLimiter", maximumInFlight: limit.limit, maximumQueued: maximumQueued, order: order,
        maximumWait: maximumWait, shares: shares),
      clock: AsyncClock(clock))
    state = LockedState(State(limit: limit))
    self.clock = AsyncClock(clock)
    self.onLimitChange = onLimitChange
  }

  /// The adaptive limit as it stands: its algorithm, bounds and current ``AdaptiveLimit/limit``.
  public var limit: AdaptiveLimit { state.withLock { $0.limit } }

  /// How many calls may be in flight now.
  public var maximumInFlight: Int { limiter.maximumInFlight }

  /// Permits admitted and not yet released or deallocated: for tests.
  var permitsOut: Int { state.withLock { $0.inFlight } }

  /// Runs `body` holding a place, as ``ConcurrencyLimiter/withPermit(priority:isolation:_:)``
  /// does, and records its outcome: a return is a success, an error for which `isDropped` is
  /// `true` a drop (rethrown), any other error is ignored (rethrown).
  ///
  /// - Parameters:
  ///   - priority: The call's class; `.default` by default.
  ///   - isDropped: Whether an error counts as a drop; every error but `CancellationError` by
  ///     default.
  ///   - isolation: The caller's actor; leave the default.
  ///   - body: The work.
  /// - Returns: What `body` returns.
  /// - Throws: ``ConcurrencyLimiterError`` or `CancellationError` without running `body` when the
  ///   call is refused or cancelled before it is admitted; else what `body` throws.
  public func withPermit<Result>(
    priority: AdmissionPriority = .default,
    isDropped: (any Error) -> Bool = { !($0 is CancellationError) },
    isolation: isolated (any Actor)? = #isolation,
    _ body: () async throws -> Result
  ) async throws -> Result {
    let permit = try await acquire(priority: priority, isolation: isolation)
    do {
      let result = try await body()
      permit.release(.success)
      return result
    } catch {
      permit.release(isDropped(error) ? .dropped : .ignored)
      throw error
    }
  }

  /// Waits for a place as ``ConcurrencyLimiter/acquire(priority:isolation:)`` does, and returns
  /// it as a permit whose release records the call's outcome.
  ///
  /// - Parameters:
  ///   - priority: The call's class; `.default` by default.
  ///   - isolation: The caller's actor; leave the default.
  /// - Returns: The permit; release it with the outcome on every path.
  /// - Throws: ``ConcurrencyLimiterError`` when refused, `CancellationError` when the task is
  ///   cancelled before it is admitted.
  public func acquire(
    priority: AdmissionPriority = .default, isolation: isolated (any Actor)? = #isolation
  ) async throws -> AdaptiveConcurrencyPermit {
    admitted(try await limiter.acquire(priority: priority, isolation: isolation))
  }

  /// A permit if the call's class has room now; never waits.
  ///
  /// - Parameter priority: The call's class; `.default` by default.
  /// - Returns: The permit, or `nil` when the class has no room (nothing is taken).
  public func tryAcquire(priority: AdmissionPriority = .default) -> AdaptiveConcurrencyPermit? {
    limiter.tryAcquire(priority: priority).map(admitted)
  }

  private func admitted(_ permit: ConcurrencyPermit) -> AdaptiveConcurrencyPermit {
    let now = clock.now()
    let inFlight = state.withLock { state in
      state.inFlight += 1
      return state.inFlight
    }
    return AdaptiveConcurrencyPermit(owner: self, permit: permit, admittedAt: now, inFlight: inFlight)
  }

  /// Records the outcome of a call admitted at `admittedAt` with `inFlight` in flight, and sets
  /// the limiter's limit; `nil` when the permit was forgotten (no sample).
  fileprivate func complete(_ outcome: Outcome?, admittedAt: PaceInstant, inFlight: Int) {
    let now = clock.now()
    let change = state.withLock { state -> (from: Int, to: Int)? in
      state.inFlight -= 1
      guard let outcome, outcome != .ignored else { return nil }
      let before = state.limit.limit
      let sample = AdaptiveLimitSample(
        roundTrip: admittedAt.duration(to: now), inFlight: inFlight, dropped: outcome == .dropped)
      let after = state.limit.record(sample, now: now)
      guard after != before else { return nil }
      // Set under this lock, so that two completions cannot set their limits out of order. The
      // limiter takes its own lock inside this one and never calls back.
      limiter.maximumInFlight = after
      return (before, after)
    }
    if let change, let onLimitChange { onLimitChange(change.from, change.to) }
  }
}

/// A place among an ``AdaptiveConcurrencyLimiter``'s calls in flight, held until ``release(_:)``
/// reports what became of the call.
///
/// Release it once, on every path; a second release does nothing. A permit that is never
/// released gives its place back when it is deallocated, without a sample, and counts in the
/// limiter's `forgottenPermitCount`.
public final class AdaptiveConcurrencyPermit: Sendable {
  private let owner: AdaptiveConcurrencyLimiter
  private let permit: ConcurrencyPermit
  /// When the call was admitted, on the limiter's clock.
  public let admittedAt: PaceInstant
  /// How many calls were in flight when it was admitted, itself included.
  public let inFlight: Int
  private let released = LockedState(false)

  fileprivate init(owner: AdaptiveConcurrencyLimiter, permit: ConcurrencyPermit, admittedAt: PaceInstant, inFlight: Int)
  {
    self.owner = owner
    self.permit = permit
    self.admittedAt = admittedAt
    self.inFlight = inFlight
  }

  /// Records what became of the call (its round trip is measured now) and gives its place back.
  public func release(_ outcome: AdaptiveConcurrencyLimiter.Outcome) {
    guard takeRelease() else { return }
    owner.complete(outcome, admittedAt: admittedAt, inFlight: inFlight)
    permit.release()
  }

  private func takeRelease() -> Bool {
    released.withLock { released in
      defer { released = true }
      return !released
    }
  }

  deinit {
    // The wrapped permit's own deinit gives the place back and counts it as forgotten.
    if takeRelease() { owner.complete(nil, admittedAt: admittedAt, inFlight: inFlight) }
  }
}
