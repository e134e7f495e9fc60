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
public final class AsyncDebouncer<Input: Sendable, Output: Sendable>: AsyncPacedFunction {
  let pacer: AsyncWorkPacer<DebounceStateMachine<Input>, Output>
  /// The driver that paces the calls: Pace's own.
  public var _driver: any _PacingDriver { pacer }

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
    pacer = AsyncWorkPacer(
      machine: .checked("AsyncDebouncer", interval: interval, edges: edges, maximumWait: maximumWait, merge: merge),
      staleWork: staleWork,
      clock: clock,
      ownerIsGone: ownerIsGone,
      operation: operation
    )
  }

  /// Calls the debounced function with `input` and waits for the result of the invocation that
  /// covers the call (``AsyncPacedFunction/call(_:isolation:)`` says how and when it throws).
  public func call(_ input: Input, isolation: isolated (any Actor)? = #isolation) async throws -> Output {
    try await pacer.call(input, isolation: isolation)
  }

  /// Calls the debounced function with `input` now and returns a task that gives the result
  /// (``AsyncPacedFunction/submit(_:)`` says when the call is registered).
  @discardableResult
  public func submit(_ input: Input) -> Task<Output, any Error> {
    pacer.submit(input)
  }
}
