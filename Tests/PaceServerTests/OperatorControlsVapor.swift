#if PostgreSQL && Hummingbird && Vapor
import Pace
import PaceVapor
import Vapor
import VaporTesting

/// Runs `probes` in order through PaceVapor's middleware as `server` says: in memory, or over
/// loopback for a live server.
func vaporAnswers(_ server: ControlledServer, _ probes: [ControlledProbe]) async throws -> [Answer] {
  let cost: @Sendable (Vapor.Request) -> Int = { $0.headers.first(name: Probe.costField).flatMap { Int($0) } ?? 1 }
  let policies = server.policies.map { policy -> RateLimitPolicy in
    var key: (@Sendable (Vapor.Request) -> String?)?
    if let field = policy.keyField { key = { request in request.headers.first(name: field) } }
    switch policy.limiter {
    case .inMemory(let limiter): return RateLimitPolicy(policy.name, limiter: limiter, key: key, cost: cost)
    case .storeBacked(let limiter):
      return RateLimitPolicy(policy.name, limiter: limiter, key: key, cost: cost)
    }
  }
  return try await withApp { app in
    app.grouped(RateLimitMiddleware(_rateLimitState: server.state(policies))).get { _ in "ok" }
    let tester = try server.live ? app.testing(method: .running(hostname: "127.0.0.1", port: 0)) : app.testing()
    var answers: [Answer] = []
    for probe in probes {
      var headers = HTTPHeaders()
      for (name, value) in probe.headers { headers.add(name: name, value: value) }
      answers.append(Answer(try await tester.sendRequest(.GET, "/", headers: headers)))
      probe.after?(server)
    }
    return answers
  }
}

#endif
