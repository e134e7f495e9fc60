#if PostgreSQL && Hummingbird && Vapor
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Pace
import PaceHummingbird

/// Runs `probes` in order through PaceHummingbird's middleware on `limiter`, in Hummingbird's
/// router test mode.
func hummingbirdAnswers(_ limiter: KeyedRateLimiter<String>, _ probes: [Probe]) async throws -> [Answer] {
  let key = HTTPField.Name(Probe.keyField)!
  let cost = HTTPField.Name(Probe.costField)!
  let router = Router()
  router.add(
    middleware: RateLimitMiddleware(
      limiter: limiter, cost: { request, _ in request.headers[cost].flatMap { Int($0) } ?? 1 },
      key: { request, _ in request.headers[key] }))
  router.get("/") { _, _ in "ok" }
  let app = Application(router: router)
  return try await app.test(.router) { client in
    var answers: [Answer] = []
    for probe in probes {
      var headers = HTTPFields()
      headers[key] = probe.key
      headers[cost] = probe.cost
      let response = try await client.execute(uri: "/", method: .get, headers: headers)
      var fields: [String: String] = [:]
      for name in Probe.comparedFields(status: response.status.code) {
        fields[name] = response.headers[HTTPField.Name(name)!]
      }
      answers.append(
        Answer(
          status: response.status.code, reasonPhrase: response.status.reasonPhrase, fields: fields,
          body: String(buffer: response.body)))
    }
    return answers
  }
}
#endif
