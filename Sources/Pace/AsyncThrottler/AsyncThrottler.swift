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
public final class AsyncThrottler<Input: Sendable, Output: Sendable>: Sendable {
  let pacer: AsyncWorkPacer<ThrottleStateMachine<Input>, Output>

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
    checkTiming("AsyncThrottler", interval: interval, edges: edges)
    pacer = AsyncWorkPacer(
      machine: ThrottleStateMachine(interval: interval, edges: edges, merge: merge),
      staleWork: staleWork,
      clock: clock,
      ownerIsGone: ownerIsGone,
      operation: operation
    )
  }

  /// Calls the throttled function with `input` and waits for the result of the invocation that
  /// covers the call.
  ///
  /// The call runs on the caller's actor until it is registered, so from the main actor a call
  /// is registered before `call` first suspends: a ``TestScheduler`` advanced right after
  /// starting it sees it.
  ///
  /// - Parameters:
  ///   - input: The call's value.
  ///   - isolation: The caller's actor; leave the default.
  /// - Throws: `CancellationError` if the call is superseded, dropped, or cancelled, or if
  ///   ``cancel()`` is called; otherwise whatever `operation` throws.
  public func call(_ input: Input, isolation: isolated (any Actor)? = #isolation) async throws -> Output {
    try await pacer.call(input, isolation: isolation)
  }

  /// Calls the throttled function with `input`; the same as ``call(_:isolation:)``.
  ///
  /// - Parameters:
  ///   - input: The call's value.
  ///   - isolation: The caller's actor; leave the default.
  public func callAsFunction(_ input: Input, isolation: isolated (any Actor)? = #isolation) async throws -> Output {
    try await pacer.call(input, isolation: isolation)
  }

  /// Calls the throttled function with `input` now, synchronously, and returns a task that gives
  /// the result of the invocation that covers the call.
  ///
  /// The call is registered before `submit` returns, from any context, so the throttler's state
  /// (``isPending``, a ``TestScheduler``'s deadlines) already reflects it. Cancelling the task
  /// cancels the call, as cancelling the caller of ``call(_:isolation:)`` does.
  ///
  /// - Parameter input: The call's value.
  /// - Returns: A task whose value is the result; it throws what ``call(_:isolation:)`` throws.
  @discardableResult
  public func submit(_ input: Input) -> Task<Output, any Error> {
    pacer.submit(input)
  }

  /// Starts the pending trailing invocation now; does nothing if nothing is pending. The open
  /// window keeps its end.
  public func flush() {
    pacer.flush()
  }

  /// Drops the pending invocation and closes the window, so the next call may lead again; every
  /// waiting caller throws `CancellationError`, and work in flight is cancelled.
  public func cancel() {
    pacer.cancel()
  }

  /// Whether a trailing invocation will start: a value is pending and a caller still waits for
  /// it. `false` once every caller covered by it has cancelled.
  public var isPending: Bool {
    pacer.isPending
  }

  /// When the pending trailing invocation starts: the end of the open window; `nil` when
  /// nothing will start.
  public var nextInvocation: PaceInstant? {
    pacer.nextInvocation
  }
}

extension AsyncThrottler where Input == Void {
  /// Calls the throttled function and waits for the result of the invocation that covers it.
  ///
  /// - Parameter isolation: The caller's actor; leave the default.
  public func call(isolation: isolated (any Actor)? = #isolation) async throws -> Output {
    try await pacer.call((), isolation: isolation)
  }

  /// Calls the throttled function; the same as ``call(isolation:)``.
  ///
  /// - Parameter isolation: The caller's actor; leave the default.
  public func callAsFunction(isolation: isolated (any Actor)? = #isolation) async throws -> Output {
    try await pacer.call((), isolation: isolation)
  }

  /// Calls the throttled function now, synchronously; the same as ``submit(_:)``.
  @discardableResult
  public func submit() -> Task<Output, any Error> {
    pacer.submit(())
  }
}
