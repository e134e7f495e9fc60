import Pace

/// What a ``ServerPacedLimiter`` believes about one key's server quota at one instant: what the
/// server told (and the limiter learned from it), what is left, what holds the key, and what is
/// in flight. Read it with ``ServerPacedLimiter/knowledge(for:)``; drop it with
/// ``ServerPacedLimiter/forget(_:)``.
public struct ServerPacingKnowledge: Sendable, Hashable, CustomStringConvertible {
  /// Whether a response came for the key (whatever it said); until then one request probes it.
  public var hasAnswered: Bool
  /// The requests the server allows per window (`q`, or learned from refusals).
  public var quota: Int?
  /// The window: as the server said, or learned from its resets or refusals.
  public var window: Duration?
  /// What the server has left for this client, less the requests in flight and started since.
  public var remaining: Int?
  /// How long until the quota is whole again, as the server said; nil when unknown or passed.
  public var resetsIn: Duration?
  /// How long `Retry-After` still holds the key; nil when it does not.
  public var blockedFor: Duration?
  /// How long until a waiting request is sent to probe a key that what was told holds beyond
  /// the limiter's `probeAfter` (zero: as soon as nothing is in flight); nil when nothing holds it
  /// that long.
  public var probeIn: Duration?
  /// Whether the request in flight is such a probe.
  public var isProbing: Bool
  /// The requests started and not yet answered.
  public var inFlight: Int
  /// The requests waiting for their turn.
  public var waiting: Int

  /// Knowledge with each member as given.
  public init(
    hasAnswered: Bool, quota: Int?, window: Duration?, remaining: Int?, resetsIn: Duration?, blockedFor: Duration?,
    probeIn: Duration?, isProbing: Bool, inFlight: Int, waiting: Int
  ) {
    self.hasAnswered = hasAnswered
    self.quota = quota
    self.window = window
    self.remaining = remaining
    self.resetsIn = resetsIn
    self.blockedFor = blockedFor
    self.probeIn = probeIn
    self.isProbing = isProbing
    self.inFlight = inFlight
    self.waiting = waiting
  }

  /// Such as `"answered q=100 w=60 s r=12 t=30 s, 2 in flight, 0 waiting"`.
  public var description: String {
    var parts = [hasAnswered ? "answered" : "never answered"]
    if let quota { parts.append("q=\(quota)") }
    if let window { parts.append("w=\(window.paceDescription)") }
    if let remaining { parts.append("r=\(remaining)") }
    if let resetsIn { parts.append("t=\(resetsIn.paceDescription)") }
    if let blockedFor { parts.append("blocked for \(blockedFor.paceDescription)") }
    if let probeIn { parts.append("probe in \(probeIn.paceDescription)") }
    if isProbing { parts.append("probing") }
    return parts.joined(separator: " ") + ", \(inFlight) in flight, \(waiting) waiting"
  }
}
