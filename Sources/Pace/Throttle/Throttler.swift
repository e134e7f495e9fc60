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
///
/// Stored in a property of the object its closure uses, a throttler must not capture that object
/// strongly: pass it as `owner:` (held weakly, passed to `perform`), or capture `[weak self]`.
///
/// ```swift
/// @MainActor final class CheckoutModel {
///   private(set) var payments = 0
///   private var pay: Throttler<Void>?
///
///   init(scheduler: any PaceScheduler = .main) {
///     // The first tap pays at once; taps in the next 500 ms are ignored.
///     pay = Throttler(for: .milliseconds(500), edges: .leading, scheduler: scheduler, owner: self) { owner, _ in
///       owner.payments += 1
///     }
///   }
///
///   func payTapped() { pay?() }
/// }
/// ```
public final class Throttler<Value: Sendable>: PacedFunction {
  @usableFromInline let pacer: Pacer<ThrottleStateMachine<Value>>
  /// The driver that paces the calls: Pace's own.
  public var _driver: any _PacingDriver { pacer }

  init(
    interval: Duration, edges: Edges, merge: Merge<Value>, scheduler: any PaceScheduler, perform: PacerPerform<Value>
  ) {
    pacer = Pacer(
      machine: .checked("Throttler", interval: interval, edges: edges, merge: merge),
      scheduler: scheduler,
      perform: perform
    )
  }

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
  public convenience init(
    for interval: Duration,
    edges: Edges = [.leading, .trailing],
    merge: Merge<Value> = .latest,
    scheduler: some PaceScheduler = .main,
    perform: @escaping @Sendable (Value) -> Void
  ) {
    self.init(interval: interval, edges: edges, merge: merge, scheduler: scheduler, perform: PacerPerform(perform))
  }

  /// A throttler whose `perform` runs on the main actor, on the main queue, for UI code.
  ///
  /// From `@MainActor` code this is the initialiser that `Throttler(for:) { ... }` picks. Stored
  /// in a property of `self`, it must not capture `self` strongly: use
  /// ``init(for:edges:merge:scheduler:owner:perform:)`` or `[weak self]`.
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
    self.init(for: interval, edges: edges, merge: merge, scheduler: .main, perform: perform)
  }

  /// A throttler whose main-actor `perform` runs on `scheduler`: `.main`, or a ``TestScheduler``
  /// advanced on the main actor in tests.
  ///
  /// Swift picks this initialiser for a closure marked `@MainActor` (or a main-actor function);
  /// an unmarked closure with `scheduler:` picks the `@Sendable` initialiser. A scheduler that
  /// would run `perform` off the main thread stops the process with a message that says so: at
  /// once for a ``DispatchScheduler`` on another queue or a ``ClockScheduler``, at the
  /// invocation for other schedulers.
  ///
  /// - Parameters:
  ///   - interval: The window length: the least time between invocations. Not negative.
  ///   - edges: Which edges invoke; both by default. Not empty.
  ///   - merge: How the values of the calls in a window combine; `.latest` by default.
  ///   - scheduler: Where time is read and `perform` runs; it must run work on the main thread.
  ///   - perform: The function being throttled, isolated to the main actor.
  @_disfavoredOverload
  public convenience init(
    for interval: Duration,
    edges: Edges = [.leading, .trailing],
    merge: Merge<Value> = .latest,
    scheduler: any PaceScheduler,
    perform: @escaping @MainActor @Sendable (Value) -> Void
  ) {
    self.init(
      interval: interval, edges: edges, merge: merge, scheduler: scheduler,
      perform: .mainActor("Throttler", scheduler: scheduler, perform)
    )
  }

  /// A throttler that holds `owner` weakly and passes it to each invocation of the main-actor
  /// `perform`: the way to store a throttler in a property of the object its closure uses.
  ///
  /// Once `owner` is gone, the pending invocation is dropped and calls do nothing. A scheduler
  /// that would run `perform` off the main thread stops the process with a message that says so:
  /// at once for a ``DispatchScheduler`` on another queue or a ``ClockScheduler``, at the
  /// invocation for other schedulers. Off the main actor, capture `[weak self]` in the
  /// `@Sendable` initialiser instead.
  ///
  /// - Parameters:
  ///   - interval: The window length: the least time between invocations. Not negative.
  ///   - edges: Which edges invoke; both by default. Not empty.
  ///   - merge: How the values of the calls in a window combine; `.latest` by default.
  ///   - scheduler: Where time is read and `perform` runs: the main queue by default, or a
  ///     ``TestScheduler`` advanced on the main actor.
  ///   - owner: The object `perform` works on, held weakly.
  ///   - perform: The function being throttled, isolated to the main actor; it gets the owner.
  public convenience init<Owner: AnyObject & Sendable>(
    for interval: Duration,
    edges: Edges = [.leading, .trailing],
    merge: Merge<Value> = .latest,
    scheduler: any PaceScheduler = .main,
    owner: Owner,
    perform: @escaping @MainActor @Sendable (_ owner: Owner, _ value: Value) -> Void
  ) {
    self.init(
      interval: interval, edges: edges, merge: merge, scheduler: scheduler,
      perform: .owned("Throttler", owner: owner, scheduler: scheduler, perform: perform)
    )
  }

  /// Records a call with `value`.
  @inlinable
  public func call(_ value: Value) {
    pacer.call(value)
  }
}

extension Throttler where Value == Void {
  /// A throttler of plain calls that holds `owner` weakly and passes it to each invocation of the
  /// main-actor `perform`: `Throttler(for: .milliseconds(500), owner: self) { owner in ... }`.
  ///
  /// - Parameters:
  ///   - interval: The window length: the least time between invocations. Not negative.
  ///   - edges: Which edges invoke; both by default. Not empty.
  ///   - scheduler: Where time is read and `perform` runs: the main queue by default, or a
  ///     ``TestScheduler`` advanced on the main actor.
  ///   - owner: The object `perform` works on, held weakly.
  ///   - perform: The function, isolated to the main actor; it gets the owner.
  public convenience init<Owner: AnyObject & Sendable>(
    for interval: Duration,
    edges: Edges = [.leading, .trailing],
    scheduler: any PaceScheduler = .main,
    owner: Owner,
    perform: @escaping @MainActor @Sendable (_ owner: Owner) -> Void
  ) {
    self.init(for: interval, edges: edges, scheduler: scheduler, owner: owner) { owner, _ in perform(owner) }
  }
}
