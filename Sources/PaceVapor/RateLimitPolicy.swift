#if Vapor
import PaceHTTPServer
import Vapor

/// One named limit of a ``RateLimitMiddleware``: PaceHTTPServer's `RateLimitPolicy`, reading a
/// Vapor request.
///
/// ```swift
/// let perAddress = RateLimitPolicy("per-address", limit: RateLimit(permits: 300, per: .seconds(60)))
/// let perKey = RateLimitPolicy("per-key", limit: RateLimit(permits: 100, per: .seconds(60))) { request in
///   request.headers.first(name: "X-API-Key").map { "key:\($0)" }
/// }
/// ```
public typealias RateLimitPolicy = PaceHTTPServer.RateLimitPolicy<Request>

/// What a rate-limit middleware does with a key longer than `InputRules.maximumKeyBytes`.
@available(*, deprecated, renamed: "LongKeyHandling")
public typealias LongKeyPolicy = LongKeyHandling
#endif
