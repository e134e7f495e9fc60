import Pace
import Testing

/// Returns once `condition` holds, checking every millisecond of real time, or records an issue
/// saying `what` it waited for after `timeout`: for a state that nothing announces (a timer armed
/// by another task, a key's in-flight count).
///
/// It sleeps between checks instead of yielding: a `Task.yield` loop keeps a thread of the
/// cooperative pool (two on CI) busy, and the work it waits for may need that thread.
public func waitUntil(
  _ what: @autoclosure () -> String, timeout: Duration = .seconds(30),
  sourceLocation: SourceLocation = #_sourceLocation, _ condition: () -> Bool
) async {
  let deadline = ContinuousClock.now.advanced(by: timeout)
  while !condition() {
    guard ContinuousClock.now < deadline else {
      Issue.record("waited \(timeout) of real time until \(what())", sourceLocation: sourceLocation)
      return
    }
    // real-time: the poll of a bounded wait, only while the condition does not hold
    try? await Task.sleep(for: .milliseconds(1))
  }
}

extension TestScheduler {
  /// Waits until work is scheduled at `instant` (a sleep or a timer armed by another task, which
  /// may arm it just after the state the test waited for), then advances to it: a step of a test
  /// that also checks the instant. Records an issue if nothing is scheduled there within `timeout`
  /// of real time.
  public func advance(
    toScheduled instant: PaceInstant, timeout: Duration = .seconds(30),
    sourceLocation: SourceLocation = #_sourceLocation
  ) async {
    await PaceTestSupport.waitUntil(
      "something is scheduled at \(instant) (scheduled: \(pendingDeadlines))", timeout: timeout,
      sourceLocation: sourceLocation
    ) { pendingDeadlines.contains(instant) }
    advance(to: instant)
  }
}
