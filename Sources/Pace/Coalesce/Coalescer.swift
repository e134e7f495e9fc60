/// Runs a handler once per turn however many times it is signalled: the
/// `setNeedsReloadData()` pattern, with Dispatch user-data semantics for any value.
///
/// ```swift
/// let reload = Coalescer(scheduler: .main) { tableView.reloadData() }
/// for item in items { item.completed = true; reload.signal() }   // one reloadData()
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
public final class Coalescer<Value: Sendable>: Sendable {
  @usableFromInline let pacer: Pacer<CoalesceStateMachine<Value>>

  /// A coalescer that runs `perform` on `scheduler`.
  ///
  /// - Parameters:
  ///   - window: How long after the first signal the run happens; `.zero` (the default) for
  ///     the scheduler's next turn. Not negative.
  ///   - merge: How the signals' values combine; `.latest` by default.
  ///   - scheduler: Where `perform` runs; the main queue by default.
  ///   - perform: The handler.
  @_disfavoredOverload
  public init(
    window: Duration = .zero,
    merge: Merge<Value> = .latest,
    scheduler: some PaceScheduler = .main,
    perform: @escaping @Sendable (Value) -> Void
  ) {
    checkTiming("Coalescer", interval: window, parameter: "window")
    pacer = Pacer(
      machine: CoalesceStateMachine(window: window, merge: merge),
      scheduler: scheduler,
      perform: perform
    )
  }

  /// A coalescer whose handler runs on the main actor, for UI code.
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
    self.init(window: window, merge: merge, scheduler: DispatchScheduler.main) { value in
      MainActor.assumeIsolated { perform(value) }
    }
  }

  /// Merges `value` into the next run, scheduling it if none is scheduled.
  @inlinable
  public func signal(_ value: Value) {
    pacer.call(value)
  }

  /// Merges `value` into the next run; the same as ``signal(_:)``.
  @inlinable
  public func callAsFunction(_ value: Value) {
    pacer.call(value)
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

  /// A coalescer of plain signals whose handler runs on the main actor.
  ///
  /// - Parameters:
  ///   - window: How long after the first signal the run happens; `.zero` for the next turn.
  ///   - perform: The handler, isolated to the main actor.
  public convenience init(window: Duration = .zero, perform: @escaping @MainActor @Sendable () -> Void) {
    self.init(window: window, merge: .latest, scheduler: DispatchScheduler.main) { _ in
      MainActor.assumeIsolated { perform() }
    }
  }

  /// Schedules a run if none is scheduled.
  @inlinable
  public func signal() {
    pacer.call(())
  }

  /// Schedules a run if none is scheduled; the same as ``signal()``.
  @inlinable
  public func callAsFunction() {
    pacer.call(())
  }
}
