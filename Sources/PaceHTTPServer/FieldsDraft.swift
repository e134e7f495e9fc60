#if Hummingbird || Vapor
extension RateLimitingMiddleware {
  /// The draft whose fields every rate-limit middleware writes:
  /// `draft-ietf-httpapi-ratelimit-headers-11`. `RateLimit-Policy` members carry `q` and `w`,
  /// `RateLimit` members `r` and `t` (the parameter names -10 and -11 share; a client reading the
  /// working group's later editor's copy, `a` and `w`, reads -11 too), never `qu` (requests, the
  /// draft's default unit, is the only quota a middleware counts), and `pk` only for a policy that
  /// discloses partition keys (``RateLimitPolicy/disclosingPartitionKeys(_:)``). One encoder
  /// writes them all, so this is the one version a server's answers are in; a `429` also carries
  /// `Retry-After`, in whole seconds, the same as the refusing policy's `t`.
  public static var rateLimitFieldsDraft: String { RateLimitFields.draft }
}

extension RateLimitFields {
  /// The draft this encoder writes: see ``RateLimitingMiddleware/rateLimitFieldsDraft``.
  package static let draft = "draft-ietf-httpapi-ratelimit-headers-11"
}
#endif
