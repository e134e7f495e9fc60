#if PostgreSQL && Hummingbird && Vapor
import Pace
import PaceVapor
import Vapor
import VaporTesting

/// Runs `probes` in order through PaceVapor's middleware on `limiter`, in VaporTesting's in-memory
/// mode.
func vaporAnswers(_ limiter: KeyedRateLimiter<String>, _ probes: [Probe]) async throws -> [Answer] {
  try await withApp { app in
    app.grouped(
      RateLimitMiddleware(
        limiter: limiter, key: { request in request.headers.first(name: Probe.keyField) },
        cost: { request in request.headers.first(name: Probe.costField).flatMap { Int($0) } ?? 1 })
    ).get { _ in "ok" }
    var answers: [Answer] = []
    for probe in probes {
      var headers = HTTPHeaders()
      if let key = probe.key { headers.add(name: Probe.keyField, value: key) }
      if let cost = probe.cost { headers.add(name: Probe.costField, value: cost) }
      let response = try await app.testing().sendRequest(.GET, "/", headers: headers)
      var fields: [String: String] = [:]
      for name in Probe.comparedFields(status: Int(response.status.code)) {
        fields[name] = response.headers.first(name: name)
      }
      answers.append(
        Answer(
          status: Int(response.status.code), reasonPhrase: response.status.reasonPhrase, fields: fields,
          body: response.body.string))
    }
    return answers
  }
}
#endif
