/// What a rate limiter decided for one request.
public enum RateLimitDecision: Sendable, Hashable {
  /// The request may go ahead; `remaining` permits are left for the key right now.
  case allowed(remaining: Int)
  /// The request is over the limit; the same request would be allowed after `retryAfter`.
  case limited(retryAfter: Duration)

  /// The `retryAfter` of a request that no wait would let through: a cost above the limit's
  /// burst, answered by a synchronous `tryAcquire` (the throwing calls throw
  /// ``InvalidInput/costAboveBurst(cost:burst:)`` instead). `Int64.max` seconds.
  public static let never: Duration = .seconds(Int64.max)

  /// Whether the request may go ahead.
  public var isAllowed: Bool {
    if case .allowed = self { return true }
    return false
  }
}
