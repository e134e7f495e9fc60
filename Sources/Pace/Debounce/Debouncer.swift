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
/// - `maximumWait` (raised to `interval` if smaller) bounds the wait: the invocation that covers a
///   call happens at most `maximumWait` after it, even while calls keep coming.
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
///
/// Stored in a property of the object its closure uses, a debouncer must not capture that object
/// strongly: pass it as `owner:` (held weakly, passed to `perform`), or capture `[weak self]`.
///
/// ```swift
/// @MainActor final class SearchModel {
///   var hint = ""
///   private var search: Debouncer<String>?
///
///   init(scheduler: any PaceScheduler = .main) {
///     search = Debouncer(for: .milliseconds(300), scheduler: scheduler, owner: self) { owner, query in
///       owner.hint = query
///     }
///   }
/// }
/// ```
public final class Debouncer<Value: Sendable>: PacedFunction {
  @usableFromInline let pacer: Pacer<DebounceStateMachine<Value>>
  /// The driver that paces the calls: Pace's own.
  public var _driver: any _PacingDriver { pacer }

  init(
    interval: Duration, edges: Edges, maximumWait: Duration?, merge: Merge<Value>, scheduler: any PaceScheduler,
    perform: PacerPerform<Value>
  ) {
    pacer = Pacer(
      machine: .checked("Debouncer", interval: interval, edges: edges, maximumWait: maximumWait, merge: merge),
      scheduler: scheduler,
      perform: perform
    )
  }

  /// A debouncer that runs `perform` on `scheduler`.
  ///
  /// - Parameters:
  ///   - interval: How long calls must stop before the trailing invocation. Not negative.
  ///     `.seconds(Int64.max)` means forever: deadlines saturate at the end of the timeline
  ///     (``PaceInstant/max``, 292 years on), so the trailing invocation comes only there, which
  ///     a real clock never reaches and ``TestScheduler/run()`` does; ``flush()`` still works.
  ///   - edges: Which edges invoke: `.trailing` (the default), `.leading`, or both. Not empty.
  ///   - maximumWait: The longest a call waits for its invocation; `nil` (the default) for no bound.
  ///   - merge: How the values of the covered calls combine; `.latest` by default.
  ///   - scheduler: Where time is read and `perform` runs; the main queue by default.
  ///   - perform: The function being debounced.
  @_disfavoredOverload
  public convenience init(
    for interval: Duration,
    edges: Edges = .trailing,
    maximumWait: Duration? = nil,
    merge: Merge<Value> = .latest,
    scheduler: some PaceScheduler = .main,
    perform: @escaping @Sendable (Value) -> Void
  ) {
    self.init(
      interval: interval, edges: edges, maximumWait: maximumWait, merge: merge, scheduler: scheduler,
      perform: PacerPerform(perform)
    )
  }

  /// A debouncer whose `perform` runs on the main actor, on the main queue, for UI code.
  ///
  /// From `@MainActor` code this is the initialiser that `Debouncer(for:) { ... }` picks, so the
  /// closure may touch main-actor state. Stored in a property of `self`, it must not capture
  /// `self` strongly: use ``init(for:edges:maximumWait:merge:scheduler:owner:perform:)`` or
  /// `[weak self]`.
  ///
  /// - Parameters:
  ///   - interval: How long calls must stop before the trailing invocation. Not negative.
  ///     `.seconds(Int64.max)` means forever: deadlines saturate at the end of the timeline
  ///     (``PaceInstant/max``, 292 years on), so the trailing invocation comes only there, which
  ///     a real clock never reaches and ``TestScheduler/run()`` does; ``flush()`` still works.
  ///   - edges: Which edges invoke: `.trailing` (the default), `.leading`, or both. Not empty.
  ///   - maximumWait: The longest a call waits for its invocation; `nil` (the default) for no bound.
  ///   - merge: How the values of the covered calls combine; `.latest` by default.
  ///   - perform: The function being debounced, isolated to the main actor.
  public convenience init(
    for interval: Duration,
    edges: Edges = .trailing,
    maximumWait: Duration? = nil,
    merge: Merge<Value> = .latest,
    perform: @escaping @MainActor @Sendable (Value) -> Void
  ) {
    self.init(for: interval, edges: edges, maximumWait: maximumWait, merge: merge, scheduler: .main, perform: perform)
  }

  /// A debouncer whose main-actor `perform` runs on `scheduler`: `.main`, or a ``TestScheduler``
  /// advanced on the main actor in tests.
  ///
  /// Swift picks this initialiser for a closure marked `@MainActor` (or a main-actor function);
  /// an unmarked closure with `scheduler:` picks the `@Sendable` initialiser:
  ///
  /// ```swift
  /// let search = Debouncer<String>(for: .milliseconds(300), scheduler: scheduler) { @MainActor [weak self] query in
  ///   self?.hint = query
  /// }
  /// ```
  ///
  /// A scheduler that would run `perform` off the main thread stops the process with a message
  /// that says so: at once for a ``DispatchScheduler`` on another queue or a ``ClockScheduler``,
  /// at the invocation for other schedulers.
  ///
  /// - Parameters:
  ///   - interval: How long calls must stop before the trailing invocation. Not negative.
  ///   - edges: Which edges invoke: `.trailing` (the default), `.leading`, or both. Not empty.
  ///   - maximumWait: The longest a call waits for its invocation; `nil` (the default) for no bound.
  ///   - merge: How the values of the covered calls combine; `.latest` by default.
  ///   - scheduler: Where time is read and `perform` runs; it must run work on the main thread.
  ///   - perform: The function being debounced, isolated to the main actor.
  @_disfavoredOverload
  public convenience init(
    for interval: Duration,
    edges: Edges = .trailing,
    maximumWait: Duration? = nil,
    merge: Merge<Value> = .latest,
    scheduler: any PaceScheduler,
    perform: @escaping @MainActor @Sendable (Value) -> Void
  ) {
    self.init(
      interval: interval, edges: edges, maximumWait: maximumWait, merge: merge, scheduler: scheduler,
      perform: .mainActor("Debouncer", scheduler: scheduler, perform)
    )
  }

  /// A debouncer that holds `owner` weakly and passes it to each invocation of the main-actor
  /// `perform`: the way to store a debouncer in a property of the object its closure uses.
  ///
  /// ```swift
  /// search = Debouncer(for: .milliseconds(300), owner: self) { owner, query in
  ///   owner.hint = query
  /// }
  /// ```
  ///
  /// Once `owner` is gone, the pending invocation is dropped and calls do nothing. A scheduler
  /// that would run `perform` off the main thread stops the process with a message that says so:
  /// at once for a ``DispatchScheduler`` on another queue or a ``ClockScheduler``, at the
  /// invocation for other schedulers. Off the main actor, capture `[weak self]` in the
  /// `@Sendable` initialiser instead.
  ///
  /// - Parameters:
  ///   - interval: How long calls must stop before the trailing invocation. Not negative.
  ///   - edges: Which edges invoke: `.trailing` (the default), `.leading`, or both. Not empty.
  ///   - maximumWait: The longest a call waits for its invocation; `nil` (the default) for no bound.
  ///   - merge: How the values of the covered calls combine; `.latest` by default.
  ///   - scheduler: Where time is read and `perform` runs: the main queue by default, or a
  ///     ``TestScheduler`` advanced on the main actor.
  ///   - owner: The object `perform` works on, held weakly.
  ///   - perform: The function being debounced, isolated to the main actor; it gets the owner.
  public convenience init<Owner: AnyObject & Sendable>(
    for interval: Duration,
    edges: Edges = .trailing,
    maximumWait: Duration? = nil,
    merge: Merge<Value> = .latest,
    scheduler: any PaceScheduler = .main,
    owner: Owner,
    perform: @escaping @MainActor @Sendable (_ owner: Owner, _ value: Value) -> Void
  ) {
    self.init(
      interval: interval, edges: edges, maximumWait: maximumWait, merge: merge, scheduler: scheduler,
      perform: .owned("Debouncer", owner: owner, scheduler: scheduler, perform: perform)
    )
  }

  /// Records a call with `value`; `perform` runs when the edges and timing say so.
  @inlinable
  public func call(_ value: Value) {
    pacer.call(value)
  }
}

extension Debouncer where Value == Void {
  /// A debouncer of plain calls that holds `owner` weakly and passes it to each invocation of the
  /// main-actor `perform`: `Debouncer(for: .milliseconds(500), owner: self) { owner in ... }`.
  ///
  /// - Parameters:
  ///   - interval: How long calls must stop before the trailing invocation. Not negative.
  ///   - edges: Which edges invoke: `.trailing` (the default), `.leading`, or both. Not empty.
  ///   - maximumWait: The longest a call waits for its invocation; `nil` (the default) for no bound.
  ///   - scheduler: Where time is read and `perform` runs: the main queue by default, or a
  ///     ``TestScheduler`` advanced on the main actor.
  ///   - owner: The object `perform` works on, held weakly.
  ///   - perform: The function, isolated to the main actor; it gets the owner.
  public convenience init<Owner: AnyObject & Sendable>(
    for interval: Duration,
    edges: Edges = .trailing,
    maximumWait: Duration? = nil,
    scheduler: any PaceScheduler = .main,
    owner: Owner,
    perform: @escaping @MainActor @Sendable (_ owner: Owner) -> Void
  ) {
    self.init(for: interval, edges: edges, maximumWait: maximumWait, scheduler: scheduler, owner: owner) { owner, _ in
      perform(owner)
    }
  }
}
