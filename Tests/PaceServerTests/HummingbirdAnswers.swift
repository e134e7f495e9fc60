#if PostgreSQL && Hummingbird && Vapor
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Pace
import PaceHummingbird

/// Runs `probes` in order through PaceHummingbird's middleware on `limiter`, in Hummingbird's
/// router test mode.
func hummingbirdAnswers(_ limiter: KeyedRateLimiter<String>, _ probes: [Probe]) async throws -> [Answer] {
  try await hummingbirdAnswers(.single(limiter), probes)
}

/// Runs `probes` in order through PaceHummingbird's middlewares as `server` says.
func hummingbirdAnswers(_ server: ProbeServer, _ probes: [Probe]) async throws -> [Answer] {
  let costField = HTTPField.Name(Probe.costField)!
  let cost: @Sendable ((Request, BasicRequestContext)) -> Int = { $0.0.headers[costField].flatMap { Int($0) } ?? 1 }
  let policies = server.policies.map { policy -> RateLimitPolicy<BasicRequestContext> in
    var key: (@Sendable ((Request, BasicRequestContext)) -> String?)?
    if let field = policy.keyField.flatMap({ HTTPField.Name($0) }) { key = { input in input.0.headers[field] } }
    let made: RateLimitPolicy<BasicRequestContext>
    switch policy.limiter {
    case .inMemory(let limiter): made = RateLimitPolicy(policy.name, limiter: limiter, key: key, cost: cost)
    case .storeBacked(let limiter): made = RateLimitPolicy(policy.name, limiter: limiter, key: key, cost: cost)
    }
    return policy.partitionKeys.map { made.disclosingPartitionKeys($0) } ?? made
  }
  let longKeys: LongKeyHandling = server.refusesLongKeys ? .refuse : .hash
  let router = Router()
  if server.nested {
    for policy in policies { router.add(middleware: RateLimitMiddleware(policies: [policy], longKeys: longKeys)) }
  } else {
    router.add(middleware: RateLimitMiddleware(policies: policies, longKeys: longKeys))
  }
  router.get("/") { _, _ in "ok" }
  let app = Application(router: router)
  return try await app.test(.router) { client in
    var answers: [Answer] = []
    for probe in probes {
      var headers = HTTPFields()
      for (name, value) in probe.headers { headers[HTTPField.Name(name)!] = value }
      answers.append(Answer(try await client.execute(uri: "/", method: .get, headers: headers)))
    }
    return answers
  }
}
extension Answer {
  /// What a client sees of a Hummingbird test response.
  init(_ response: TestResponse) {
    var fields: [String: String] = [:]
    for name in Probe.comparedFields(status: response.status.code) {
      let values = response.headers[values: HTTPField.Name(name)!]
      if !values.isEmpty { fields[name] = values.joined(separator: ", ") }
    }
    self.init(
      status: response.status.code, reasonPhrase: response.status.reasonPhrase, fields: fields,
      body: String(buffer: response.body))
  }
}
#endif
