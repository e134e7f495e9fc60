import Pace
import PaceHTTPClient
import PaceTestSupport
import PaceTesting
import Testing

/// A server limited by Pace's own `KeyedRateLimiter`, answering as Pace's middleware does:
/// `RateLimit-Policy`, `RateLimit` and, when limited, a 429 with `Retry-After`.
final class SimulatedServer: Sendable {
  struct Counts {
    var allowed = 0
    var limited = 0
    /// 429s answered after a response told the policy.
    var limitedAfterPolicy = 0
    var toldPolicy = false
  }

  let limit: RateLimit
  let limiter: KeyedRateLimiter<String>
  let counts = LockedState(Counts())

  init(limit: RateLimit, clock: TestScheduler) {
    self.limit = limit
    limiter = KeyedRateLimiter(limit: limit, clock: clock)
  }

  /// Seconds rounded up, as the middleware sends them.
  static func wholeSeconds(_ duration: Duration) -> Int64 {
    let nanoseconds = duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
    guard nanoseconds > 0 else { return 0 }
    return (nanoseconds + 999_999_999) / 1_000_000_000
  }

  func handle() -> (Int, ResponseHead) {
    let decision = limiter.tryAcquire("client")
    let policy = #""api";q=\#(limit.permits);w=\#(Self.wholeSeconds(limit.interval))"#
    var fields = [(name: "RateLimit-Policy", value: policy)]
    let status: Int
    switch decision {
    case .allowed(let remaining):
      let untilWhole: Duration
      switch limit.algorithm {
      case .tokenBucket: untilWhole = limit.interval / limit.permits * (limit.burst - remaining)
      case .slidingWindow: untilWhole = remaining >= limit.permits ? .zero : limit.interval
      case .fixedWindow:
        untilWhole =
          remaining >= limit.permits
          ? .zero : min(limiter.timeUntilWindowEnds(for: "client") ?? limit.interval, limit.interval)
      }
      fields.append((name: "RateLimit", value: #""api";r=\#(remaining);t=\#(Self.wholeSeconds(untilWhole))"#))
      status = 200
    case .limited(let retryAfter):
      fields.append((name: "RateLimit", value: #""api";r=0;t=\#(Self.wholeSeconds(retryAfter))"#))
      fields.append((name: "Retry-After", value: "\(Self.wholeSeconds(retryAfter))"))
      status = 429
    }
    counts.withLock { counts in
      if status == 200 { counts.allowed += 1 } else { counts.limited += 1 }
      if status == 429, counts.toldPolicy { counts.limitedAfterPolicy += 1 }
      counts.toldPolicy = true
    }
    return (status, ResponseHead(status: status, headerFields: fields))
  }
}

/// On seeded random timelines, 16 callers through `PacedRequests` against a server limited by
/// Pace's own limiter: no 429 after the first response that told the policy, and at least 95 % of
/// the allowed rate.
@Suite(.timeLimit(.minutes(3))) struct PacedRequestsPropertyTests {
  struct Case: Sendable, CustomTestStringConvertible {
    let server: RateLimit.Algorithm
    let client: RateLimit.Algorithm
    /// Whether each request and each response takes a random time on the wire.
    let latency: Bool
    var testDescription: String { "\(server) server, \(client) client\(latency ? ", latency" : "")" }
  }

  static let cases = [false, true].flatMap { latency in
    [
      Case(server: .fixedWindow, client: .slidingWindow, latency: latency),
      Case(server: .slidingWindow, client: .slidingWindow, latency: latency),
      Case(server: .tokenBucket, client: .slidingWindow, latency: latency),
      Case(server: .fixedWindow, client: .fixedWindow, latency: latency),
    ]
  }

  @Test(arguments: cases)
  func sixteenCallersStayUnderTheLimitAndReachItsRate(_ testCase: Case) async throws {
    var random = SeededGenerator(seed: 34)
    for _ in 0..<fuzzRuns(4) {
      let permits = Int.random(in: 1...20, using: &random)
      let window = Duration.seconds(Int64.random(in: 1...10, using: &random))
      let start = PaceInstant(.milliseconds(Int64.random(in: 0...20_000, using: &random)))
      let limit: RateLimit =
        switch testCase.server {
        case .tokenBucket: RateLimit(permits: permits, per: window)
        case .slidingWindow: .slidingWindow(permits: permits, per: window)
        case .fixedWindow: .fixedWindow(permits: permits, per: window)
        }
      // Up to 1 % of the window each way: a sliding model gives up about twice that to the margin.
      let latency = testCase.latency ? window / 100 : .zero
      let (allowed, limitedAfterPolicy) = try await run(
        limit: limit, client: testCase.client, start: start, windows: 30, latency: latency, seed: random.next())
      let rate = Double(allowed) / Double(permits * 30)
      let timeline = "\(limit), from \(start), latency up to \(latency)"
      #expect(limitedAfterPolicy == 0, "\(timeline): \(limitedAfterPolicy) 429s after the policy was told")
      #expect(rate >= 0.95, "\(timeline): \(allowed) allowed, \(Int(rate * 100)) % of the rate")
    }
  }

  /// 16 callers sending as fast as the client lets them, for `windows` windows of virtual time;
  /// each request and each response takes up to `latency` on the wire. The allowed requests
  /// counted are those the server decided before the end.
  func run(
    limit: RateLimit, client: RateLimit.Algorithm, start: PaceInstant, windows: Int64, latency: Duration, seed: UInt64
  ) async throws -> (Int, Int) {
    let scheduler = TestScheduler()
    scheduler.advance(to: start)
    let server = SimulatedServer(limit: limit, clock: scheduler)
    let requests = PacedRequests(
      retry: .never, budget: nil, maximumWait: .seconds(3600), localModel: client, clock: scheduler,
      unixTime: { scheduler.now.offset })
    let random = LockedState(SeededGenerator(seed: seed))
    let wire: @Sendable () -> Duration = {
      latency == .zero
        ? .zero
        : .nanoseconds(
          random.withLock {
            Int64.random(
              in: 0...latency.components.seconds * 1_000_000_000 + latency.components.attoseconds / 1_000_000_000,
              using: &$0)
          })
    }
    let callers = (0..<16).map { _ in
      Task {
        while !Task.isCancelled {
          _ = try await requests.send(key: "api", idempotent: true) {
            try await scheduler.sleep(for: wire())
            let response = server.handle()
            try await scheduler.sleep(for: wire())
            return response
          }
        }
      }
    }
    let end = start.advanced(by: limit.interval * windows)
    while true {
      // Every caller waits: for the limiter, or on the wire.
      await waitUntil("16 callers wait") { scheduler.suspendedCallerCount + scheduler.sleeperCount >= 16 }
      guard let next = scheduler.pendingDeadlines.min(), next < end else { break }
      scheduler.advance(to: next)
    }
    let counts = server.counts.withLock { $0 }
    for caller in callers { caller.cancel() }
    for caller in callers { _ = await caller.result }
    return (counts.allowed, counts.limitedAfterPolicy)
  }
}
