// Calls that compiled against PaceHummingbird 0.2.0 (tag 0.2.0, 278bc1f, trait Hummingbird): the
// names 0.2.0 added, with their released labels. Not a test target: Scripts/check-source-compatibility.sh
// --server type-checks this file against the server build (.build-server) and fails on an error
// (deprecation warnings are expected and allowed).
// Spelled as released: a rename leaves this file alone (its old name must still compile here).
import Hummingbird
import Logging
import Pace
import PaceHummingbird

func hummingbirdCallsOf020() {
  let middleware = RateLimitMiddleware<BasicRequestContext>(
    limit: RateLimit(permits: 10, per: .seconds(1)), policyName: "per-key", logger: Logger(label: "limits"),
    cost: { _, _ in 1 }, key: { request, _ in request.headers[.authorization] })
  let limiter: KeyedRateLimiter<String> = middleware.limiter
  let logger: Logger = middleware.logger
  let name: String = middleware.policyName
  _ = RateLimitMiddleware<BasicRequestContext>(limiter: limiter) { _, _ in "global" }
  _ = (logger, name)
}
