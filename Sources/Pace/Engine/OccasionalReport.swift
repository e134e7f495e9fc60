/// Counts events and says when one line about them is due: at most one per `interval`, so that a
/// flood of the same fault (hostile requests, decisions during an outage) makes one log line per
/// interval with how many it stands for, not one line each.
///
/// For the server modules' logging; no clock but the continuous one, since log lines are real time.
package final class OccasionalReport: Sendable {
  private struct State {
    var lastReport: ContinuousClock.Instant?
    var unreported = 0
  }

  private let interval: Duration
  private let state = LockedState(State())

  package init(every interval: Duration) {
    self.interval = interval
  }

  /// Counts one event at `now`; returns how many events the line now due stands for (this one
  /// included), or nil if a line was reported less than `interval` ago.
  package func record(now: ContinuousClock.Instant = .now) -> Int? {
    state.withLock { state in
      state.unreported += 1
      if let last = state.lastReport, last.duration(to: now) < interval { return nil }
      state.lastReport = now
      defer { state.unreported = 0 }
      return state.unreported
    }
  }
}
