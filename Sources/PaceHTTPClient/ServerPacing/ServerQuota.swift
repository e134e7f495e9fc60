import Pace

/// What a server said about a client's quota in one response, in no protocol's words: the
/// policy's quota per window, what is left of it and when it is whole again, and how long to wait
/// before the next request.
///
/// ```swift
/// // RateLimit-Policy: "default";q=100;w=60   RateLimit: "default";r=50;t=30
/// let quota = ServerQuota(quota: 100, window: .seconds(60), remaining: 50, resetsIn: .seconds(30))
/// limiter.record(quota, for: "api.example.com")
/// ```
///
/// Every member is optional: a server tells some of them, or none. The initialiser clamps what
/// no server can mean, so that a value built from hostile fields is always safe to act on: a
/// quota or window that is not positive is dropped, a negative `remaining` is 0, and every delay
/// (`resetsIn`, `retryAfter`) is clamped to `0 ... ServerQuota.maximumDelay`. A window is not
/// clamped: a shorter one would let a client send more than the server allows; a window too long
/// for any wait makes ``ServerPacedLimiter`` refuse to wait, which is the answer.
public struct ServerQuota: Sendable, Hashable, CustomStringConvertible {
  /// The longest delay a quota holds: a server asking for a longer wait is asked again after it.
  public static let maximumDelay: Duration = .seconds(86_400)

  /// The requests the policy allows per ``window`` (`q`, `X-RateLimit-Limit`); positive.
  public var quota: Int?
  /// The policy's window (`w`); positive.
  public var window: Duration?
  /// The requests left before the quota is whole again (`r`, `X-RateLimit-Remaining`); not
  /// negative.
  public var remaining: Int?
  /// How long until the quota is whole again, at most (`t`, `X-RateLimit-Reset`).
  public var resetsIn: Duration?
  /// How long to wait before the next request (`Retry-After`).
  public var retryAfter: Duration?

  /// A quota with the members a response told; each clamped as the type says.
  ///
  /// - Parameters:
  ///   - quota: The requests allowed per window; dropped unless positive.
  ///   - window: The window; dropped unless positive; never clamped.
  ///   - remaining: The requests left; a negative count is 0.
  ///   - resetsIn: How long until the quota is whole again; clamped to `0 ... maximumDelay`.
  ///   - retryAfter: How long to wait before the next request; clamped to `0 ... maximumDelay`.
  public init(
    quota: Int? = nil, window: Duration? = nil, remaining: Int? = nil, resetsIn: Duration? = nil,
    retryAfter: Duration? = nil
  ) {
    self.quota = quota.flatMap { $0 > 0 ? $0 : nil }
    self.window = window.flatMap { $0 > .zero ? $0 : nil }
    self.remaining = remaining.map { Swift.max(0, $0) }
    self.resetsIn = resetsIn.map(Self.clamped)
    self.retryAfter = retryAfter.map(Self.clamped)
  }

  /// Whether the response told nothing about the quota.
  public var isEmpty: Bool {
    quota == nil && window == nil && remaining == nil && resetsIn == nil && retryAfter == nil
  }

  /// `duration` within `0 ... maximumDelay`.
  static func clamped(_ duration: Duration) -> Duration {
    Swift.min(Swift.max(duration, .zero), maximumDelay)
  }

  /// Such as `"q=100 w=60 s r=50 t=30 s"`, naming only the members told.
  public var description: String {
    var parts: [String] = []
    if let quota { parts.append("q=\(quota)") }
    if let window { parts.append("w=\(window.paceDescription)") }
    if let remaining { parts.append("r=\(remaining)") }
    if let resetsIn { parts.append("t=\(resetsIn.paceDescription)") }
    if let retryAfter { parts.append("retry after \(retryAfter.paceDescription)") }
    return parts.isEmpty ? "nothing told" : parts.joined(separator: " ")
  }
}
