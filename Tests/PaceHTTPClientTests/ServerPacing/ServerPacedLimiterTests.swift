import Pace
import PaceTestSupport
import PaceTesting
import Testing

@testable import PaceHTTPClient

/// `ServerPacedLimiter` on virtual time: requests held until the server's quota allows them, in
/// order, cancellable, never beyond the maximum wait.
@Suite(.timeLimit(.minutes(1))) struct ServerPacedLimiterTests {
  let scheduler = TestScheduler()

  /// Starts a request for `key` and returns once it waits in the limiter (or was granted).
  func waiting(
    _ limiter: ServerPacedLimiter<String>, _ key: String = "k", suspended: Int
  ) async -> Task<Void, any Error> {
    let task = Task { try await limiter.acquire(key) }
    await scheduler.waitForSuspendedCallers(suspended)
    return task
  }

  /// `tryAcquire` takes the key's turn only when it would be granted at once, and changes nothing
  /// otherwise: the probe of a key never answered goes, a second request does not while it is
  /// out; with quota left after the answer one goes, and none once it is spent or another waits.
  @Test func tryAcquireTakesOnlyATurnGrantedAtOnce() async throws {
    let limiter = ServerPacedLimiter<String>(localModel: .fixedWindow, clock: scheduler)
    #expect(limiter.tryAcquire("k"))  // the probe
    #expect(!limiter.tryAcquire("k"))
    #expect(limiter.knowledge(for: "k").waiting == 0)
    limiter.record(ServerQuota(quota: 2, window: .seconds(10), remaining: 1, resetsIn: .seconds(5)), for: "k")
    #expect(limiter.tryAcquire("k"))
    #expect(!limiter.tryAcquire("k"))  // spent until 5 s
    let waiting = await waiting(limiter, suspended: 1)
    scheduler.advance(to: ms(5_000))
    try await waiting.value
    #expect(limiter.knowledge(for: "k").waiting == 0)
  }

  /// "q=2;w=10, r=0;t=5" under a fixed-window model: two requests at 5 s, in the order they came;
  /// the third once a response says when: at 15 s.
  @Test func requestsStartWhenTheServersWindowAllowsThem() async throws {
    let limiter = ServerPacedLimiter<String>(localModel: .fixedWindow, clock: scheduler)
    try await limiter.acquire("k")  // the probe
    limiter.record(ServerQuota(quota: 2, window: .seconds(10), remaining: 0, resetsIn: .seconds(5)), for: "k")
    let first = await waiting(limiter, suspended: 1)
    let second = await waiting(limiter, suspended: 2)
    let third = await waiting(limiter, suspended: 3)
    scheduler.advance(to: ms(4_999))
    #expect(limiter.waitingCount(for: "k") == 3)
    scheduler.advance(to: ms(5_000))
    try await first.value
    try await second.value
    #expect(limiter.waitingCount(for: "k") == 1)
    #expect(limiter.inFlightCount(for: "k") == 2)
    limiter.record(ServerQuota(quota: 2, window: .seconds(10), remaining: 0, resetsIn: .seconds(10)), for: "k")
    scheduler.advance(to: ms(14_999))
    #expect(limiter.waitingCount(for: "k") == 1)
    scheduler.advance(to: ms(15_000))
    try await third.value
    #expect(limiter.inFlightCount(for: "k") == 2)
  }

  /// A count without `for:` is the total over every key; with `for:`, the key's own.
  @Test func theCountsWithoutAKeyAreTotals() async throws {
    let limiter = ServerPacedLimiter<String>(localModel: .fixedWindow, clock: scheduler)
    for key in ["a", "b"] {
      try await limiter.acquire(key)  // each key's probe
      limiter.record(ServerQuota(quota: 1, window: .seconds(10), remaining: 0, resetsIn: .seconds(5)), for: key)
    }
    let a = await waiting(limiter, "a", suspended: 1)
    let b = await waiting(limiter, "b", suspended: 2)
    #expect(limiter.waitingCount == 2 && limiter.waitingCount(for: "a") == 1)
    #expect(limiter.inFlightCount == 0)
    scheduler.advance(to: ms(5_000))
    try await a.value
    try await b.value
    #expect(limiter.waitingCount == 0)
    #expect(limiter.inFlightCount == 2 && limiter.inFlightCount(for: "b") == 1)
  }

  /// Keys are paced apart: a blocked key holds none of the others.
  @Test func keysArePacedApart() async throws {
    let limiter = ServerPacedLimiter<String>(clock: scheduler)
    try await limiter.acquire("a")
    limiter.record(ServerQuota(retryAfter: .seconds(30)), for: "a")
    let blocked = await waiting(limiter, "a", suspended: 1)
    try await limiter.acquire("b")
    limiter.record(ServerQuota(), for: "b")
    try await limiter.acquire("b")
    #expect(limiter.inFlightCount(for: "b") == 1)
    scheduler.advance(to: ms(30_000))
    try await blocked.value
  }

  /// A cancelled request throws `CancellationError` at once and takes nothing; the next one
  /// keeps its place.
  @Test func aCancelledRequestThrowsAtOnceAndTakesNothing() async throws {
    let limiter = ServerPacedLimiter<String>(clock: scheduler)
    try await limiter.acquire("k")
    limiter.record(ServerQuota(retryAfter: .seconds(5)), for: "k")
    let leaving = await waiting(limiter, suspended: 1)
    let staying = await waiting(limiter, suspended: 2)
    leaving.cancel()
    await #expect(throws: CancellationError.self) { try await leaving.value }
    #expect(limiter.waitingCount(for: "k") == 1)
    scheduler.advance(to: ms(5_000))
    try await staying.value
    #expect(limiter.inFlightCount(for: "k") == 1)
    // Cancelled before it asks: nothing waits, nothing is counted.
    let early = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      try await limiter.acquire("k")
    }
    await #expect(throws: CancellationError.self) { try await early.value }
    #expect(limiter.inFlightCount(for: "k") == 1)
  }

  /// A server demand longer than the maximum wait throws at once, saying how long it would be.
  @Test func aLongerDemandThrowsAtOnce() async throws {
    let limiter = ServerPacedLimiter<String>(maximumWait: .seconds(60), clock: scheduler)
    try await limiter.acquire("k")
    limiter.record(ServerQuota(retryAfter: .seconds(120)), for: "k")
    await #expect(throws: ServerPacingError.waitBeyondMaximum(required: .seconds(120), maximumWait: .seconds(60))) {
      try await limiter.acquire("k")
    }
    scheduler.advance(to: ms(60_000))
    let inTime = await waiting(limiter, suspended: 1)
    scheduler.advance(to: ms(120_000))
    try await inTime.value
  }

  /// A request waiting for a probe's response that never comes throws after the maximum wait.
  @Test func aRequestWaitingForAResponseThrowsAfterTheMaximumWait() async throws {
    let limiter = ServerPacedLimiter<String>(maximumWait: .seconds(10), clock: scheduler)
    try await limiter.acquire("k")
    let second = await waiting(limiter, suspended: 1)
    scheduler.advance(to: ms(9_999))
    #expect(limiter.waitingCount(for: "k") == 1)
    scheduler.advance(to: ms(10_000))
    await #expect(throws: ServerPacingError.waitBeyondMaximum(required: nil, maximumWait: .seconds(10))) {
      try await second.value
    }
    #expect(scheduler.pendingDeadlines.isEmpty)
  }

  @Test func theErrorSaysWhatHappened() {
    #expect(
      ServerPacingError.waitBeyondMaximum(required: .seconds(120), maximumWait: .seconds(60)).description
        == "The server's rate limit would hold the request 120 s, beyond the maximum wait of 60 s")
    #expect(
      ServerPacingError.waitBeyondMaximum(required: nil, maximumWait: .seconds(60)).description
        == "The request waited the maximum of 60 s for a response that would tell the server's rate limit")
  }
}
