#if Hummingbird
import Foundation
import Hummingbird
import Pace
import PaceHTTPClient
import PaceTestSupport
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if AsyncHTTPClient
import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import PaceAsyncHTTPClient
#endif

/// An HTTP library calling through `PacedRequests`: URLSession (FoundationNetworking here), or
/// AsyncHTTPClient with its trait.
enum ClientLibrary: String, CaseIterable, CustomStringConvertible, Sendable {
  case urlSession = "URLSession"
  #if AsyncHTTPClient
  case asyncHTTPClient = "AsyncHTTPClient"
  #endif

  var description: String { rawValue }

  /// Sends `method` to `url` through `requests` and returns the final status.
  func send(
    _ method: String, _ url: String, through requests: PacedRequests, client: Clients, deadline: Duration? = nil
  ) async throws -> Int {
    switch self {
    case .urlSession:
      var request = URLRequest(url: URL(string: url)!)
      request.httpMethod = method
      let (_, response) = try await client.session.data(for: request, pacedBy: requests, deadline: deadline)
      return (response as? HTTPURLResponse)?.statusCode ?? 0
    #if AsyncHTTPClient
    case .asyncHTTPClient:
      var request = HTTPClientRequest(url: url)
      request.method = .init(rawValue: method)
      let response = try await client.httpClient.execute(
        request, timeout: .seconds(5), pacedBy: requests, deadline: deadline)
      _ = try await response.body.collect(upTo: 1 << 20)
      return Int(response.status.code)
    #endif
    }
  }
}

extension ClientLibrary {
  /// Sends `method` to `url` through `requests` and returns the final body as text, read within
  /// each attempt (AsyncHTTPClient's `collectingBodyUpTo`), so that a cut body is retried.
  func body(_ method: String, _ url: String, through requests: PacedRequests, client: Clients) async throws -> String {
    switch self {
    case .urlSession:
      var request = URLRequest(url: URL(string: url)!)
      request.httpMethod = method
      let (data, _) = try await client.session.data(for: request, pacedBy: requests)
      return String(decoding: data, as: UTF8.self)
    #if AsyncHTTPClient
    case .asyncHTTPClient:
      var request = HTTPClientRequest(url: url)
      request.method = .init(rawValue: method)
      let response = try await client.httpClient.execute(
        request, timeout: .seconds(5), pacedBy: requests, collectingBodyUpTo: 1 << 20)
      return String(buffer: try await response.body.collect(upTo: 1 << 20))
    #endif
    }
  }
}

/// The clients of one test, shut down after it.
struct Clients: Sendable {
  let session: URLSession
  #if AsyncHTTPClient
  let httpClient: HTTPClient
  #endif

  /// Runs `body` with a URLSession and an HTTPClient of its own, which fail at once when a
  /// connection is refused (AsyncHTTPClient would otherwise retry it itself until the deadline).
  static func with<Result: Sendable>(_ body: @Sendable (Clients) async throws -> Result) async throws -> Result {
    let session = URLSession(configuration: .ephemeral)
    defer { session.finishTasksAndInvalidate() }
    #if AsyncHTTPClient
    var configuration = HTTPClient.Configuration()
    configuration.connectionPool.retryConnectionEstablishment = false
    let httpClient = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    do {
      let result = try await body(Clients(session: session, httpClient: httpClient))
      try await httpClient.shutdown()
      return result
    } catch {
      try? await httpClient.shutdown()
      throw error
    }
    #else
    return try await body(Clients(session: session))
    #endif
  }
}

/// The client side, end to end on loopback: 16 callers through `PacedRequests` and a real HTTP
/// library against real servers in process, in real time. `PACE_PROOF_SECONDS` sets each run's
/// length (6 s by default; 30 for the full proof); each run prints its figures.
@Suite("Paced clients, end to end over loopback", .serialized, .timeLimit(.minutes(10)))
struct PacedClientProofTests {
  static let callers = 16
  /// Every server allows this many requests a second.
  static let quota = 20

  /// 16 callers, each sending GETs one after another until the run ends; the figures from the
  /// server's ledger.
  func run(
    _ server: String, _ library: ClientLibrary, router: (ServerLedger) -> Router<BasicRequestContext>
  ) async throws -> PacingFigures {
    let ledger = ServerLedger()
    let seconds = proofSeconds
    let figures = try await TestServer.run(router(ledger)) { port in
      try await Clients.with { clients in
        let requests = PacedRequests()
        let url = "http://127.0.0.1:\(port)/"
        let start = unixNow()
        try await withThrowingTaskGroup(of: Void.self) { group in
          for _ in 0..<Self.callers {
            group.addTask {
              while unixNow() < start + seconds {
                _ = try await library.send("GET", url, through: requests, client: clients)
              }
            }
          }
          try await group.waitForAll()
        }
        return PacingFigures(
          server: server, client: library.rawValue, ledger: ledger.all, from: start, seconds: seconds,
          allowedRate: Double(Self.quota))
      }
    }
    print(figures)
    return figures
  }

  /// Pace's own middleware (a token bucket of 20 a second, in memory, as the example server
  /// runs it) tells the policy in `RateLimit-Policy` and `RateLimit` on its first response: no
  /// 429 after it, and at least 95 % of the allowed rate.
  @Test(arguments: ClientLibrary.allCases)
  func paceMiddlewareIsNeverExceeded(_ library: ClientLibrary) async throws {
    let figures = try await run("Pace middleware (RateLimit, RateLimit-Policy)", library) { ledger in
      TestServer.paceMiddleware(permits: Self.quota, per: .seconds(1), ledger: ledger)
    }
    #expect(figures.tooManyAfterTold == 0)
    #expect(figures.ratio >= proofRateBound)
  }

  /// GitHub's fields (`X-RateLimit-Limit`, `-Remaining`, `-Used`, `-Reset` in seconds since
  /// 1970) on every response, fixed windows of a second: no 429 after the first response, at
  /// least 95 % of the allowed rate.
  @Test(arguments: ClientLibrary.allCases)
  func gitHubStyleFieldsAreNeverExceeded(_ library: ClientLibrary) async throws {
    let figures = try await run("GitHub-style (X-RateLimit-*)", library) { ledger in
      TestServer.gitHubStyle(quota: Self.quota, windowSeconds: 1, ledger: ledger)
    }
    #expect(figures.tooManyAfterTold == 0)
    #expect(figures.ratio >= proofRateBound)
  }

  /// A server that tells nothing but `Retry-After` on its 429s: the client learns its quota from
  /// the requests answered between two refusals (after two windows whose 429s are at most the
  /// requests in flight, 16 each), and meets no 429 after that however long it runs, while
  /// reaching at least 95 % of the allowed rate (``proofRefusalWaves`` says what a loaded
  /// machine adds).
  @Test(arguments: ClientLibrary.allCases)
  func retryAfterAloneHoldsEveryCaller(_ library: ClientLibrary) async throws {
    let figures = try await run("Retry-After only", library) { ledger in
      TestServer.retryAfterOnly(quota: Self.quota, windowSeconds: 1, ledger: ledger)
    }
    #expect(figures.tooManyRequests <= Self.callers * proofRefusalWaves)
    #expect(figures.ratio >= proofRateBound)
  }
}

/// Retries through the glue, against real servers: within the budget, never a POST by default.
@Suite("Paced clients retry, over loopback", .timeLimit(.minutes(2)))
struct PacedClientRetryTests {
  /// Quick retries, so that the tests take little real time.
  static let quickRetries = RetryStrategy(
    maximumAttempts: 3, baseDelay: .milliseconds(50), maximumDelay: .milliseconds(200))

  @Test(arguments: ClientLibrary.allCases)
  func aServerThatFailsWith503ThenRecoversIsRetried(_ library: ClientLibrary) async throws {
    let ledger = ServerLedger()
    let status = try await TestServer.run(TestServer.recovering(after: 2, ledger: ledger)) { port in
      try await Clients.with { clients in
        try await library.send(
          "GET", "http://127.0.0.1:\(port)/", through: PacedRequests(retry: Self.quickRetries), client: clients)
      }
    }
    #expect(status == 200)
    #expect(ledger.all.map(\.status) == [503, 503, 200])
  }

  /// Out of budget, the 503 is the answer: a budget of no retries at all sends the request once.
  @Test(arguments: ClientLibrary.allCases)
  func retriesStopWhenTheBudgetIsSpent(_ library: ClientLibrary) async throws {
    let ledger = ServerLedger()
    let noRetries = RetryBudget(ratio: 0, minimumPerSecond: 0)
    let status = try await TestServer.run(TestServer.recovering(after: 2, ledger: ledger)) { port in
      try await Clients.with { clients in
        let requests = PacedRequests(retry: Self.quickRetries, budget: noRetries)
        return try await library.send("GET", "http://127.0.0.1:\(port)/", through: requests, client: clients)
      }
    }
    #expect(status == 503)
    #expect(ledger.all.map(\.status) == [503])
  }

  /// A POST is not idempotent: its 503 is returned, not retried.
  @Test(arguments: ClientLibrary.allCases)
  func aPostIsNotRetriedByDefault(_ library: ClientLibrary) async throws {
    let ledger = ServerLedger()
    let statuses = try await TestServer.run(TestServer.recovering(after: 1, ledger: ledger)) { port in
      try await Clients.with { clients in
        let requests = PacedRequests(retry: Self.quickRetries)
        let post = try await library.send("POST", "http://127.0.0.1:\(port)/", through: requests, client: clients)
        let get = try await library.send("GET", "http://127.0.0.1:\(port)/", through: requests, client: clients)
        return [post, get]
      }
    }
    #expect(statuses == [503, 200])
    #expect(ledger.all.map(\.status) == [503, 200])
  }

  /// A refused connection is retried: the server starts on the port 300 ms after the first
  /// attempt was refused, and a retry reaches it.
  @Test(arguments: ClientLibrary.allCases)
  func aRefusedConnectionIsRetried(_ library: ClientLibrary) async throws {
    // Held until the server binds it too: a port found free and let go could be taken meanwhile.
    let reserved = try ReservedPort()
    defer { reserved.release() }
    let port = reserved.port
    let ledger = ServerLedger()
    // Attempts for 10 s: on a loaded machine the server may take seconds to listen.
    let retries = RetryStrategy(maximumAttempts: 100, baseDelay: .milliseconds(100), maximumDelay: .milliseconds(100))
    let status = try await Clients.with { clients in
      try await withThrowingTaskGroup(of: Int?.self) { group in
        group.addTask {
          try await library.send(
            "GET", "http://127.0.0.1:\(port)/", through: PacedRequests(retry: retries), client: clients)
        }
        group.addTask {
          // real-time: a real server on loopback comes up after the first attempt was refused.
          try await Task.sleep(for: .milliseconds(300))
          // Serves until the request has its answer (the group is cancelled then).
          try await TestServer.run(TestServer.recovering(after: 0, ledger: ledger), port: port) { _ in
            // real-time: serves until the group is cancelled, not for the whole minute.
            try await Task.sleep(for: .seconds(60))
          }
          return nil
        }
        defer { group.cancelAll() }
        while let result = try await group.next() {
          if let status = result { return status }
        }
        return 0
      }
    }
    #expect(status == 200)
    #expect(ledger.all.map(\.status) == [200])
  }
}

/// The send's deadline through each glue, against a server that answers late.
@Suite("Paced clients keep their deadline, over loopback", .timeLimit(.minutes(2)))
struct PacedClientDeadlineTests {
  /// A server that answers 200 after `delay`, and says when it has.
  static func slow(after delay: Duration, answered: LockedBox<Bool>) -> Router<BasicRequestContext> {
    let router = Router()
    router.get("/") { _, _ in
      // real-time: the server is late by design; the client's deadline must not wait for it.
      try await Task.sleep(for: delay)
      answered.withLock { $0 = true }
      return Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(string: "ok")))
    }
    return router
  }

  /// A GET with a deadline of 300 ms to a server that answers in 5 s fails with
  /// `deadlineExceeded` before the server answers: the attempt is cancelled at the deadline.
  @Test(arguments: ClientLibrary.allCases)
  func aSendEndsAtItsDeadline(_ library: ClientLibrary) async throws {
    let answered = LockedBox(false)
    let outcome = try await TestServer.run(Self.slow(after: .seconds(5), answered: answered)) { port in
      try await Clients.with { clients in
        do {
          _ = try await library.send(
            "GET", "http://127.0.0.1:\(port)/", through: PacedRequests(), client: clients,
            deadline: .milliseconds(300))
          return "answered"
        } catch let error as PacedRequestsError {
          return "\(error)" + (answered.withLock { $0 } ? " after the answer" : "")
        }
      }
    }
    #expect(outcome == "\(PacedRequestsError.deadlineExceeded(needed: nil, remaining: .zero))")
  }
}
#endif
