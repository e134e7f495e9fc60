import Pace
import PaceTestSupport
import PaceTesting
import Testing

@testable import PaceHTTPClient

/// Two rules of draft-ietf-httpapi-ratelimit-headers-11 on the client: a response served from a
/// cache teaches the pacing nothing (section 7.3), and a `Retry-After` sooner than the end of an
/// exhausted quota's effective window does not let a request go before that end (sections 6 and 7).
@Suite(.timeLimit(.minutes(1))) struct CachedAnswersAndRetryAfterTests {
  let scheduler = TestScheduler()
  let key = "https://api.example.com"

  func requests(maximumWait: Duration) -> PacedRequests {
    let scheduler = scheduler
    return PacedRequests(
      retry: RetryStrategy(
        maximumAttempts: 3, baseDelay: .milliseconds(100), maximumDelay: .seconds(1),
        maximumRetryAfter: .seconds(60), random: { $0.upperBound }),
      budget: nil, maximumWait: maximumWait, clock: scheduler,
      unixTime: { .seconds(1_700_000_000) + scheduler.now.offset })
  }

  func send(_ requests: PacedRequests, _ server: ScriptedServer) async throws -> (Int, ResponseHead) {
    try await requests.send(key: key, idempotent: true) { try server.attempt() }
  }

  /// A cached answer (`Age` above 0) saying the quota is spent does not hold the next request; an
  /// answer from the server (`Age: 0`, or none) does.
  @Test func aCachedAnswerDoesNotHoldTheNextRequest() async throws {
    let spent: [(String, String)] = [("RateLimit", #""default";r=0;t=30"#)]
    // A request that would wait beyond 10 s throws at once, with the wait it would need.
    let cached = requests(maximumWait: .seconds(10))
    let cache = ScriptedServer(
      [.success(responseHead(status: 200, [("Age", "120")] + spent)), status(200)], clock: scheduler)
    #expect(try await send(cached, cache).1.status == 200)
    #expect(try await send(cached, cache).1.status == 200)
    #expect(cache.attempts.times == [ms(0), ms(0)])
    #expect(cached.limiter.inFlightCount(for: key) == 0)

    let origin = requests(maximumWait: .seconds(10))
    let server = ScriptedServer(
      [.success(responseHead(status: 200, [("Age", "0")] + spent)), status(200)], clock: scheduler)
    #expect(try await send(origin, server).1.status == 200)
    await #expect(throws: ServerPacingError.waitBeyondMaximum(required: .seconds(30), maximumWait: .seconds(10))) {
      try await send(origin, server)
    }
  }

  /// `Age` as RFC 9111 section 5.1 reads it: the first member of a list, a non-negative integer;
  /// anything else is ignored.
  @Test func theAgeField() {
    func isFromCache(_ values: String...) -> Bool {
      ResponseHead(status: 200, headerFields: values.map { (name: "age", value: $0) }).isFromCache
    }
    #expect(isFromCache("1") && isFromCache("120") && isFromCache(" 5 ") && isFromCache("99999999999999999999"))
    #expect(isFromCache("7, 0") && isFromCache("7", "0"))
    #expect(!isFromCache() && !isFromCache("0") && !isFromCache("0, 7") && !isFromCache("00"))
    #expect(!isFromCache("-1") && !isFromCache("1.5") && !isFromCache("abc") && !isFromCache(""))
  }

  /// A `Retry-After` of 5 s on a quota spent for 30 s: the next request goes at 30 s.
  @Test func aShortRetryAfterDoesNotEndASpentWindowEarly() {
    var machine = ServerPacingMachine(localModel: .slidingWindow, maximumWait: .seconds(60))
    #expect(machine.enqueue(id: 1, now: ms(0)) == .init(granted: [1]))
    let refusal = ServerQuota(remaining: 0, resetsIn: .seconds(30), retryAfter: .seconds(5))
    #expect(machine.record(refusal, now: ms(0)) == .init())
    #expect(machine.enqueue(id: 2, now: ms(1000)) == .init(wakeAt: ms(30_000)))
    #expect(machine.timerFired(now: ms(30_000)) == .init(granted: [2]))
  }

  /// Appendix B.3: `Retry-After` takes precedence over a quota not spent, which paces what follows.
  @Test func aRetryAfterOnAQuotaNotSpentHoldsOnlyUntilItEnds() {
    var machine = ServerPacingMachine(localModel: .slidingWindow, maximumWait: .seconds(60))
    #expect(machine.enqueue(id: 1, now: ms(0)) == .init(granted: [1]))
    let pushBack = ServerQuota(remaining: 1, resetsIn: .seconds(40), retryAfter: .seconds(20))
    #expect(machine.record(pushBack, now: ms(0)) == .init())
    #expect(machine.enqueue(id: 2, now: ms(0)) == .init(wakeAt: ms(20_000)))
    #expect(machine.enqueue(id: 3, now: ms(0)) == .init(wakeAt: ms(20_000)))
    #expect(machine.timerFired(now: ms(20_000)) == .init(granted: [2], wakeAt: ms(40_000)))
  }

  /// End to end: a 429 whose `Retry-After` (5 s) is sooner than its spent quota's reset (30 s) is
  /// retried at 30 s.
  @Test func a429IsRetriedAtTheEndOfItsSpentWindow() async throws {
    let requests = requests(maximumWait: .seconds(60))
    let server = ScriptedServer(
      [status(429, ("Retry-After", "5"), ("RateLimit", #""default";r=0;t=30"#)), status(200)], clock: scheduler)
    let task = Task { try await send(requests, server) }
    await scheduler.waitForSleepers(1)
    scheduler.advance(to: ms(5000))
    await scheduler.waitForSuspendedCallers(1)
    scheduler.advance(to: ms(30_000))
    #expect(try await task.value.1.status == 200)
    #expect(server.attempts.times == [ms(0), ms(30_000)])
  }
}

func responseHead(status: Int, _ fields: [(String, String)]) -> ResponseHead {
  ResponseHead(status: status, headerFields: fields.map { (name: $0.0, value: $0.1) })
}
