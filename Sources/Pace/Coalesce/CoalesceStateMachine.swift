/// The logic of ``Coalescer``: many signals, one run, as a value type.
///
/// The first signal arms the timer for `window` later (`.zero`: the scheduler's next turn).
/// Signals until then merge. When the timer fires, the merged value is invoked and the
/// coalescer is idle again, so a signal that arrives while the handler runs arms exactly one
/// more run.
///
/// Its storage is `@usableFromInline` and ``call(_:now:)`` `@inlinable` so that ``Pacer``'s hot
/// path specialises in the caller's module; only the machine itself writes the state.
@usableFromInline
struct CoalesceStateMachine<Value: Sendable>: PacerStateMachine {
  @usableFromInline let window: Duration
  @usableFromInline let merge: Merge<Value>

  /// The merge of the signals since the last run.
  @usableFromInline var pending: Value?
  /// The deadline of the armed timer; `nil` when idle.
  @usableFromInline var armedDeadline: PaceInstant?

  init(window: Duration, merge: Merge<Value>) {
    self.window = window
    self.merge = merge
  }

  /// A fresh machine for an initialiser of `type`, whose parameters it checks first.
  static func checked(_ type: StaticString, window: Duration, merge: Merge<Value>) -> Self {
    checkTiming(type, interval: window, parameter: "window")
    return Self(window: window, merge: merge)
  }

  @usableFromInline
  var isPending: Bool { pending != nil }

  @inlinable
  mutating func call(_ value: Value, now: @autoclosure () -> PaceInstant) -> PacerAction<Value> {
    pending.merge(value, using: merge)
    guard armedDeadline == nil else { return .none }
    let deadline = now().advanced(by: window)
    armedDeadline = deadline
    return .schedule(at: deadline)
  }

  @usableFromInline
  mutating func timerFired(now: PaceInstant) -> PacerAction<Value> {
    armedDeadline = nil
    guard let merged = pending.take() else { return .none }
    return .invoke(merged)
  }

  /// Takes the merged signals; the run they were waiting for is then due to nothing.
  @usableFromInline
  mutating func flush(now: PaceInstant) -> Value? {
    guard let merged = pending.take() else { return nil }
    armedDeadline = nil
    return merged
  }

  @usableFromInline
  var nextInvocation: PaceInstant? { pending == nil ? nil : armedDeadline }

  /// Armed exactly while signals wait for their run.
  @usableFromInline
  var hasTimer: Bool { armedDeadline != nil }

  @usableFromInline
  mutating func cancel() -> Bool {
    pending = nil
    defer { armedDeadline = nil }
    return armedDeadline != nil
  }
}
