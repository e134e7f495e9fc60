/// Invokes a function once calls to it have stopped for an interval, with lodash's semantics.
///
/// ```swift
/// let search = Debouncer<String>(for: .milliseconds(300)) { query in api.search(query) }
/// search.call("s")
/// search.call("sw")
/// search.call("swi")   // 300 ms later: api.search("swi"), once
/// ```
///
/// - A burst of calls invokes `perform` once `interval` has passed with no call (the
///   **trailing** edge). With ``Edges/leading`` the first call after a quiet period invokes at
///   once; a lone call with both edges invokes once, not twice.
/// - `maxWait` (raised to `interval` if smaller) bounds the wait: the invocation that covers a
///   call happens at most `maxWait` after it, even while calls keep coming.
/// - `merge` decides the value an invocation receives from the calls it covers (``Merge``).
///
/// Call it from any thread. Invocations never overlap and arrive in order; `perform` runs on
/// the scheduler, never under a lock, and may call the debouncer again. Releasing the debouncer
/// drops its pending invocation: the scheduler holds it only weakly.
///
/// ```
/// calls        a-b-c-------d-----   (one step: 100 ms; interval: 300 ms, trailing)
/// invocations  -------c-------d--
/// ```
public final class Debouncer<Value: Sendable>: Sendable {
  @usableFromInline let pacer: Pacer<DebounceStateMachine<Value>>

  /// A debouncer that runs `perform` on `scheduler`.
  ///
  /// - Parameters:
  ///   - interval: How long calls must stop before the trailing invocation. Not negative.
  ///     `.seconds(Int64.max)` means forever: deadlines saturate at the end of the timeline
  ///     (``PaceInstant/max``, 292 years on), so the trailing invocation comes only there, which
  ///     a real clock never reaches and ``TestScheduler/run()`` does; ``flush()`` still works.
  ///   - edges: Which edges invoke: `.trailing` (the default), `.leading`, or both. Not empty.
  ///   - maxWait: The longest a call waits for its invocation; `nil` (the default) for no bound.
  ///   - merge: How the values of the covered calls combine; `.latest` by default.
  ///   - scheduler: Where time is read and `perform` runs; the main queue by default.
  ///   - perform: The function being debounced.
  @_disfavoredOverload
  public init(
    for interval: Duration,
    edges: Edges = .trailing,
    maxWait: Duration? = nil,
    merge: Merge<Value> = .latest,
    scheduler: some PaceScheduler = .main,
    perform: @escaping @Sendable (Value) -> Void
  ) {
    checkTiming("Debouncer", interval: interval, maxWait: maxWait, edges: edges)
    pacer = Pacer(
      machine: DebounceStateMachine(interval: interval, edges: edges, maxWait: maxWait, merge: merge),
      scheduler: scheduler,
      perform: perform
    )
  }

  /// A debouncer whose `perform` runs on the main actor, for UI code.
  ///
  /// From `@MainActor` code this is the initialiser that `Debouncer(for:) { ... }` picks, so the
  /// closure may touch main-actor state: `Debouncer(for: .milliseconds(300)) { self.label.text = $0 }`.
  ///
  /// - Parameters:
  ///   - interval: How long calls must stop before the trailing invocation. Not negative.
  ///     `.seconds(Int64.max)` means forever: deadlines saturate at the end of the timeline
  ///     (``PaceInstant/max``, 292 years on), so the trailing invocation comes only there, which
  ///     a real clock never reaches and ``TestScheduler/run()`` does; ``flush()`` still works.
  ///   - edges: Which edges invoke: `.trailing` (the default), `.leading`, or both. Not empty.
  ///   - maxWait: The longest a call waits for its invocation; `nil` (the default) for no bound.
  ///   - merge: How the values of the covered calls combine; `.latest` by default.
  ///   - perform: The function being debounced, isolated to the main actor.
  public convenience init(
    for interval: Duration,
    edges: Edges = .trailing,
    maxWait: Duration? = nil,
    merge: Merge<Value> = .latest,
    perform: @escaping @MainActor @Sendable (Value) -> Void
  ) {
    self.init(for: interval, edges: edges, maxWait: maxWait, merge: merge, scheduler: DispatchScheduler.main) {
      value in MainActor.assumeIsolated { perform(value) }
    }
  }

  /// Records a call with `value`; `perform` runs when the edges and timing say so.
  @inlinable
  public func call(_ value: Value) {
    pacer.call(value)
  }

  /// Records a call with `value`; the same as ``call(_:)``.
  @inlinable
  public func callAsFunction(_ value: Value) {
    pacer.call(value)
  }

  /// Drops the pending invocation and resets, so the next call may lead again.
  public func cancel() {
    pacer.cancel()
  }

  /// Performs the pending invocation now; does nothing if nothing is pending.
  ///
  /// It runs synchronously when called on the scheduler (always on ``TestScheduler``),
  /// otherwise it is dispatched there at once.
  public func flush() {
    pacer.flush()
  }

  /// Whether an invocation is waiting to happen.
  public var isPending: Bool {
    pacer.isPending
  }
}

extension Debouncer where Value == Void {
  /// Records a call.
  @inlinable
  public func call() {
    pacer.call(())
  }

  /// Records a call; the same as ``call()``.
  @inlinable
  public func callAsFunction() {
    pacer.call(())
  }
}
