import Dispatch

/// One ``Throttler`` per key, for as many keys as a server has users or connections.
///
/// ```swift
/// let notify = KeyedThrottler<UserID, Event>(for: .seconds(30), edges: .leading, scheduler: .queue(q)) {
///   user, event in push(user, event)
/// }
/// notify.call(user, event)   // at most one push per user every 30 s
/// ```
///
/// Each key behaves exactly as its own ``Throttler`` with the same parameters, driven by that
/// key's calls alone: windows of `interval`, the same edges and merge. Keys never interfere.
/// Exactly: a `Throttler` called, flushed and cancelled at the instants this is for one key
/// invokes with the same values at the same instants, on a scheduler whose timers fire at their
/// deadline and on one whose timers fire late on a tick (at the first tick at or after their
/// deadline, or after it); where lateness varies from timer to timer, a window may end with its
/// shard's timer, sooner than its own would have fired, never before its end (see
/// ``KeyedDebouncer`` and "When timers fire late" in the Keyed pacing article).
///
/// A key costs no timer, lock or closure of its own (see ``KeyedDebouncer``); a key whose window
/// has closed with nothing pending is forgotten, so idle keys take no memory.
///
/// Call it from any thread. `perform` runs on the scheduler, never under a lock, and may call
/// the throttler again; invocations of one key never overlap and arrive in order.
public final class KeyedThrottler<Key: Hashable & Sendable, Value: Sendable>: KeyedPacedFunction {
  @usableFromInline let pacer: KeyedPacer<Key, ThrottleStateMachine<Value>>
  /// The driver that paces the calls: Pace's own.
  public var _driver: any _KeyedPacingDriver<Key> { pacer }

  /// A keyed throttler that runs `perform` on `scheduler`.
  ///
  /// - Parameters:
  ///   - interval: The window length: the least time between a key's invocations. Not negative.
  ///   - edges: Which edges invoke; both by default. Not empty.
  ///   - merge: How the values of a key's calls in a window combine; `.latest` by default.
  ///   - scheduler: Where time is read and `perform` runs. By default a serial queue of this
  ///     instance's own: keyed pacers serve servers, which have no main queue to spare.
  ///   - perform: The function being throttled, with the key and the merged value.
  public init(
    for interval: Duration,
    edges: Edges = [.leading, .trailing],
    merge: Merge<Value> = .latest,
    scheduler: some PaceScheduler = DispatchScheduler.queue(DispatchQueue(label: "Pace.KeyedThrottler")),
    perform: @escaping @Sendable (Key, Value) -> Void
  ) {
    pacer = KeyedPacer(
      configuration: .checked("KeyedThrottler", interval: interval, edges: edges, merge: merge),
      scheduler: scheduler,
      perform: perform
    )
  }

  /// Records a call for `key` with `value`.
  @inlinable
  public func call(_ key: Key, _ value: Value) {
    pacer.call(key, value)
  }
}
