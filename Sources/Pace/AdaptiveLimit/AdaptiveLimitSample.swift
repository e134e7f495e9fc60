/// What one completed request tells an ``AdaptiveLimit``: how long it took, whether it failed,
/// and how busy the service was when it was let through.
public struct AdaptiveLimitSample: Sendable, Hashable {
  /// From the moment the request was let through to the moment it completed.
  public var roundTrip: Duration
  /// How many requests were in flight when this one was let through, itself included.
  public var inFlight: Int
  /// Whether the request was dropped: it failed, was refused further on, or timed out.
  public var dropped: Bool

  /// A sample of one completed request.
  ///
  /// - Parameters:
  ///   - roundTrip: From the moment the request was let through to the moment it completed.
  ///   - inFlight: How many requests were in flight when it was let through, itself included.
  ///   - dropped: Whether it failed, was refused further on, or timed out.
  public init(roundTrip: Duration, inFlight: Int, dropped: Bool = false) {
    self.roundTrip = roundTrip
    self.inFlight = inFlight
    self.dropped = dropped
  }
}
