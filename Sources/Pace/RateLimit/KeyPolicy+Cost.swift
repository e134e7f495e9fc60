extension KeyPolicy {
  /// Checks a cost from a request against the policy for `limit`.
  ///
  /// - Throws: ``InvalidInput/negativeCost(_:)`` or ``InvalidInput/costAboveBurst(cost:burst:)``.
  public static func check(cost: Int, limit: RateLimit) throws(InvalidInput) {
    if cost < 0 { throw .negativeCost(cost) }
    if cost > limit.burst { throw .costAboveBurst(cost: cost, burst: limit.burst) }
  }
}
