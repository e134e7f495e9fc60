/// The logic of ``Throttler``: a steady cadence of windows, as a value type.
///
/// The first call after a quiet period opens a window of `interval` (and invokes at once with
/// the leading edge). When the window ends, if calls came in during it and the trailing edge is
/// set, it invokes with their merge and the next window opens at once; otherwise the throttle
/// goes quiet. While calls keep coming, invocations are exactly `interval` apart.
///
/// A call during an open window needs no time, so the driver does not read the clock for it.
/// The window ends when its timer fires.
struct ThrottleStateMachine<Value: Sendable>: PacerStateMachine {
  private let interval: Duration
  private let leading: Bool
  private let trailing: Bool
  private let merge: Merge<Value>

  /// The end of the open window; `nil` when quiet. The timer is armed exactly while a window
  /// is open, for this instant.
  private(set) var windowEnd: PaceInstant?
  /// The merge of the calls made in the open window since its last invocation.
  private var pending: Value?

  init(interval: Duration, edges: Edges, merge: Merge<Value>) {
    self.interval = interval
    self.leading = edges.contains(.leading)
    self.trailing = edges.contains(.trailing)
    self.merge = merge
  }

  var isPending: Bool { pending != nil }

  mutating func call(_ value: Value, now: @autoclosure () -> PaceInstant) -> PacerAction<Value> {
    if windowEnd != nil {
      if trailing { pending.merge(value, using: merge) }
      return .none
    }
    let end = now().advanced(by: interval)
    windowEnd = end
    if leading { return .invokeAndSchedule(value, at: end) }
    pending = value
    return .schedule(at: end)
  }

  mutating func timerFired(now: PaceInstant) -> PacerAction<Value> {
    guard let end = windowEnd else { return .none }
    guard let merged = pending.take() else {
      windowEnd = nil
      return .none
    }
    // The next window starts where this one ended, so the cadence does not drift with timer
    // latency; a timer late by more than a whole window restarts the cadence from now.
    var next = end.advanced(by: interval)
    if next < now { next = now.advanced(by: interval) }
    windowEnd = next
    return .invokeAndSchedule(merged, at: next)
  }

  mutating func flush(now: PaceInstant) -> Value? {
    pending.take()
  }

  mutating func cancel() -> Bool {
    let hadWindow = windowEnd != nil
    windowEnd = nil
    pending = nil
    return hadWindow
  }
}
