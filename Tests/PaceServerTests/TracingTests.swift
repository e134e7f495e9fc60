#if PostgreSQL && Hummingbird && AsyncHTTPClient
import AsyncHTTPClient
import Hummingbird
import InMemoryTracing
import NIOHTTP1
import Pace
import PaceAsyncHTTPClient
import PaceHTTPClient
import PaceHTTPServer
import PaceHummingbird
import PostgresNIO
import Testing
import Tracing

@testable import PacePostgres

/// The spans Pace records when a tracer is at hand (here an in-memory one, bound to each test's
/// task with `withTracer`): a middleware's decision, the store's decision within it, a debounced
/// execution and its steps, each attempt of a paced send; the keys only hashed.
@Suite("Traces", .databaseTestTimeLimit)
struct TracingTests {
  /// The first 16 hexadecimal digits of `key`'s SHA-256, as the spans write a key.
  static func hashed(_ key: String) -> SpanAttribute { .string(String(SHA256.hex(key).prefix(16))) }

  /// The finished spans named `name`.
  static func spans(_ tracer: InMemoryTracer, _ name: String) -> [FinishedInMemorySpan] {
    tracer.finishedSpans.filter { $0.operationName == name }
  }

  /// A middleware's decision is a span of its own, parent of the store's, and the store's says
  /// who answered (the database in a batch of one, then this instance's memory of the denial),
  /// how many round trips it took, the algorithm, the decision, and the key hashed only.
  @Test func aMiddlewareDecisionParentsTheStoresDecision() async throws {
    try await TestDatabase.withClients { clients in
      let store = try PostgresRateLimitStore(
        client: clients[0], table: TestDatabase.uniqueTable("trace"), timeout: .seconds(30))
      try await store.migrate()
      try await TestDatabase.running(store) {
        let limiter = StoreBackedRateLimiter<String>(permits: 1, per: .seconds(3600), store: store)
        let middleware = RateLimitMiddleware<BasicRequestContext>(limiter: limiter, policyName: "plan") { _, _ in
          "unused"
        }
        let tracer = InMemoryTracer()
        try await withTracer(tracer) {
          try await tracer.withSpan("request") { _ in
            for _ in 0..<3 { _ = try await middleware._rateLimitState.gate.outcome(key: "alice", cost: 1) }
          }
        }
        let request = try #require(Self.spans(tracer, "request").first)
        let gate = Self.spans(tracer, "pace.rate_limit.decide")
        let decisions = Self.spans(tracer, "pace.rate_limit.store.decide")
        try #require(gate.count == 3 && decisions.count == 3)
        for (middlewareSpan, storeSpan) in zip(gate, decisions) {
          #expect(middlewareSpan.parentSpanID == request.spanID)
          #expect(middlewareSpan.traceID == request.traceID)
          #expect(storeSpan.parentSpanID == middlewareSpan.spanID)
          #expect(middlewareSpan.attributes.get("pace.rate_limit.policy") == .string("plan"))
          #expect(middlewareSpan.attributes.get("pace.rate_limit.key.hash") == Self.hashed("alice"))
          #expect(storeSpan.attributes.get("pace.rate_limit.key.hash") == Self.hashed("alice"))
          #expect(storeSpan.attributes.get("db.system.name") == .string("postgresql"))
          #expect(storeSpan.attributes.get("pace.rate_limit.algorithm") == .string("tokenBucket"))
          #expect(storeSpan.attributes.get("pace.rate_limit.permits") == .int64(1))
          #expect(storeSpan.attributes.get("pace.rate_limit.cost") == .int64(1))
          // Never the key itself, in any attribute.
          for attributes in [middlewareSpan.attributes, storeSpan.attributes] {
            attributes.forEach { name, value in #expect(!"\(value)".contains("alice"), "\(name)") }
          }
        }
        #expect(
          gate.map { $0.attributes.get("pace.rate_limit.decision") } == [
            .string("allowed"), .string("limited"), .string("limited"),
          ])
        #expect(gate[0].attributes.get("pace.rate_limit.remaining") == .int64(0))
        #expect(gate[1].attributes.get("pace.rate_limit.retry_after") != nil)
        #expect(
          decisions.map { $0.attributes.get("pace.rate_limit.answered_by") }
            == [.string("database"), .string("database"), .string("denial_cache")])
        #expect(
          decisions.map { $0.attributes.get("pace.rate_limit.round_trips") } == [.int64(1), .int64(1), .int64(0)])
        #expect(decisions[0].attributes.get("db.operation.batch.size") == .int64(1))
        #expect(decisions[2].attributes.get("db.operation.batch.size") == nil)
        #expect(
          decisions.map { $0.attributes.get("pace.rate_limit.decision") } == [
            .string("allowed"), .string("limited"), .string("limited"),
          ])
      }
    }
  }

  /// A question (cost 0) is traced as one; the database's failure mode answers a store that
  /// cannot reach it, and its span says so.
  @Test func aQuestionAndAFailureModeAreTracedAsSuch() async throws {
    let port = try TestDatabase.closedPort()
    try await TestDatabase.withClients(port: port) { clients in
      let store = try PostgresRateLimitStore(
        client: clients[0], table: TestDatabase.uniqueTable("trace"), whenUnavailable: .allow,
        timeout: .milliseconds(300))
      let tracer = InMemoryTracer()
      try await withTracer(tracer) {
        _ = try await store.tryAcquire("bob", cost: 0, limit: RateLimit(permits: 5, per: .seconds(60)))
      }
      let span = try #require(Self.spans(tracer, "pace.rate_limit.store.decide").first)
      #expect(span.parentSpanID == nil)
      #expect(span.attributes.get("pace.rate_limit.decision") == .string("question"))
      #expect(span.attributes.get("pace.rate_limit.answered_by") == .string("failure_mode"))
      #expect(span.attributes.get("pace.rate_limit.key.hash") == Self.hashed("bob"))
    }
  }

  /// A debounced execution is a span whose children are its claim's payloads read, the handler's
  /// run (the handler's own spans its children) and the settlement, in that order.
  @Test func aDebouncedExecutionIsClaimRunSettle() async throws {
    try await TestDatabase.withClients { clients in
      let debouncer = try PostgresDebouncer<[Int]>(
        client: clients[0], table: TestDatabase.uniqueTable("trace"), quiet: .milliseconds(1), lease: .seconds(30),
        merge: .append, pollInterval: .milliseconds(20), timeout: .seconds(5)
      ) { _, _ in
        await withSpan("handler") { _ in await Task.yield() }
      }
      try await debouncer.migrate()
      try await debouncer.call("carol", [1])
      try await debouncer.call("carol", [2])
      let claim = try await Self.claimDue(debouncer)
      let tracer = InMemoryTracer()
      let acknowledged = await withTracer(tracer) { await debouncer.execute(claim, mayStart: { true }) }
      #expect(acknowledged)
      let execution = try #require(Self.spans(tracer, "pace.debounce.execute").first)
      #expect(execution.kind == .consumer)
      #expect(execution.attributes.get("pace.debounce.key.hash") == Self.hashed("carol"))
      #expect(execution.attributes.get("pace.debounce.attempt") == .int64(1))
      let children = tracer.finishedSpans.filter { $0.parentSpanID == execution.spanID }
      #expect(children.map(\.operationName) == ["pace.debounce.claim", "pace.debounce.run", "pace.debounce.settle"])
      #expect(children.first?.attributes.get("pace.debounce.payloads") == .int64(2))
      #expect(children.last?.attributes.get("pace.debounce.outcome") == .string("acknowledged"))
      let handler = try #require(Self.spans(tracer, "handler").first)
      #expect(handler.parentSpanID == children.dropFirst().first?.spanID)
    }
  }

  /// A handler that fails: the run records the error, the settlement is `failed` (a retry).
  @Test func aFailedExecutionSettlesAsFailed() async throws {
    struct HandlerFailed: Error {}
    try await TestDatabase.withClients { clients in
      let debouncer = try PostgresDebouncer<[Int]>(
        client: clients[0], table: TestDatabase.uniqueTable("trace"), quiet: .milliseconds(1), lease: .seconds(30),
        merge: .append, pollInterval: .milliseconds(20), timeout: .seconds(5)
      ) { _, _ in throw HandlerFailed() }
      try await debouncer.migrate()
      try await debouncer.call("dave", [1])
      let claim = try await Self.claimDue(debouncer)
      let tracer = InMemoryTracer()
      #expect(await withTracer(tracer) { await debouncer.execute(claim, mayStart: { true }) } == false)
      let run = try #require(Self.spans(tracer, "pace.debounce.run").first)
      #expect(run.errors.count == 1 && run.errors.first?.error is HandlerFailed)
      let settle = try #require(Self.spans(tracer, "pace.debounce.settle").first)
      #expect(settle.attributes.get("pace.debounce.outcome") == .string("failed"))
    }
  }

  /// Claims until the debouncer's one key is due (its quiet period is 1 ms of the database's clock).
  static func claimDue(_ debouncer: PostgresDebouncer<[Int]>) async throws -> PostgresDebouncer<[Int]>.Claim {
    for _ in 0..<500 {
      if let claim = try await debouncer.claim(limit: 1).first { return claim }
      // real-time: the database's clock decides when the key is due.
      try await Task.sleep(for: .milliseconds(10))
    }
    throw ClaimNeverDue()
  }

  struct ClaimNeverDue: Error {}

  /// Each attempt of a paced send is a span, parent of AsyncHTTPClient's own span of the request:
  /// the first held for no retry, the second a resend with the wait before it; the fields read.
  @Test func eachAttemptOfAPacedSendIsASpan() async throws {
    let tracer = InMemoryTracer()
    let ledger = ServerLedger()
    try await TestServer.run(TestServer.recovering(after: 1, ledger: ledger)) { port in
      try await Self.withClient(tracer) { client in
        let requests = PacedRequests(
          retry: RetryStrategy(maximumAttempts: 3, baseDelay: .milliseconds(50), maximumDelay: .milliseconds(50)))
        try await tracer.withSpan("caller") { _ in
          let response = try await client.execute(
            HTTPClientRequest(url: "http://127.0.0.1:\(port)/"), timeout: .seconds(10), pacedBy: requests)
          #expect(response.status == .ok)
        }
      }
    }
    let caller = try #require(Self.spans(tracer, "caller").first)
    let attempts = Self.spans(tracer, "pace.http_client.attempt")
    try #require(attempts.count == 2)
    for attempt in attempts {
      #expect(attempt.parentSpanID == caller.spanID)
      // AsyncHTTPClient's own span of the request is the attempt's child.
      #expect(tracer.finishedSpans.contains { $0.operationName == "GET" && $0.parentSpanID == attempt.spanID })
    }
    #expect(attempts.map { $0.attributes.get("http.response.status_code") } == [.int64(503), .int64(200)])
    #expect(attempts[0].attributes.get("http.request.resend_count") == nil)
    #expect(attempts[1].attributes.get("http.request.resend_count") == .int64(1))
    guard case .double(let wait) = attempts[1].attributes.get("pace.http_client.wait") else {
      Issue.record("no wait on the resend")
      return
    }
    // The backoff (50 ms at most, jittered) held the resend.
    #expect(wait > 0)
  }

  /// The fields the pacing reads are recorded as OpenTelemetry's response header attributes.
  @Test func anAttemptRecordsTheFieldsRead() async throws {
    let tracer = InMemoryTracer()
    try await TestServer.run(TestServer.paceMiddleware(permits: 5, per: .seconds(60), ledger: ServerLedger())) { port in
      try await Self.withClient(tracer) { client in
        _ = try await client.execute(
          HTTPClientRequest(url: "http://127.0.0.1:\(port)/"), timeout: .seconds(10), pacedBy: PacedRequests())
      }
    }
    let attempt = try #require(Self.spans(tracer, "pace.http_client.attempt").first)
    guard case .stringArray(let fields) = attempt.attributes.get("http.response.header.ratelimit") else {
      Issue.record("no RateLimit field recorded")
      return
    }
    #expect(fields.count == 1 && fields[0].hasPrefix("\"default\";r=4;"))
    #expect(attempt.attributes.get("http.response.header.ratelimit-policy") != nil)
    #expect(attempt.attributes.get("http.response.header.retry-after") == nil)
  }

  /// An HTTP client whose tracer is `tracer`, shut down after `body`.
  static func withClient<Result: Sendable>(
    _ tracer: InMemoryTracer, _ body: (HTTPClient) async throws -> Result
  ) async throws -> Result {
    var configuration = HTTPClient.Configuration()
    configuration.tracing.tracer = tracer
    let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    do {
      let result = try await body(client)
      try await client.shutdown()
      return result
    } catch {
      try await client.shutdown()
      throw error
    }
  }
}
#endif
