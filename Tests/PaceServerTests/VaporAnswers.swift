#if PostgreSQL && Hummingbird && Vapor
import Pace
import PaceVapor
import Vapor
import VaporTesting

/// Runs `probes` in order through PaceVapor's middleware on `limiter`, in VaporTesting's in-memory
/// mode.
func vaporAnswers(_ limiter: KeyedRateLimiter<String>, _ probes: [Probe]) async throws -> [Answer] {
  try await vaporAnswers(.single(limiter), probes)
}

/// Runs `probes` in order through PaceVapor's middlewares as `server` says.
func vaporAnswers(_ server: ProbeServer, _ probes: [Probe]) async throws -> [Answer] {
  let cost: @Sendable (Request) -> Int = { $0.headers.first(name: Probe.costField).flatMap { Int($0) } ?? 1 }
  let policies = server.policies.map { policy -> RateLimitPolicy in
    var key: (@Sendable (Request) -> String?)?
    if let field = policy.keyField { key = { request in request.headers.first(name: field) } }
    let made: RateLimitPolicy
    switch policy.limiter {
    case .inMemory(let limiter): made = RateLimitPolicy(policy.name, limiter: limiter, key: key, cost: cost)
    case .storeBacked(let limiter): made = RateLimitPolicy(policy.name, limiter: limiter, key: key, cost: cost)
    }
    return policy.partitionKeys.map { made.disclosingPartitionKeys($0) } ?? made
  }
  let longKeys: LongKeyHandling = server.refusesLongKeys ? .refuse : .hash
  return try await withApp { app in
    let middlewares =
      server.nested
      ? policies.map { RateLimitMiddleware(policies: [$0], longKeys: longKeys) }
      : [RateLimitMiddleware(policies: policies, longKeys: longKeys)]
    app.grouped(middlewares).get { _ in "ok" }
    var answers: [Answer] = []
    for probe in probes {
      var headers = HTTPHeaders()
      for (name, value) in probe.headers { headers.add(name: name, value: value) }
      answers.append(Answer(try await app.testing().sendRequest(.GET, "/", headers: headers)))
    }
    return answers
  }
}

extension Answer {
  /// What a client sees of a Vapor test response.
  init(_ response: TestingHTTPResponse) {
    var fields: [String: String] = [:]
    for name in Probe.comparedFields(status: Int(response.status.code)) {
      let values = response.headers[name]
      if !values.isEmpty { fields[name] = values.joined(separator: ", ") }
    }
    self.init(
      status: Int(response.status.code), reasonPhrase: response.status.reasonPhrase, fields: fields,
      body: response.body.string)
  }
}
#endif
