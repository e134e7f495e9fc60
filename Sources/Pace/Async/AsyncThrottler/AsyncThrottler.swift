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
/// `CancellationError` at once; a caller's own cancellation ends its wait.
///
/// Works on any clock whose duration is `Duration`; pass a ``TestScheduler`` for virtual time.
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

  @usableFromInline
  init(
    interval: Duration, edges: Edges, merge: Merge<Input>, staleWork: StaleWork, clock: AsyncClock,
    operation: @escaping @Sendable (Input) async throws -> Output
  ) {
    checkTiming("AsyncThrottler", interval: interval, edges: edges)
    pacer = AsyncWorkPacer(
      machine: ThrottleStateMachine(interval: interval, edges: edges, merge: merge),
      staleWork: staleWork,
      clock: clock,
      operation: operation
    )
  }

  /// Calls the throttled function with `input` and waits for the result of the invocation that
  /// covers the call.
  ///
  /// - Throws: `CancellationError` if the call is superseded, dropped, or cancelled, or if
  ///   ``cancel()`` is called; otherwise whatever `operation` throws.
  public func call(_ input: Input) async throws -> Output {
    try await pacer.call(input)
  }

  /// Calls the throttled function with `input`; the same as ``call(_:)``.
  public func callAsFunction(_ input: Input) async throws -> Output {
    try await pacer.call(input)
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

  /// Whether a trailing invocation is waiting to start.
  public var isPending: Bool {
    pacer.isPending
  }
}

extension AsyncThrottler where Input == Void {
  /// Calls the throttled function and waits for the result of the invocation that covers it.
  public func call() async throws -> Output {
    try await pacer.call(())
  }

  /// Calls the throttled function; the same as ``call()``.
  public func callAsFunction() async throws -> Output {
    try await pacer.call(())
  }
}
