import Pace
import PaceTestSupport
import PaceTesting
import Testing

@testable import PaceHTTPClient

/// `CredentialRefreshMachine`, driven directly.
@Suite struct CredentialRefreshMachineTests {
  typealias Machine = CredentialRefreshMachine<String>

  @Test func theFirstCallerStartsTheRefreshAndTheOthersWait() {
    var m = Machine(maximumRefreshesInARow: 3)
    #expect(m.current(id: 1) == .start(from: nil))
    #expect(m.current(id: 2) == .wait)
    #expect(m.refreshEnded(with: "a") == [1, 2])
    #expect(m.current(id: 3) == .use("a"))
  }

  @Test func aRefusalOfAnOlderCredentialGetsTheCurrentOneWithoutARefresh() {
    var m = Machine(maximumRefreshesInARow: 3, current: "a")
    #expect(m.refresh(after: "a", id: 1) == .start(from: "a"))
    #expect(m.refresh(after: "a", id: 2) == .wait)
    #expect(m.refreshEnded(with: "b") == [1, 2])
    #expect(m.refresh(after: "a", id: 3) == .use("b"))
    #expect(m.refreshesInARow == 1)
  }

  @Test func aLoopFailsAfterTheSetNumberOfRefreshesUnlessOneIsAccepted() {
    var m = Machine(maximumRefreshesInARow: 2, current: "a")
    #expect(m.refresh(after: "a", id: 1) == .start(from: "a"))
    _ = m.refreshEnded(with: "b")
    #expect(m.refresh(after: "b", id: 2) == .start(from: "b"))
    _ = m.refreshEnded(with: "c")
    #expect(m.refresh(after: "c", id: 3) == .fail(.refreshLoop(attempts: 2)))
    m.accepted("b")  // an older credential says nothing of the current one
    #expect(m.refresh(after: "c", id: 4) == .fail(.refreshLoop(attempts: 2)))
    m.accepted("c")
    #expect(m.refresh(after: "c", id: 5) == .start(from: "c"))
  }

  @Test func aFailedRefreshDoesNotCountInTheRow() {
    var m = Machine(maximumRefreshesInARow: 1, current: "a")
    #expect(m.refresh(after: "a", id: 1) == .start(from: "a"))
    #expect(m.refreshEnded(with: nil) == [1])
    #expect(m.current == "a")
    #expect(m.refresh(after: "a", id: 2) == .start(from: "a"))
  }

  @Test func aCancelledWaiterIsTakenOutOnce() {
    var m = Machine(maximumRefreshesInARow: 3)
    _ = m.current(id: 1)
    _ = m.current(id: 2)
    #expect(m.cancel(id: 2) == true)
    #expect(m.cancel(id: 2) == false)
    #expect(m.refreshEnded(with: "a") == [1])
  }
}

/// A refresh that the test controls: counts its calls and takes `duration` of virtual time.
final class FakeTokenServer: Sendable {
  let refreshes = Counter()
  let scheduler: TestScheduler
  let duration: Duration
  let fails: Bool

  init(scheduler: TestScheduler, duration: Duration = .seconds(1), fails: Bool = false) {
    self.scheduler = scheduler
    self.duration = duration
    self.fails = fails
  }

  struct Unavailable: Error, Equatable {}

  /// `token-N` for the N-th refresh.
  func refresh(_ previous: String?) async throws -> String {
    refreshes.increment()
    let number = refreshes.count
    try await scheduler.sleep(for: duration)
    if fails { throw Unavailable() }
    return "token-\(number)"
  }
}

/// `CredentialRefresher` and `PacedRequests.send(key:idempotent:credentials:…)` on virtual time.
@Suite(.timeLimit(.minutes(1))) struct CredentialRefresherTests {
  let scheduler = TestScheduler()

  func requests() -> PacedRequests {
    let scheduler = scheduler
    return PacedRequests(budget: nil, clock: scheduler, unixTime: { .seconds(1_700_000_000) + scheduler.now.offset })
  }

  /// Waits (real time, bounded) until `count` callers wait for the refresh.
  func waitForWaiters(_ count: Int, on refresher: CredentialRefresher<String>) async {
    let deadline = ContinuousClock.now.advanced(by: .seconds(30))
    while refresher.waitingCount < count, ContinuousClock.now < deadline {
      // real-time: a bounded poll for tasks registering their wait
      try? await Task.sleep(for: .milliseconds(1))
    }
    #expect(refresher.waitingCount == count)
  }

  /// Accepts only `valid`'s token; records each attempt's credential and instant.
  final class AuthServer: Sendable {
    let valid: LockedBox<String>
    let attempts: LockedRecorder<String>

    init(valid: String, scheduler: TestScheduler) {
      self.valid = LockedBox(valid)
      attempts = LockedRecorder(scheduler: scheduler)
    }

    func attempt(_ token: String) -> (String, ResponseHead) {
      attempts.record(token)
      let ok = valid.withLock { $0 } == token
      return (token, ResponseHead(status: ok ? 200 : 401, headerFields: []))
    }
  }

  @Test func fiftyConcurrent401sShareOneRefreshAndAreReplayedWithTheNewCredential() async throws {
    let tokens = FakeTokenServer(scheduler: scheduler)
    let credentials = CredentialRefresher<String>(initial: "token-0") { try await tokens.refresh($0) }
    let server = AuthServer(valid: "token-1", scheduler: scheduler)
    let requests = requests()
    try await withThrowingTaskGroup(of: (String, ResponseHead).self) { group in
      for _ in 0..<50 {
        group.addTask {
          try await requests.send(key: "https://api.example.com", idempotent: false, credentials: credentials) {
            server.attempt($0)
          }
        }
      }
      await waitForWaiters(50, on: credentials)
      await scheduler.waitForSleepers(1)  // the refresh, in a task of its own
      #expect(tokens.refreshes.count == 1)
      #expect(server.attempts.count == 50)
      scheduler.advance(by: .seconds(1))
      for try await (body, head) in group {
        #expect(head.status == 200)
        #expect(body == "token-1")
      }
    }
    #expect(tokens.refreshes.count == 1)
    let attempts = server.attempts.entries
    #expect(attempts.count == 100)
    #expect(attempts.filter { $0.value == "token-0" }.allSatisfy { $0.time == ms(0) })
    #expect(attempts.filter { $0.value == "token-1" }.map(\.time) == Array(repeating: ms(1000), count: 50))
  }

  @Test func theFirstCredentialIsFetchedOnceForEveryCaller() async throws {
    let tokens = FakeTokenServer(scheduler: scheduler)
    let credentials = CredentialRefresher<String> { try await tokens.refresh($0) }
    async let first = credentials.current()
    async let second = credentials.current()
    await waitForWaiters(2, on: credentials)
    await scheduler.waitForSleepers(1)
    scheduler.advance(by: .seconds(1))
    #expect(try await [first, second] == ["token-1", "token-1"])
    #expect(try await credentials.current() == "token-1")
    #expect(tokens.refreshes.count == 1)
  }

  @Test func aRefreshLoopStopsAfterTheSetNumberOfRefreshes() async throws {
    let tokens = FakeTokenServer(scheduler: scheduler, duration: .milliseconds(100))
    let credentials = CredentialRefresher<String>(initial: "token-0", maximumRefreshesInARow: 3) {
      try await tokens.refresh($0)
    }
    let server = AuthServer(valid: "none", scheduler: scheduler)
    let requests = requests()
    let send = Task {
      try await requests.send(key: "https://api.example.com", idempotent: true, credentials: credentials) {
        server.attempt($0)
      }
    }
    for _ in 0..<3 {
      await scheduler.waitForSleepers(1)
      scheduler.advance(by: .milliseconds(100))
    }
    await #expect(throws: AuthenticationError.refreshLoop(attempts: 3)) { try await send.value }
    #expect(tokens.refreshes.count == 3)
    #expect(server.attempts.values == ["token-0", "token-1", "token-2", "token-3"])
    #expect(server.attempts.times == [ms(0), ms(100), ms(200), ms(300)])
  }

  /// The deadline bounds the whole: refused at 0 and at 100 ms, each refresh taking 100 ms, a
  /// deadline of 150 ms ends the wait for the second refresh at 150 ms, exactly; the refresh goes
  /// on for whoever else waits for it.
  @Test func theDeadlineBoundsEverySendAndTheWaitForARefresh() async throws {
    let tokens = FakeTokenServer(scheduler: scheduler, duration: .milliseconds(100))
    let credentials = CredentialRefresher<String>(initial: "token-0", maximumRefreshesInARow: 5) {
      try await tokens.refresh($0)
    }
    let server = AuthServer(valid: "none", scheduler: scheduler)
    let requests = requests()
    let ended = LockedRecorder<String>(scheduler: scheduler)
    let send = Task {
      do {
        _ = try await requests.send(
          key: "https://api.example.com", idempotent: true, credentials: credentials, deadline: .milliseconds(150)
        ) {
          server.attempt($0)
        }
      } catch {
        ended.record("\(error)")
        throw error
      }
    }
    await scheduler.waitForSleepers(1)
    scheduler.advance(by: .milliseconds(100))
    await scheduler.waitForSleepers(1)
    #expect(server.attempts.times == [ms(0), ms(100)])
    scheduler.advance(to: ms(150))
    await #expect(throws: PacedRequestsError.deadlineExceeded(needed: nil, remaining: .zero)) {
      try await send.value
    }
    #expect(ended.times == [ms(150)])
    #expect(tokens.refreshes.count == 2)
    #expect(server.attempts.times == [ms(0), ms(100)])
  }

  @Test func anAcceptedCredentialEndsTheRow() async throws {
    let tokens = FakeTokenServer(scheduler: scheduler, duration: .zero)
    let credentials = CredentialRefresher<String>(initial: "token-0", maximumRefreshesInARow: 1) {
      try await tokens.refresh($0)
    }
    let server = AuthServer(valid: "token-1", scheduler: scheduler)
    let requests = requests()
    let key = "https://api.example.com"
    // Each expiry is refreshed once and accepted: a row of 1, however many expiries.
    for expiry in 1...3 {
      let (body, _) = try await requests.send(key: key, idempotent: true, credentials: credentials) {
        server.attempt($0)
      }
      #expect(body == "token-\(expiry)")
      server.valid.withLock { $0 = "token-\(expiry + 1)" }
    }
    #expect(tokens.refreshes.count == 3)
  }

  @Test func aRefreshThatThrowsThrowsToEveryWaiterAndTheNextRefusalTriesAgain() async throws {
    let tokens = FakeTokenServer(scheduler: scheduler, fails: true)
    let credentials = CredentialRefresher<String>(initial: "token-0") { try await tokens.refresh($0) }
    let server = AuthServer(valid: "token-1", scheduler: scheduler)
    let requests = requests()
    try await withThrowingTaskGroup(of: Bool.self) { group in
      for _ in 0..<10 {
        group.addTask {
          do {
            _ = try await requests.send(key: "k", idempotent: true, credentials: credentials) { server.attempt($0) }
            return false
          } catch {
            return error is FakeTokenServer.Unavailable
          }
        }
      }
      await waitForWaiters(10, on: credentials)
      await scheduler.waitForSleepers(1)
      scheduler.advance(by: .seconds(1))
      for try await threwTheRefreshError in group { #expect(threwTheRefreshError) }
    }
    #expect(tokens.refreshes.count == 1)
    let again = Task { try await credentials.refresh(after: "token-0") }
    await scheduler.waitForSleepers(1)
    #expect(tokens.refreshes.count == 2)
    scheduler.advance(by: .seconds(1))
    await #expect(throws: FakeTokenServer.Unavailable()) { try await again.value }
  }

  @Test func aCancelledWaiterStopsAtOnceAndTheRefreshGoesOnForTheOthers() async throws {
    let tokens = FakeTokenServer(scheduler: scheduler)
    let credentials = CredentialRefresher<String>(initial: "token-0") { try await tokens.refresh($0) }
    let cancelled = Task { try await credentials.refresh(after: "token-0") }
    let kept = Task { try await credentials.refresh(after: "token-0") }
    await waitForWaiters(2, on: credentials)
    cancelled.cancel()
    await #expect(throws: CancellationError.self) { try await cancelled.value }
    #expect(credentials.waitingCount == 1)
    await scheduler.waitForSleepers(1)
    scheduler.advance(by: .seconds(1))
    #expect(try await kept.value == "token-1")
    #expect(tokens.refreshes.count == 1)
  }

  @Test func aRefusalOfAnOlderCredentialIsAnsweredWithTheCurrentOne() async throws {
    let tokens = FakeTokenServer(scheduler: scheduler, duration: .zero)
    let credentials = CredentialRefresher<String>(initial: "token-0") { try await tokens.refresh($0) }
    #expect(try await credentials.refresh(after: "token-0") == "token-1")
    #expect(try await credentials.refresh(after: "token-0") == "token-1")
    #expect(tokens.refreshes.count == 1)
  }
}

/// A bad setting stops the process with a message that names the parameter.
@Suite struct CredentialRefresherPreconditionTests {
  @Test func zeroRefreshesInARowNameTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = CredentialRefresher<String>(maximumRefreshesInARow: 0) { _ in "token" }
    }
    let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
    #expect(message.contains("CredentialRefresher: maximumRefreshesInARow must be positive (got 0)"))
  }
}
