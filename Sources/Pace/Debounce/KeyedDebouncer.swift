import Dispatch

/// One ``Debouncer`` per key, for as many keys as a server has users or documents.
///
/// ```swift
/// let reindex = KeyedDebouncer<DocumentID, [Edit]>(
///   for: .seconds(2), maximumWait: .seconds(10), merge: .append, scheduler: .queue(indexQueue)
/// ) { id, edits in index(id, edits) }
/// reindex.call(id, [edit])   // 2 s after a document's last edit (10 s at most): index(id, edits)
/// ```
///
/// Each key behaves exactly as its own ``Debouncer`` with the same parameters, driven by that
/// key's calls alone: the same edges, `maximumWait` and merge, on the same scheduler. Keys never
/// interfere. Exactly: a `Debouncer` called, flushed and cancelled at the instants this is for
/// one key invokes with the same values at the same instants, on a scheduler whose timers fire
/// at their deadline and on one whose timers fire late on a tick (at the first tick at or after
/// their deadline, or after it), where a key's calls made while its timer is late join that
/// timer's invocation. Where lateness varies from timer to timer, a key's deadline may come with
/// its shard's timer, sooner than its own would have fired, but never before the deadline (see
/// "When timers fire late" in the Keyed pacing article).
///
/// Unlike a dictionary of debouncers, a key costs no timer, lock or closure of its own: keys are
/// spread over shards, each with one lock, one table of small per-key states and one heap of
/// deadlines behind a single scheduler timer. A key whose burst is over is forgotten, so idle
/// keys take no memory; pending work is never dropped.
///
/// Call it from any thread. `perform` runs on the scheduler, never under a lock, and may call
/// the debouncer again; invocations of one key never overlap and arrive in order. Releasing the
/// debouncer drops what is pending.
public final class KeyedDebouncer<Key: Hashable & Sendable, Value: Sendable>: KeyedPacedFunction {
  @usableFromInline let pacer: KeyedPacer<Key, DebounceStateMachine<Value>>
  /// The driver that paces the calls: Pace's own.
  public var _driver: any _KeyedPacingDriver<Key> { pacer }

  /// A keyed debouncer that runs `perform` on `scheduler`.
  ///
  /// - Parameters:
  ///   - interval: How long a key's calls must stop before its trailing invocation. Not negative.
  ///   - edges: Which edges invoke: `.trailing` (the default), `.leading`, or both. Not empty.
  ///   - maximumWait: The longest a call waits for its invocation; `nil` (the default) for no bound.
  ///   - merge: How the values of a key's covered calls combine; `.latest` by default.
  ///   - scheduler: Where time is read and `perform` runs. By default a serial queue of this
  ///     instance's own: keyed pacers serve servers, which have no main queue to spare.
  ///   - perform: The function being debounced, with the key and the merged value.
  public init(
    for interval: Duration,
    edges: Edges = .trailing,
    maximumWait: Duration? = nil,
    merge: Merge<Value> = .latest,
    scheduler: some PaceScheduler = DispatchScheduler.queue(DispatchQueue(label: "Pace.KeyedDebouncer")),
    perform: @escaping @Sendable (Key, Value) -> Void
  ) {
    pacer = KeyedPacer(
      configuration: .checked(
        "KeyedDebouncer", interval: interval, edges: edges, maximumWait: maximumWait, merge: merge),
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
