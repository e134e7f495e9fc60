// Calls that compiled against PaceHummingbird 0.3.0 (tag 0.3.0, b987f07, trait Hummingbird): the
// names 0.3.0 added, with their released labels. Not a test target: Scripts/check-source-compatibility.sh
// --server type-checks this file against the server build (.build-server) and fails on an error
// (deprecation warnings are expected and allowed).
// Spelled as released: a rename leaves this file alone (its old name must still compile here).
import Hummingbird
import Logging
import NIOCore
import Pace
import PaceHummingbird

struct AddressContextOf030: RequestContext, RemoteAddressRequestContext {
  var coreContext: CoreRequestContextStorage
  let remoteAddress: SocketAddress?

  init(source: ApplicationRequestContextSource) {
    coreContext = .init(source: source)
    remoteAddress = source.channel.remoteAddress
  }
}

func hummingbirdCallsOf030(_ request: Request, _ context: AddressContextOf030) {
  // Client identities behind trusted proxies, IPv6 clients by their /64.
  let clients = ClientAddress(
    trustedProxies: ["10.0.0.0/8"], header: .forwarded, ipv4PrefixLength: 32, ipv6PrefixLength: 64)
  _ = ClientAddress(trustedProxies: ["10.0.0.0/8"])
  let header: ClientAddress.ForwardingHeader = .xForwardedFor
  let proxies: [String] = clients.trustedProxies
  let lengths = (clients.ipv4PrefixLength, clients.ipv6PrefixLength)
  let address: String? = clients.address(of: request, context: context)
  let key: String? = ClientAddress.peer.key(request, context)
  _ = (header, proxies, lengths, address, key)

  // Several named policies on one request, each with its key and cost; long keys hashed or refused.
  let perIP = RateLimitPolicy<AddressContextOf030>("per-ip", limit: .slidingWindow(100, per: .seconds(60))) {
    request, context in clients.key(request, context)
  }
  let perKey = RateLimitPolicy<AddressContextOf030>(
    "per-key", limiter: KeyedRateLimiter(limit: .fixedWindow(1_000, per: .seconds(3600))),
    cost: { request, _ in request.uri.path == "/export" ? 10 : 1 },
    key: { request, _ in request.headers[.authorization] })
  _ = RateLimitPolicy<AddressContextOf030>(
    "global", limit: RateLimit(permits: 5, per: .seconds(1)), cost: { _, _ in 1 }
  ) {
    _, _ in "global"
  }
  let policyName: String = perIP.name
  let policyLimiter: KeyedRateLimiter<String> = perKey.limiter
  let middleware = RateLimitMiddleware(policies: [perIP, perKey], longKeys: .refuse, logger: Logger(label: "limits"))
  _ = RateLimitMiddleware<AddressContextOf030>(
    limit: .slidingWindow(10, per: .seconds(1)), policyName: "default", longKeys: .hash, key: { _, _ in "k" })
  _ = RateLimitMiddleware<AddressContextOf030>(limiter: policyLimiter, longKeys: .hash) { _, _ in "k" }
  let policies: [RateLimitPolicy<AddressContextOf030>] = middleware.policies
  let longKeys: LongKeyPolicy = middleware.longKeys
  switch longKeys {
  case .hash: print("hash")
  case .refuse: print("refuse")
  }
  let limit: RateLimit = middleware.limit
  _ = (policyName, policies, limit)
}
