#if Hummingbird || Vapor
import Pace

/// Keys and client address ranges that a rate-limit middleware never limits (an allow list): the
/// operator's own health checks, a partner's API key. Set and changed at run time, from any
/// thread; every request reads the exemptions in force when it arrives.
///
/// ```swift
/// let exemptions = try RateLimitExemptions(keys: ["key:partner-1"], ranges: ["10.0.0.0/8", "fd00::/8"])
/// let middleware = RateLimitMiddleware(policies: [perAddress, perKey], exemptions: exemptions)
/// // Later, while the server runs:
/// exemptions.exempt(key: "key:partner-2")
/// try exemptions.exempt(range: "192.0.2.0/24")
/// exemptions.removeExemption(key: "key:partner-1")
/// ```
///
/// A request is exempt when its client's address (the middleware's `clientAddress`) is in one of
/// the ranges, or when any of its policies counts it against an exempt key: it then passes every
/// policy of the middleware without a decision (no limiter or store is asked, nothing is taken),
/// and its response carries no rate-limit fields. A key exempt in one policy only
/// (``exempt(key:inPolicy:)``) lets the request through that policy unlimited, as a policy whose
/// key closure answers nil does; the other policies decide as usual. A key is compared as the
/// request sent it, before a long key is hashed. A blocked key (``RateLimitBlocks``) stays
/// blocked: a block is refused before the exemptions are read.
///
/// Each exempt request is counted in `pace_http_rate_limit_responses_total` with
/// `outcome="exempted"`, once per policy it passed without a decision.
public final class RateLimitExemptions: Sendable {
  /// What the middleware reads for each request: a copy, taken under the lock, read outside it.
  package struct Snapshot: Sendable {
    package var keys: Set<String> = []
    package var keysByPolicy: [String: Set<String>] = [:]
    package var ranges: [IPAddressRange] = []

    /// Whether `address` is in an exempt range.
    package func exempts(address: IPAddress) -> Bool {
      ranges.contains { $0.contains(address) }
    }

    /// Whether `key` is exempt in every policy.
    package func exempts(key: String) -> Bool {
      keys.contains(key)
    }

    /// Whether `key` is exempt in the policy named `policy` alone.
    package func exempts(key: String, inPolicy policy: String) -> Bool {
      keysByPolicy[policy]?.contains(key) ?? false
    }
  }

  private let state: LockedState<Snapshot>

  /// Exemptions of `keys`, in every policy; no range. Add ranges with ``exempt(range:)``.
  ///
  /// - Parameter keys: Keys exempt in every policy, as a policy's key closure answers them.
  public init(keys: [String] = []) {
    state = LockedState(Snapshot(keys: Set(keys)))
  }

  /// Exemptions of `keys`, in every policy, and of the client addresses in `ranges`.
  ///
  /// - Parameters:
  ///   - keys: Keys exempt in every policy.
  ///   - ranges: CIDR ranges (`10.0.0.0/8`, `2001:db8::/32`) or single addresses, IPv4 or IPv6.
  /// - Throws: ``RateLimitMiddlewareError/invalidSetting(name:value:rule:)`` naming the first entry
  ///   that is no address or range.
  public init(keys: [String] = [], ranges: [String]) throws(RateLimitMiddlewareError) {
    state = LockedState(Snapshot(keys: Set(keys), ranges: try Self.parse(ranges)))
  }

  /// The exemptions in force now, for one request.
  package var snapshot: Snapshot { state.withLock { $0 } }

  /// The keys exempt in every policy.
  public var keys: Set<String> { state.withLock { $0.keys } }

  /// The keys exempt in the policy named `policy` alone.
  public func keys(inPolicy policy: String) -> Set<String> {
    state.withLock { $0.keysByPolicy[policy] ?? [] }
  }

  /// The exempt ranges, as CIDR text: `10.0.0.0/8`, or an address alone for a range of one.
  public var ranges: [String] { state.withLock { $0.ranges.map(\.description) } }

  /// Exempts `key` in every policy: a request that any policy counts against it is not limited.
  public func exempt(key: String) {
    state.withLock { _ = $0.keys.insert(key) }
  }

  /// Exempts `key` in the policy named `policy` alone: that policy lets a request counted against
  /// it through unlimited; the others decide as usual.
  public func exempt(key: String, inPolicy policy: String) {
    state.withLock { _ = $0.keysByPolicy[policy, default: []].insert(key) }
  }

  /// Exempts every client address in `range`.
  ///
  /// - Parameter range: A CIDR range (`10.0.0.0/8`, `2001:db8::/32`) or a single address.
  /// - Throws: ``RateLimitMiddlewareError/invalidSetting(name:value:rule:)`` if `range` is no
  ///   address or range; nothing changes then.
  public func exempt(range: String) throws(RateLimitMiddlewareError) {
    let parsed = try Self.parse(range)
    state.withLock { state in
      if !state.ranges.contains(parsed) { state.ranges.append(parsed) }
    }
  }

  /// Lifts `key`'s exemption in every policy (not its exemptions in single policies).
  ///
  /// - Returns: Whether `key` was exempt.
  @discardableResult
  public func removeExemption(key: String) -> Bool {
    state.withLock { $0.keys.remove(key) != nil }
  }

  /// Lifts `key`'s exemption in the policy named `policy`.
  ///
  /// - Returns: Whether `key` was exempt there.
  @discardableResult
  public func removeExemption(key: String, inPolicy policy: String) -> Bool {
    state.withLock { state in
      guard state.keysByPolicy[policy]?.remove(key) != nil else { return false }
      if state.keysByPolicy[policy]?.isEmpty == true { state.keysByPolicy[policy] = nil }
      return true
    }
  }

  /// Lifts the exemption of `range`: the same range, however it is written (`10.1.2.3/8` is
  /// `10.0.0.0/8`). An address within a range still exempted stays exempt.
  ///
  /// - Returns: Whether the range was exempt.
  /// - Throws: ``RateLimitMiddlewareError/invalidSetting(name:value:rule:)`` if `range` is no
  ///   address or range.
  @discardableResult
  public func removeExemption(range: String) throws(RateLimitMiddlewareError) -> Bool {
    let parsed = try Self.parse(range)
    return state.withLock { state in
      guard let index = state.ranges.firstIndex(of: parsed) else { return false }
      state.ranges.remove(at: index)
      return true
    }
  }

  /// Replaces every exemption at once (a reloaded configuration): the keys exempt in every
  /// policy, those exempt in single policies, and the ranges. Every range is parsed before
  /// anything changes.
  ///
  /// - Throws: ``RateLimitMiddlewareError/invalidSetting(name:value:rule:)`` naming the first
  ///   entry that is no address or range; nothing changes then.
  public func replace(
    keys: [String], ranges: [String], keysInPolicies: [String: [String]] = [:]
  ) throws(RateLimitMiddlewareError) {
    let replacement = Snapshot(
      keys: Set(keys), keysByPolicy: keysInPolicies.filter { !$0.value.isEmpty }.mapValues { Set($0) },
      ranges: try Self.parse(ranges))
    state.withLock { $0 = replacement }
  }

  private static func parse(_ ranges: [String]) throws(RateLimitMiddlewareError) -> [IPAddressRange] {
    var parsed: [IPAddressRange] = []
    for text in ranges {
      let range = try parse(text)
      if !parsed.contains(range) { parsed.append(range) }
    }
    return parsed
  }

  private static func parse(_ text: String) throws(RateLimitMiddlewareError) -> IPAddressRange {
    guard let range = IPAddressRange(text) else {
      throw .invalidSetting(
        name: "RateLimitExemptions.range", value: text,
        rule: "must be an IP address or a CIDR range, such as 10.0.0.0/8 or 2001:db8::/32")
    }
    return range
  }
}

/// A setting of a rate-limit middleware that it cannot use. Thrown where the setting is made,
/// never at a request: settings are read from configuration (a file, the environment) at startup
/// or while the server runs, where a trap would take the server down.
public enum RateLimitMiddlewareError: Error, Sendable, Hashable, CustomStringConvertible {
  /// A setting is out of its range: an exempt range that is no address or CIDR range, a
  /// near-limit threshold outside `0 < threshold ≤ 1`.
  ///
  /// `name` is the setting's owner and path (`RateLimitExemptions.range`), `value` the value given,
  /// `rule` what it must be; the description reads
  /// `RateLimitExemptions: range must be an IP address or a CIDR range, … (got "10.0.0/8")`.
  case invalidSetting(name: String, value: String, rule: String)

  public var description: String {
    switch self {
    case .invalidSetting(let name, let value, let rule):
      // A value from a file may be anything: quoted, and cut short.
      let shown = value.count > 128 ? String(value.prefix(128)) + "…" : value
      guard let dot = name.firstIndex(of: ".") else { return "\(name) \(rule) (got \(shown.debugDescription))" }
      return "\(name[..<dot]): \(name[name.index(after: dot)...]) \(rule) (got \(shown.debugDescription))"
    }
  }
}
#endif
