/// Invokes a function at most once per interval, at a steady cadence, while calls keep coming.
///
/// ```swift
/// let render = Throttler<Offset>(for: .milliseconds(100)) { offset in draw(offset) }
/// // calls every 10 ms for a second: draw(...) at 0, 100, 200, ... 1000 ms
/// ```
///
/// The first call after a quiet period opens a window of `interval` and, with
/// ``Edges/leading`` (in the default), invokes at once. At the window's end, if calls came in
/// during it and ``Edges/trailing`` is set (also in the default), it invokes with their merged
/// value and opens the next window at once; otherwise it goes quiet. So invocations are exactly
/// `interval` apart, never closer (lodash drifts here; Combine and RxSwift do not).
///
/// Call it from any thread. Invocations never overlap and arrive in order; `perform` runs on
/// the scheduler, never under a lock, and may call the throttler again. A call inside an open
/// window does not read the clock. Releasing the throttler drops its pending invocation.
public final class Throttler<Value: Sendable>: Sendable {
  @usableFromInline let pacer: Pacer<ThrottleStateMachine<Value>>

  /// A throttler that runs `perform` on `scheduler`.
  ///
  /// - Parameters:
  ///   - interval: The window length: the least time between invocations. Not negative.
  ///     `.seconds(Int64.max)` means forever: the first window ends only at the end of the
  ///     timeline (``PaceInstant/max``, 292 years on), which a real clock never reaches and
  ///     ``TestScheduler/run()`` does; there its calls are invoked and the throttler goes quiet.
  ///     ``flush()`` still works.
  ///   - edges: Which edges invoke; both by default. Not empty.
  ///   - merge: How the values of the calls in a window combine; `.latest` by default.
  ///   - scheduler: Where time is read and `perform` runs; the main queue by default.
  ///   - perform: The function being throttled.
  @_disfavoredOverload
  public init(
    for interval: Duration,
    edges: Edges = [.leading, .trailing],
    merge: Merge<Value> = .latest,
    scheduler: some PaceScheduler = .main,
    perform: @escaping @Sendable (Value) -> Void
  ) {
    checkTiming("Throttler", interval: interval, edges: edges)
    pacer = Pacer(
      machine: ThrottleStateMachine(interval: interval, edges: edges, merge: merge),
      scheduler: scheduler,
      perform: perform
    )
  }

  /// A throttler whose `perform` runs on the main actor, for UI code.
  ///
  /// From `@MainActor` code this is the initialiser that `Throttler(for:) { ... }` picks.
  ///
  /// - Parameters:
  ///   - interval: The window length: the least time between invocations. Not negative.
  ///     `.seconds(Int64.max)` means forever: the first window ends only at the end of the
  ///     timeline (``PaceInstant/max``, 292 years on), which a real clock never reaches and
  ///     ``TestScheduler/run()`` does; there its calls are invoked and the throttler goes quiet.
  ///     ``flush()`` still works.
  ///   - edges: Which edges invoke; both by default. Not empty.
  ///   - merge: How the values of the calls in a window combine; `.latest` by default.
  ///   - perform: The function being throttled, isolated to the main actor.
  public convenience init(
    for interval: Duration,
    edges: Edges = [.leading, .trailing],
    merge: Merge<Value> = .latest,
    perform: @escaping @MainActor @Sendable (Value) -> Void
  ) {
    self.init(for: interval, edges: edges, merge: merge, scheduler: DispatchScheduler.main) {
      value in MainActor.assumeIsolated { perform(value) }
    }
  }

  /// Records a call with `value`.
  @inlinable
  public func call(_ value: Value) {
    pacer.call(value)
  }

  /// Records a call with `value`; the same as ``call(_:)``.
  @inlinable
  public func callAsFunction(_ value: Value) {
    pacer.call(value)
  }

  /// Drops the pending invocation and closes the window, so the next call may lead again.
  public func cancel() {
    pacer.cancel()
  }

  /// Performs the pending trailing invocation now; does nothing if nothing is pending.
  /// The open window keeps its end.
  public func flush() {
    pacer.flush()
  }

  /// Whether a trailing invocation is waiting to happen.
  public var isPending: Bool {
    pacer.isPending
  }
}

extension Throttler where Value == Void {
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
