/// Runs a handler once per turn however many times it is signalled: the
/// `setNeedsReloadData()` pattern, with Dispatch user-data semantics for any value.
///
/// ```swift
/// @MainActor final class ListController {
///   let tableView = TableView()
///   private var reload: Coalescer<Void>?
///
///   init() {
///     reload = Coalescer(owner: self) { owner in owner.tableView.reloadData() }
///   }
///
///   func itemsChanged(_ items: [Item]) {
///     for _ in items { reload?() }   // one reloadData() on the next turn
///   }
/// }
///
/// let changes = Coalescer<ChangeKinds>(merge: .union) { kinds in apply(kinds) }   // like DispatchSourceUserDataOr
/// let count = Coalescer<Int>(merge: .sum) { n in print("\(n) updates") }          // like DispatchSourceUserDataAdd
/// ```
///
/// The first signal schedules one run on the scheduler's next turn (or `window` later); the
/// signals until then merge with ``Merge`` (`.latest` by default, `.sum` for Add, `.union` for
/// Or, `.latest` for Replace). A signal that arrives while the handler runs schedules exactly
/// one more run, so none is lost. Thread-safe; the handler never runs under a lock; releasing
/// the coalescer drops its pending run.
///
/// Stored in a property of the object its handler uses, a coalescer must not capture that object
/// strongly: pass it as `owner:` (held weakly, passed to the handler), or capture `[weak self]`.
public final class Coalescer<Value: Sendable>: Sendable {
  @usableFromInline let pacer: Pacer<CoalesceStateMachine<Value>>

  init(window: Duration, merge: Merge<Value>, scheduler: any PaceScheduler, perform: PacerPerform<Value>) {
    pacer = Pacer(
      machine: .checked("Coalescer", window: window, merge: merge),
      scheduler: scheduler,
      perform: perform
    )
  }

  /// A coalescer that runs `perform` on `scheduler`.
  ///
  /// - Parameters:
  ///   - window: How long after the first signal the run happens; `.zero` (the default) for
  ///     the scheduler's next turn. Not negative.
  ///   - merge: How the signals' values combine; `.latest` by default.
  ///   - scheduler: Where `perform` runs; the main queue by default.
  ///   - perform: The handler.
  @_disfavoredOverload
  public convenience init(
    window: Duration = .zero,
    merge: Merge<Value> = .latest,
    scheduler: some PaceScheduler = .main,
    perform: @escaping @Sendable (Value) -> Void
  ) {
    self.init(window: window, merge: merge, scheduler: scheduler, perform: PacerPerform(perform))
  }

  /// A coalescer whose handler runs on the main actor, on the main queue, for UI code.
  ///
  /// Stored in a property of `self`, it must not capture `self` strongly: use
  /// `init(window:merge:scheduler:owner:perform:)` or `[weak self]`.
  ///
  /// - Parameters:
  ///   - window: How long after the first signal the run happens; `.zero` for the next turn.
  ///   - merge: How the signals' values combine; `.latest` by default.
  ///   - perform: The handler, isolated to the main actor.
  public convenience init(
    window: Duration = .zero,
    merge: Merge<Value> = .latest,
    perform: @escaping @MainActor @Sendable (Value) -> Void
  ) {
    self.init(window: window, merge: merge, scheduler: .main, perform: perform)
  }

  /// A coalescer whose main-actor handler runs on `scheduler`: `.main`, or a ``TestScheduler``
  /// advanced on the main actor in tests.
  ///
  /// Swift picks this initialiser for a closure marked `@MainActor` (or a main-actor function);
  /// an unmarked closure with `scheduler:` picks the `@Sendable` initialiser. A scheduler that
  /// would run the handler off the main thread stops the process with a message that says so: at
  /// once for a ``DispatchScheduler`` on another queue or a ``ClockScheduler``, at the run for
  /// other schedulers.
  ///
  /// - Parameters:
  ///   - window: How long after the first signal the run happens; `.zero` for the next turn.
  ///   - merge: How the signals' values combine; `.latest` by default.
  ///   - scheduler: Where the handler runs; it must run work on the main thread.
  ///   - perform: The handler, isolated to the main actor.
  @_disfavoredOverload
  public convenience init(
    window: Duration = .zero,
    merge: Merge<Value> = .latest,
    scheduler: any PaceScheduler,
    perform: @escaping @MainActor @Sendable (Value) -> Void
  ) {
    self.init(
      window: window, merge: merge, scheduler: scheduler,
      perform: .mainActor("Coalescer", scheduler: scheduler, perform)
    )
  }

  /// A coalescer that holds `owner` weakly and passes it to each run of the main-actor handler:
  /// the way to store a coalescer in a property of the object its handler uses.
  ///
  /// Once `owner` is gone, the pending run is dropped and signals do nothing. A scheduler that
  /// would run the handler off the main thread stops the process with a message that says so.
  ///
  /// - Parameters:
  ///   - window: How long after the first signal the run happens; `.zero` for the next turn.
  ///   - merge: How the signals' values combine; `.latest` by default.
  ///   - scheduler: Where the handler runs: the main queue by default, or a ``TestScheduler``
  ///     advanced on the main actor.
  ///   - owner: The object the handler works on, held weakly.
  ///   - perform: The handler, isolated to the main actor; it gets the owner.
  public convenience init<Owner: AnyObject & Sendable>(
    window: Duration = .zero,
    merge: Merge<Value> = .latest,
    scheduler: any PaceScheduler = .main,
    owner: Owner,
    perform: @escaping @MainActor @Sendable (_ owner: Owner, _ value: Value) -> Void
  ) {
    self.init(
      window: window, merge: merge, scheduler: scheduler,
      perform: .owned("Coalescer", owner: owner, scheduler: scheduler, perform: perform)
    )
  }

  /// Merges `value` into the next run, scheduling it if none is scheduled.
  @inlinable
  public func signal(_ value: Value) {
    pacer.call(value)
  }

  /// Merges `value` into the next run; the same as ``signal(_:)``.
  @inlinable
  public func callAsFunction(_ value: Value) {
    signal(value)
  }

  /// Runs the handler now with what is pending; does nothing if nothing is pending.
  public func flush() {
    pacer.flush()
  }

  /// Drops the pending data and the scheduled run.
  public func cancel() {
    pacer.cancel()
  }

  /// Whether a run is waiting.
  public var isPending: Bool {
    pacer.isPending
  }

  /// When the waiting run happens; `nil` when no run waits.
  public var nextInvocation: PaceInstant? {
    pacer.nextInvocation
  }
}

extension Coalescer where Value == Void {
  /// A coalescer of plain signals, such as `setNeedsReloadData()`.
  ///
  /// - Parameters:
  ///   - window: How long after the first signal the run happens; `.zero` for the next turn.
  ///   - scheduler: Where `perform` runs; the main queue by default.
  ///   - perform: The handler.
  @_disfavoredOverload
  public convenience init(
    window: Duration = .zero,
    scheduler: some PaceScheduler = .main,
    perform: @escaping @Sendable () -> Void
  ) {
    self.init(window: window, merge: .latest, scheduler: scheduler) { _ in perform() }
  }

  /// A coalescer of plain signals whose handler runs on the main actor, on the main queue.
  ///
  /// - Parameters:
  ///   - window: How long after the first signal the run happens; `.zero` for the next turn.
  ///   - perform: The handler, isolated to the main actor.
  public convenience init(window: Duration = .zero, perform: @escaping @MainActor @Sendable () -> Void) {
    self.init(window: window, merge: .latest, scheduler: .main) { @MainActor _ in perform() }
  }

  /// A coalescer of plain signals whose main-actor handler runs on `scheduler`, which must run
  /// work on the main thread; picked for a closure marked `@MainActor`.
  ///
  /// - Parameters:
  ///   - window: How long after the first signal the run happens; `.zero` for the next turn.
  ///   - scheduler: Where the handler runs: `.main`, or a ``TestScheduler`` advanced on the main actor.
  ///   - perform: The handler, isolated to the main actor.
  @_disfavoredOverload
  public convenience init(
    window: Duration = .zero,
    scheduler: any PaceScheduler,
    perform: @escaping @MainActor @Sendable () -> Void
  ) {
    self.init(window: window, merge: .latest, scheduler: scheduler) { @MainActor _ in perform() }
  }

  /// A coalescer of plain signals that holds `owner` weakly and passes it to each run of the
  /// main-actor handler: `Coalescer(owner: self) { owner in owner.tableView.reloadData() }`.
  ///
  /// - Parameters:
  ///   - window: How long after the first signal the run happens; `.zero` for the next turn.
  ///   - scheduler: Where the handler runs: the main queue by default, or a ``TestScheduler``
  ///     advanced on the main actor.
  ///   - owner: The object the handler works on, held weakly.
  ///   - perform: The handler, isolated to the main actor; it gets the owner.
  public convenience init<Owner: AnyObject & Sendable>(
    window: Duration = .zero,
    scheduler: any PaceScheduler = .main,
    owner: Owner,
    perform: @escaping @MainActor @Sendable (_ owner: Owner) -> Void
  ) {
    self.init(window: window, merge: .latest, scheduler: scheduler, owner: owner) { owner, _ in perform(owner) }
  }

  /// Schedules a run if none is scheduled.
  @inlinable
  public func signal() {
    signal(())
  }

  /// Schedules a run if none is scheduled; the same as ``signal()``.
  @inlinable
  public func callAsFunction() {
    signal(())
  }
}
