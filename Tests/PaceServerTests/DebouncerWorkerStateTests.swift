#if PostgreSQL && Hummingbird
@testable import PacePostgres
import Testing

/// The debouncer's pure parts, driven directly: no database, no clock.
@Suite("PostgresDebouncer's retry policy and worker state")
struct DebouncerWorkerStateTests {
  let start = ContinuousClock().now

  @Test func backoffDoublesFromItsBaseUpToItsCap() {
    let backoff = Backoff(base: .milliseconds(100), cap: .seconds(1))
    #expect(backoff.delay(afterFailures: 0) == .zero)
    #expect((1...6).map(backoff.delay(afterFailures:)) == [100, 200, 400, 800, 1000, 1000].map(Duration.milliseconds))
    #expect(backoff.delay(afterFailures: .max) == .seconds(1))
  }

  @Test func aZeroBaseNeverWaits() {
    #expect(Backoff(base: .zero, cap: .seconds(1)).delay(afterFailures: 9) == .zero)
  }

  @Test func failedAttemptsAreRetriedWithBackoffThenDeadLettered() {
    let policy = DebouncerRetryPolicy(maximumAttempts: 4, backoff: Backoff(base: .milliseconds(400), cap: .seconds(1)))
    #expect(policy.afterFailure(attempt: 1) == .retry(after: .milliseconds(400)))
    #expect(policy.afterFailure(attempt: 2) == .retry(after: .milliseconds(800)))
    #expect(policy.afterFailure(attempt: 3) == .retry(after: .seconds(1)))
    #expect(policy.afterFailure(attempt: 4) == .deadLetter)
    // Claims lost with a stopped instance count as attempts, so the count can pass the maximum.
    #expect(policy.afterFailure(attempt: 6) == .deadLetter)
  }

  @Test func oneAttemptMeansNoRetry() {
    let policy = DebouncerRetryPolicy(maximumAttempts: 1, backoff: Backoff(base: .seconds(1), cap: .seconds(1)))
    #expect(policy.afterFailure(attempt: 1) == .deadLetter)
  }

  func machine(slots: Int = 4) -> DebouncerWorkerState {
    DebouncerWorkerState(
      maximumConcurrentExecutions: slots, pollInterval: .milliseconds(100),
      refusalBackoff: Backoff(base: .milliseconds(100), cap: .seconds(1)))
  }

  @Test func claimsOnlyIntoFreeSlotsAndRefillsThemAsExecutionsFinish() {
    var machine = machine()
    #expect(machine.next() == .claim(limit: 4))
    let full = machine.claimed(4, limit: 4, now: start)
    #expect(full == .init(next: .sleep(.milliseconds(100))))
    #expect(machine.next() == .sleep(.milliseconds(100)))
    machine.executionFinished()
    #expect(machine.next() == .claim(limit: 1))
    let refilled = machine.claimed(1, limit: 1, now: start)
    #expect(refilled == .init(next: .sleep(.milliseconds(100))))
    machine.executionFinished()
    machine.executionFinished()
    #expect(machine.executing == 2)
    #expect(machine.next() == .claim(limit: 2))
  }

  @Test func fewerKeysThanAskedForMeansWaitingAPollInterval() {
    var machine = machine()
    let step = machine.claimed(1, limit: 4, now: start)
    #expect(step == .init(next: .sleep(.milliseconds(100))))
    #expect(machine.next() == .claim(limit: 3))
  }

  @Test func anOutageIsLoggedOnceWhenItStartsAndOnceWhenItEnds() {
    var machine = machine()
    let polling = DebouncerWorkerState.Step(next: .sleep(.milliseconds(100)))
    let started = machine.claimFailed(.unavailable, now: start)
    #expect(started == .init(logs: [.outageStarted], next: .sleep(.milliseconds(100))))
    let during = machine.claimFailed(.unavailable, now: start + .seconds(1))
    #expect(during == polling)
    let stillDuring = machine.claimFailed(.unavailable, now: start + .seconds(2))
    #expect(stillDuring == polling)
    let ended = machine.claimed(0, limit: 4, now: start + .seconds(3))
    #expect(ended == .init(logs: [.outageEnded(after: .seconds(3))], next: .sleep(.milliseconds(100))))
    let afterwards = machine.claimed(0, limit: 4, now: start + .seconds(4))
    #expect(afterwards == polling)
  }

  @Test func refusedClaimsAreLoggedEachTimeAndBackOff() {
    var machine = machine()
    func refused(_ refusals: Int, after wait: Duration) -> DebouncerWorkerState.Step {
      .init(logs: [.claimRefused(refusals: refusals, retryAfter: wait)], next: .sleep(wait))
    }
    let first = machine.claimFailed(.refused, now: start)
    #expect(first == refused(1, after: .milliseconds(100)))
    let second = machine.claimFailed(.refused, now: start)
    #expect(second == refused(2, after: .milliseconds(200)))
    _ = machine.claimed(0, limit: 4, now: start)
    let afterAnAnswer = machine.claimFailed(.refused, now: start)
    #expect(afterAnAnswer == refused(1, after: .milliseconds(100)))
  }

  /// Missing tables within the startup grace: one `info` line, polls at the poll interval; past
  /// the grace, a refusal like any other, logged each time with its backoff.
  @Test func missingTablesAreAwaitedQuietlyDuringTheStartupGraceOnly() {
    var machine = DebouncerWorkerState(
      maximumConcurrentExecutions: 4, pollInterval: .milliseconds(100),
      refusalBackoff: Backoff(base: .milliseconds(100), cap: .seconds(30)), startupGrace: .seconds(30))
    let first = machine.claimFailed(.tablesMissing, now: start)
    #expect(first == .init(logs: [.waitingForTables], next: .sleep(.milliseconds(100))))
    let again = machine.claimFailed(.tablesMissing, now: start + .seconds(29))
    #expect(again == .init(logs: [], next: .sleep(.milliseconds(100))))
    let late = machine.claimFailed(.tablesMissing, now: start + .seconds(30))
    #expect(
      late
        == .init(logs: [.claimRefused(refusals: 1, retryAfter: .milliseconds(100))], next: .sleep(.milliseconds(100))))
    _ = machine.shutDown()
    #expect(machine.claimFailed(.tablesMissing, now: start + .seconds(1)).next == .stop)
  }

  @Test func aRefusalEndsAnOutage() {
    var machine = machine()
    _ = machine.claimFailed(.unavailable, now: start)
    let logs = machine.claimFailed(.refused, now: start + .seconds(2)).logs
    #expect(
      logs == [.outageEnded(after: .seconds(2)), .claimRefused(refusals: 1, retryAfter: .milliseconds(100))])
  }

  @Test func aShutdownStopsClaimingAndStartingHandlers() {
    var machine = machine()
    _ = machine.claimed(2, limit: 4, now: start)
    #expect(machine.mayStartHandler)
    let stopped = machine.shutDown()
    let stoppedAgain = machine.shutDown()
    #expect(stopped)
    #expect(!stoppedAgain)
    #expect(machine.next() == .stop)
    #expect(!machine.mayStartHandler)
    // A claim that was in flight when the shutdown came: its keys are counted, nothing more is claimed.
    let inFlight = machine.claimed(2, limit: 2, now: start)
    #expect(inFlight == .init(next: .stop))
    let next = machine.claimFailed(.unavailable, now: start).next
    #expect(next == .stop)
    #expect(machine.executing == 4)
  }
}
#endif
