// Calls that compiled against PaceVapor 0.3.0 (tag 0.3.0, b987f07, trait Vapor): the names 0.3.0
// added, with their released labels. Not a test target: Scripts/check-source-compatibility.sh
// --server type-checks this file against the server build (.build-server) and fails on an error
// (deprecation warnings are expected and allowed).
// Spelled as released: a rename leaves this file alone (its old name must still compile here).
import Logging
import Pace
import PaceVapor
import Vapor

func vaporCallsOf030(_ app: Application) {
  // Client identities behind trusted proxies, IPv6 clients by their /64.
  let clients = ClientAddress(
    trustedProxies: ["10.0.0.0/8", "fd00::/8"], header: .forwarded, ipv4PrefixLength: 32, ipv6PrefixLength: 64)
  _ = ClientAddress(ipv6PrefixLength: 128)
  let header: ClientAddress.ForwardingHeader = .xForwardedFor
  // 0.4.0 breaks this, announced: `trustedProxies` is `[String]` on every framework, as its
  // initialiser takes it (it was `Set<String>` on Vapor).
  let proxies = Set(clients.trustedProxies)
  let lengths = (clients.ipv4PrefixLength, clients.ipv6PrefixLength)
  _ = (header, proxies, lengths)

  // Several named policies on one request, each with its key and cost; long keys hashed or refused.
  let perIP = RateLimitPolicy("per-ip", limit: .slidingWindow(100, per: .seconds(60)), key: clients.key)
  let perKey = RateLimitPolicy(
    "per-key", limiter: KeyedRateLimiter(limit: .fixedWindow(1_000, per: .seconds(3600))),
    key: { $0.headers.first(name: .authorization) }, cost: { $0.url.path == "/export" ? 10 : 1 })
  _ = RateLimitPolicy("global", limit: RateLimit(permits: 5, per: .seconds(1)))
  let policyName: String = perIP.name
  let policyLimiter: KeyedRateLimiter<String> = perKey.limiter
  let middleware = RateLimitMiddleware(policies: [perIP, perKey], longKeys: .refuse, logger: Logger(label: "limits"))
  _ = RateLimitMiddleware(limit: .slidingWindow(10, per: .seconds(1)), policyName: "default", longKeys: .hash)
  _ = RateLimitMiddleware(limiter: policyLimiter, longKeys: .hash)
  app.middleware.use(middleware)
  let policies: [RateLimitPolicy] = middleware.policies
  let longKeys: LongKeyPolicy = middleware.longKeys
  switch longKeys {
  case .hash: print("hash")
  case .refuse: print("refuse")
  }
  _ = (policyName, policies)
}
