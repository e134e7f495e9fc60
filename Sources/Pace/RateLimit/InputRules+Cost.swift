extension InputRules {
  /// Checks a cost from a request against the rules for `limit`: 0 through the limit's burst
  /// pass (a cost of 0 is a query, which a limiter answers as it would a cost of 1, taking
  /// nothing); any other cost could never be granted.
  ///
  /// - Throws: ``InvalidInput/negativeCost(_:)`` or ``InvalidInput/costAboveBurst(cost:burst:)``.
  public static func check(cost: Int, limit: RateLimit) throws(InvalidInput) {
    if cost < 0 { throw .negativeCost(cost) }
    if cost > limit.burst { throw .costAboveBurst(cost: cost, burst: limit.burst) }
  }
}
