// Calls that compiled against PaceVapor 0.2.0 (tag 0.2.0, 278bc1f, trait Vapor): the names 0.2.0
// added, with their released labels. Not a test target: Scripts/check-source-compatibility.sh
// --server type-checks this file against the server build (.build-server) and fails on an error
// (deprecation warnings are expected and allowed).
// Spelled as released: a rename leaves this file alone (its old name must still compile here).
import Logging
import Pace
import PaceVapor
import ServiceLifecycle
import Vapor

func vaporCallsOf020(_ app: Application, request: Request, services: [any Service]) {
  let clients = ClientAddress.forwarded(byTrustedProxies: ["10.0.0.1"])
  // 0.4.0 breaks this, announced: `trustedProxies` is `[String]` on every framework, as its
  // initialiser takes it (it was `Set<String>` on Vapor).
  let proxies = Set(clients.trustedProxies)
  let address: String? = ClientAddress.peer.address(of: request)
  let key: String? = clients.key(request)
  let middleware = RateLimitMiddleware(
    limit: RateLimit(permits: 10, per: .seconds(1)), policyName: "per-ip", logger: Logger(label: "limits"),
    key: clients.key, cost: { _ in 1 })
  _ = RateLimitMiddleware(limiter: middleware.limiter, policyName: "global", key: { _ in "global" })
  _ = RateLimitMiddleware(limit: RateLimit(permits: 10, per: .seconds(1)))
  app.middleware.use(middleware)
  let limit: RateLimit = middleware.limit
  let name: String = middleware.policyName
  let logger: Logger = middleware.logger
  let handler = ServiceLifecycleHandler(services: services, beforeServerStarts: { print("migrate") })
  app.lifecycle.use(handler)
  let held: [any Service] = handler.services
  _ = (proxies, address, key, limit, name, logger, held)
}
