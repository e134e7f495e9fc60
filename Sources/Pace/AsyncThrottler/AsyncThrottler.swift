/// Throttles an async function at a steady cadence and gives each caller the result of the
/// invocation that covers its call.
///
/// ```swift
/// let refresh = AsyncThrottler(for: .seconds(1)) { (_: Void) async throws -> Feed in
///   try await api.feed()
/// }
/// let feed = try await refresh()   // the first call of a quiet period starts at once
/// ```
///
/// Timing is ``Throttler``'s, on the same state machine: the first call after a quiet period
/// opens a window of `interval` and, with ``Edges/leading`` (in the default), invokes at once, so
/// its caller is answered as soon as the work is done. At the window's end, the calls made during
/// it are covered by one trailing invocation with their merged value, and the next window opens.
///
/// Results, stale work, dropped calls and cancellation follow the same rules as
/// ``AsyncDebouncer``: callers covered by one invocation share its result; a call that a newer
/// invocation will cover supersedes the work in flight, whose callers throw `CancellationError`
/// (``StaleWork``); with ``Edges/leading`` alone the other calls of a window throw
/// `CancellationError` at once; a caller's own cancellation ends its wait. With
/// ``StaleWork/dropCallsWhileRunning`` calls that arrive while the work runs are dropped: the
/// double-submit guard.
///
/// Works on any clock whose duration is `Duration`; pass a ``TestScheduler`` for virtual time.
/// ``call(_:isolation:)`` registers the call on the caller's actor before it first suspends, and
/// ``submit(_:)`` registers it synchronously. Stored in a property of the object its operation
/// uses, it takes that object as `owner:` (held weakly) or captures `[weak self]`.
public final class AsyncThrottler<Input: Sendable, Output: Sendable>: AsyncPacedFunction {
  let pacer: AsyncWorkPacer<ThrottleStateMachine<Input>, Output>
  /// The driver that paces the calls: Pace's own.
  public var _driver: any _PacingDriver { pacer }

  /// A throttler of `operation`.
  ///
  /// - Parameters:
  ///   - interval: The window length: the least time between invocations. Not negative.
  ///   - edges: Which edges invoke; both by default. Not empty.
  ///   - merge: How the inputs of the calls in a window combine; `.latest` by default.
  ///   - staleWork: What happens to superseded work in flight; `.cancel` by default.
  ///   - clock: The clock that measures time: `ContinuousClock` by default, or a ``TestScheduler``.
  ///   - operation: The function being throttled. It runs in a task of its own.
  @inlinable
  public convenience init<C: Clock>(
    for interval: Duration,
    edges: Edges = .both,
    merge: Merge<Input> = .latest,
    staleWork: StaleWork = .cancel,
    clock: C = ContinuousClock(),
    operation: @escaping @Sendable (Input) async throws -> Output
  ) where C.Duration == Duration {
    self.init(
      interval: interval, edges: edges, merge: merge, staleWork: staleWork, clock: AsyncClock(clock),
      operation: operation
    )
  }

  /// A throttler of `operation` that holds `owner` weakly and passes it to each invocation: the
  /// way to store a throttler in a property of the object its operation uses.
  ///
  /// ```swift
  /// pay = AsyncThrottler(for: .seconds(2), edges: .leading, staleWork: .dropCallsWhileRunning, owner: self) {
  ///   owner, order in try await owner.checkout.pay(order)
  /// }
  /// ```
  ///
  /// The owner is held strongly only while an invocation runs. Once it is gone, the pending
  /// invocation is dropped and calls throw `CancellationError` at once.
  ///
  /// - Parameters:
  ///   - interval: The window length: the least time between invocations. Not negative.
  ///   - edges: Which edges invoke; both by default. Not empty.
  ///   - merge: How the inputs of the calls in a window combine; `.latest` by default.
  ///   - staleWork: What happens to work in flight when a call arrives; `.cancel` by default.
  ///   - clock: The clock that measures time: `ContinuousClock` by default, or a ``TestScheduler``.
  ///   - owner: The object `operation` works on, held weakly.
  ///   - operation: The function being throttled; it gets the owner. It runs in a task of its own.
  @inlinable
  public convenience init<C: Clock, Owner: AnyObject & Sendable>(
    for interval: Duration,
    edges: Edges = .both,
    merge: Merge<Input> = .latest,
    staleWork: StaleWork = .cancel,
    clock: C = ContinuousClock(),
    owner: Owner,
    operation: @escaping @Sendable (_ owner: Owner, _ input: Input) async throws -> Output
  ) where C.Duration == Duration {
    let owned = OwnedOperation(owner: owner, operation: operation)
    self.init(
      interval: interval, edges: edges, merge: merge, staleWork: staleWork, clock: AsyncClock(clock),
      ownerIsGone: owned.isOwnerGone, operation: owned.run
    )
  }

  @usableFromInline
  init(
    interval: Duration, edges: Edges, merge: Merge<Input>, staleWork: StaleWork, clock: AsyncClock,
    ownerIsGone: (@Sendable () -> Bool)? = nil, operation: @escaping @Sendable (Input) async throws -> Output
  ) {
    pacer = AsyncWorkPacer(
      machine: .checked("AsyncThrottler", interval: interval, edges: edges, merge: merge),
      staleWork: staleWork,
      clock: clock,
      ownerIsGone: ownerIsGone,
      operation: operation
    )
  }

  /// Calls the throttled function with `input` and waits for the result of the invocation that
  /// covers the call (``AsyncPacedFunction/call(_:isolation:)`` says how and when it throws).
  public func call(_ input: Input, isolation: isolated (any Actor)? = #isolation) async throws -> Output {
    try await pacer.call(input, isolation: isolation)
  }

  /// Calls the throttled function with `input` now and returns a task that gives the result
  /// (``AsyncPacedFunction/submit(_:)`` says when the call is registered).
  @discardableResult
  public func submit(_ input: Input) -> Task<Output, any Error> {
    pacer.submit(input)
  }
}
