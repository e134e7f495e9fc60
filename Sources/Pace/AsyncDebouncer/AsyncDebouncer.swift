/// Debounces an async function and gives each caller the result of the invocation that covers
/// its call: search-as-you-type, with stale work cancelled.
///
/// ```swift
/// let search = AsyncDebouncer(for: .milliseconds(300)) { (query: String) async throws -> [Item] in
///   try await api.search(query)
/// }
/// let items = try await search("swi")   // CancellationError if a newer call superseded it
/// let task = search.submit("swif")       // registered now, synchronously; `await task.value`
/// ```
///
/// Timing is ``Debouncer``'s, on the same state machine: calls in a burst wait until `interval`
/// has passed with no call (the trailing edge), then one invocation runs `operation` with their
/// merged value; with ``Edges/leading`` the first call of a burst invokes at once.
///
/// - **Results.** Every call covered by an invocation gets its result (or its error): calls in
///   one burst share it, as lodash returns the last result to every call. A call never receives
///   the result of an invocation that did not cover it.
/// - **Stale work.** A call that arrives while work is in flight, and that a newer invocation
///   will cover, supersedes it: the work's callers throw `CancellationError` at once, and the
///   work is cancelled (``StaleWork/cancel``, the default) or left to finish with its result
///   dropped (``StaleWork/discardResult``). With ``StaleWork/dropCallsWhileRunning`` the work goes
///   on and calls that arrive while it runs are dropped instead.
/// - **Dropped calls.** With ``Edges/leading`` alone, the calls after the first one of a burst
///   are covered by no invocation: they throw `CancellationError` at once and supersede nothing.
/// - **Cancellation.** A caller whose task is cancelled stops waiting with `CancellationError`.
///   Work that nobody waits for any more is cancelled (with ``StaleWork/cancel``), and an
///   invocation whose callers have all given up is skipped.
///
/// Works on any clock whose duration is `Duration`; pass a ``TestScheduler`` for virtual time.
/// Call it from any task: ``call(_:isolation:)`` registers the call on the caller's actor before
/// it first suspends, and ``submit(_:)`` registers it synchronously. Releasing the debouncer
/// cancels its timer and any work still running. Stored in a property of the object its
/// operation uses, it takes that object as `owner:` (held weakly) or captures `[weak self]`.
public final class AsyncDebouncer<Input: Sendable, Output: Sendable>: Sendable {
  let pacer: AsyncWorkPacer<DebounceStateMachine<Input>, Output>

  /// A debouncer of `operation`.
  ///
  /// - Parameters:
  ///   - interval: How long calls must stop before the trailing invocation. Not negative.
  ///   - edges: Which edges invoke: `.trailing` (the default), `.leading`, or both. Not empty.
  ///   - maximumWait: The longest a call waits for its invocation to start; `nil` (the default) for
  ///     no bound.
  ///   - merge: How the inputs of the covered calls combine; `.latest` by default.
  ///   - staleWork: What happens to superseded work in flight; `.cancel` by default.
  ///   - clock: The clock that measures time: `ContinuousClock` by default, or a ``TestScheduler``.
  ///   - operation: The function being debounced. It runs in a task of its own.
  @inlinable
  public convenience init<C: Clock>(
    for interval: Duration,
    edges: Edges = .trailing,
    maximumWait: Duration? = nil,
    merge: Merge<Input> = .latest,
    staleWork: StaleWork = .cancel,
    clock: C = ContinuousClock(),
    operation: @escaping @Sendable (Input) async throws -> Output
  ) where C.Duration == Duration {
    self.init(
      interval: interval, edges: edges, maximumWait: maximumWait, merge: merge, staleWork: staleWork,
      clock: AsyncClock(clock), operation: operation
    )
  }

  /// A debouncer of `operation` that holds `owner` weakly and passes it to each invocation: the
  /// way to store a debouncer in a property of the object its operation uses.
  ///
  /// ```swift
  /// search = AsyncDebouncer(for: .milliseconds(300), owner: self) { owner, query in
  ///   try await owner.api.search(query)
  /// }
  /// ```
  ///
  /// The owner is held strongly only while an invocation runs. Once it is gone, the pending
  /// invocation is dropped and calls throw `CancellationError` at once.
  ///
  /// - Parameters:
  ///   - interval: How long calls must stop before the trailing invocation. Not negative.
  ///   - edges: Which edges invoke: `.trailing` (the default), `.leading`, or both. Not empty.
  ///   - maximumWait: The longest a call waits for its invocation to start; `nil` (the default) for
  ///     no bound.
  ///   - merge: How the inputs of the covered calls combine; `.latest` by default.
  ///   - staleWork: What happens to work in flight when a call arrives; `.cancel` by default.
  ///   - clock: The clock that measures time: `ContinuousClock` by default, or a ``TestScheduler``.
  ///   - owner: The object `operation` works on, held weakly.
  ///   - operation: The function being debounced; it gets the owner. It runs in a task of its own.
  @inlinable
  public convenience init<C: Clock, Owner: AnyObject & Sendable>(
    for interval: Duration,
    edges: Edges = .trailing,
    maximumWait: Duration? = nil,
    merge: Merge<Input> = .latest,
    staleWork: StaleWork = .cancel,
    clock: C = ContinuousClock(),
    owner: Owner,
    operation: @escaping @Sendable (_ owner: Owner, _ input: Input) async throws -> Output
  ) where C.Duration == Duration {
    let owned = OwnedOperation(owner: owner, operation: operation)
    self.init(
      interval: interval, edges: edges, maximumWait: maximumWait, merge: merge, staleWork: staleWork,
      clock: AsyncClock(clock), ownerIsGone: owned.isOwnerGone, operation: owned.run
    )
  }

  @usableFromInline
  init(
    interval: Duration, edges: Edges, maximumWait: Duration?, merge: Merge<Input>, staleWork: StaleWork,
    clock: AsyncClock, ownerIsGone: (@Sendable () -> Bool)? = nil,
    operation: @escaping @Sendable (Input) async throws -> Output
  ) {
    checkTiming("AsyncDebouncer", interval: interval, maximumWait: maximumWait, edges: edges)
    pacer = AsyncWorkPacer(
      machine: DebounceStateMachine(interval: interval, edges: edges, maximumWait: maximumWait, merge: merge),
      staleWork: staleWork,
      clock: clock,
      ownerIsGone: ownerIsGone,
      operation: operation
    )
  }

  /// Calls the debounced function with `input` and waits for the result of the invocation that
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

  /// Calls the debounced function with `input`; the same as ``call(_:isolation:)``.
  ///
  /// - Parameters:
  ///   - input: The call's value.
  ///   - isolation: The caller's actor; leave the default.
  public func callAsFunction(_ input: Input, isolation: isolated (any Actor)? = #isolation) async throws -> Output {
    try await pacer.call(input, isolation: isolation)
  }

  /// Calls the debounced function with `input` now, synchronously, and returns a task that gives
  /// the result of the invocation that covers the call.
  ///
  /// The call is registered before `submit` returns, from any context, so the debouncer's state
  /// (``isPending``, a ``TestScheduler``'s deadlines) already reflects it. Cancelling the task
  /// cancels the call, as cancelling the caller of ``call(_:isolation:)`` does.
  ///
  /// - Parameter input: The call's value.
  /// - Returns: A task whose value is the result; it throws what ``call(_:isolation:)`` throws.
  @discardableResult
  public func submit(_ input: Input) -> Task<Output, any Error> {
    pacer.submit(input)
  }

  /// Starts the pending invocation now; does nothing if nothing is pending.
  public func flush() {
    pacer.flush()
  }

  /// Drops the pending invocation and resets, so the next call may lead again; every waiting
  /// caller throws `CancellationError`, and work in flight is cancelled.
  public func cancel() {
    pacer.cancel()
  }

  /// Whether an invocation will start: a value is pending and a caller still waits for it.
  /// `false` once every caller covered by it has cancelled.
  public var isPending: Bool {
    pacer.isPending
  }

  /// When the pending invocation happens if no call arrives meanwhile; `nil` when nothing is
  /// pending.
  ///
  /// Read this, not a ``TestScheduler``'s deadlines, to see when a burst ends: a call inside a
  /// burst arms no timer (it costs no allocation), so the armed timer is the one the burst
  /// started with, re-armed for the true deadline only when it fires. After calls at 0, 100,
  /// 200 and 250 ms on a 300 ms debouncer, the timer is due at 300 ms and `nextInvocation` is
  /// 550 ms.
  public var nextInvocation: PaceInstant? {
    pacer.nextInvocation
  }
}

extension AsyncDebouncer where Input == Void {
  /// Calls the debounced function and waits for the result of the invocation that covers it.
  ///
  /// - Parameter isolation: The caller's actor; leave the default.
  public func call(isolation: isolated (any Actor)? = #isolation) async throws -> Output {
    try await pacer.call((), isolation: isolation)
  }

  /// Calls the debounced function; the same as ``call(isolation:)``.
  ///
  /// - Parameter isolation: The caller's actor; leave the default.
  public func callAsFunction(isolation: isolated (any Actor)? = #isolation) async throws -> Output {
    try await pacer.call((), isolation: isolation)
  }

  /// Calls the debounced function now, synchronously; the same as ``submit(_:)``.
  @discardableResult
  public func submit() -> Task<Output, any Error> {
    pacer.submit(())
  }
}
