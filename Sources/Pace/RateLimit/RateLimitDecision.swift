/// What a rate limiter decided for one request.
public enum RateLimitDecision: Sendable, Hashable {
  /// The request may go ahead; `remaining` permits are left for the key right now.
  case allowed(remaining: Int)
  /// The request is over the limit; the same request would be allowed after `retryAfter`.
  case limited(retryAfter: Duration)

  /// Whether the request may go ahead.
  public var isAllowed: Bool {
    if case .allowed = self { return true }
    return false
  }
}
