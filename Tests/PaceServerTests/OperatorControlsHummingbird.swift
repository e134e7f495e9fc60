#if PostgreSQL && Hummingbird && Vapor
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Pace
import PaceHummingbird

/// Runs `probes` in order through PaceHummingbird's middleware as `server` says: in the router
/// test mode, or over loopback for a live server.
func hummingbirdAnswers(_ server: ControlledServer, _ probes: [ControlledProbe]) async throws -> [Answer] {
  let costField = HTTPField.Name(Probe.costField)!
  let cost: @Sendable ((Request, AddressContext)) -> Int = { $0.0.headers[costField].flatMap { Int($0) } ?? 1 }
  let policies = server.policies.map { policy -> RateLimitPolicy<AddressContext> in
    var key: (@Sendable ((Request, AddressContext)) -> String?)?
    if let field = policy.keyField.flatMap({ HTTPField.Name($0) }) { key = { input in input.0.headers[field] } }
    switch policy.limiter {
    case .inMemory(let limiter): return RateLimitPolicy(policy.name, limiter: limiter, key: key, cost: cost)
    case .storeBacked(let limiter): return RateLimitPolicy(policy.name, limiter: limiter, key: key, cost: cost)
    }
  }
  let router = Router(context: AddressContext.self)
  router.add(middleware: RateLimitMiddleware(_rateLimitState: server.state(policies)))
  router.get("/") { _, _ in "ok" }
  let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
  return try await app.test(server.live ? .live : .router) { client in
    var answers: [Answer] = []
    for probe in probes {
      var headers = HTTPFields()
      for (name, value) in probe.headers { headers[HTTPField.Name(name)!] = value }
      answers.append(Answer(try await client.execute(uri: "/", method: .get, headers: headers)))
      probe.after?(server)
    }
    return answers
  }
}

#endif
