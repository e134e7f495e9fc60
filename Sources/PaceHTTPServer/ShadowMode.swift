#if Hummingbird || Vapor
import Logging
import Pace

/// Which refusals of a rate-limit middleware are enforced, and which only observed: a new limit
/// run in shadow before it refuses anyone, then enforced on a growing share of keys. Set and
/// changed at run time, from any thread, without a restart; every request reads the settings in
/// force when it is decided.
///
/// ```swift
/// let shadow = RateLimitShadowMode()  // everything enforced, as without it
/// let middleware = RateLimitMiddleware(policies: [perAddress, perKey], shadowMode: shadow)
/// // While the server runs: the new per-key policy observed only, then enforced for 10 % of keys.
/// try shadow.setEnforcedFraction(0, inPolicy: "per-key")
/// try shadow.setEnforcedFraction(0.1, inPolicy: "per-key")
/// // The whole middleware in shadow: nothing refused by any policy.
/// try shadow.setEnforcedFraction(0)
/// ```
///
/// In shadow a policy's decisions are made, charged, counted and logged as they would be; a
/// request that a policy in shadow limits is let through that policy, and the policies after it
/// decide as if it had allowed it (one of them, enforced, may still refuse it). Such a request is
/// counted in `pace_http_rate_limit_responses_total` with `outcome="limited"` for that policy, as
/// an enforced refusal is, and in `pace_http_rate_limit_shadow_limited_total` with the dimension
/// `policy`: the refusals that were not enforced. At most one log line per 10 s reports them.
/// The response carries the fields of every decision made for it, the shadow policy's member with
/// `r=0` and `t` until the key would pass (the draft lets a server serve a request whatever the
/// fields say), but no `Retry-After`. A limiter that cannot decide, a key or cost refused as
/// invalid, and a blocked key are no policy's refusal: they are answered as without shadow mode.
///
/// **The enforced fraction.** Each policy enforces its refusals for a fraction of its keys, in
/// `0…1`: the smaller of the middleware's (``enforcedFraction``) and the policy's own
/// (``enforcedFraction(inPolicy:)``), both 1 unless set. A key is enforced when a hash of the
/// policy's name and the key, a fixed function of the two (FNV-1a, not Swift's per-process seeded
/// `Hasher`), falls below the fraction, to a millionth: the same keys on every request, on every
/// instance and in every test run, and a key enforced at one fraction stays enforced at any
/// larger one (``enforces(key:inPolicy:)`` says whether one is). The key is the one the policy
/// counts: as the request sent it, or a long key's digest.
public final class RateLimitShadowMode: Sendable {
  /// What the middleware reads for each request: a copy, taken under the lock, read outside it.
  package struct Snapshot: Sendable {
    /// The middleware's enforced fraction, in millionths.
    var middleware: Int64 = EnforcedFraction.whole
    /// Each policy's own, in millionths, for the policies that have one.
    var byPolicy: [String: Int64] = [:]

    /// Whether the policy named `policy` enforces its refusals of `key`.
    package func enforces(key: String, inPolicy policy: String) -> Bool {
      let millionths = min(middleware, byPolicy[policy] ?? EnforcedFraction.whole)
      if millionths >= EnforcedFraction.whole { return true }
      if millionths <= 0 { return false }
      return EnforcedFraction.bucket(key: key, policy: policy) < millionths
    }
  }

  private let state: LockedState<Snapshot>
  private let logger: Logger

  /// A control that enforces every refusal, as a middleware without one does, until it is set.
  ///
  /// - Parameter logger: Where each change is logged; silent by default (pass the application's).
  public init(logger: Logger = silentRateLimitLogger) {
    state = LockedState(Snapshot())
    self.logger = logger
  }

  /// A control with the middleware enforcing `enforcedFraction` of its refusals and each policy
  /// named in `policies` its own fraction: settings read from configuration at startup.
  ///
  /// - Parameters:
  ///   - enforcedFraction: The share of keys whose refusals are enforced, in `0…1`: 1 enforces
  ///     every refusal, 0 puts the whole middleware in shadow.
  ///   - policies: Fractions of policies by name, in `0…1`; none by default.
  ///   - logger: Where each change is logged; silent by default.
  /// - Throws: ``RateLimitMiddlewareError/invalidSetting(name:value:rule:)`` for a fraction
  ///   outside `0…1` (NaN included).
  public convenience init(
    enforcedFraction: Double, policies: [String: Double] = [:], logger: Logger = silentRateLimitLogger
  ) throws(RateLimitMiddlewareError) {
    var snapshot = Snapshot(middleware: try EnforcedFraction.millionths(enforcedFraction))
    for (policy, fraction) in policies { snapshot.byPolicy[policy] = try EnforcedFraction.millionths(fraction) }
    self.init(logger: logger)
    state.withLock { $0 = snapshot }
  }

  /// The settings in force now, for one request.
  package var snapshot: Snapshot { state.withLock { $0 } }

  /// The middleware's enforced fraction, in `0…1`: a bound on every policy's.
  public var enforcedFraction: Double { EnforcedFraction.share(state.withLock { $0.middleware }) }

  /// The enforced fraction set for the policy named `policy`, in `0…1`; 1 for one without its own.
  /// The policy enforces the smaller of this and ``enforcedFraction``.
  public func enforcedFraction(inPolicy policy: String) -> Double {
    EnforcedFraction.share(state.withLock { $0.byPolicy[policy] } ?? EnforcedFraction.whole)
  }

  /// Sets the middleware's enforced fraction: 0 puts every policy in shadow, 1 enforces every
  /// policy as far as its own fraction says.
  ///
  /// - Throws: ``RateLimitMiddlewareError/invalidSetting(name:value:rule:)`` for a fraction
  ///   outside `0…1`; the setting is then unchanged.
  public func setEnforcedFraction(_ fraction: Double) throws(RateLimitMiddlewareError) {
    let millionths = try EnforcedFraction.millionths(fraction)
    state.withLock { $0.middleware = millionths }
    logger.notice(
      "rate limit: enforced fraction set for every policy",
      metadata: ["pace.enforced_fraction": "\(EnforcedFraction.share(millionths))"])
  }

  /// Sets the enforced fraction of the policy named `policy`: 0 puts it in shadow.
  ///
  /// - Throws: ``RateLimitMiddlewareError/invalidSetting(name:value:rule:)`` for a fraction
  ///   outside `0…1`; the setting is then unchanged.
  public func setEnforcedFraction(_ fraction: Double, inPolicy policy: String) throws(RateLimitMiddlewareError) {
    let millionths = try EnforcedFraction.millionths(fraction)
    state.withLock { $0.byPolicy[policy] = millionths }
    logger.notice(
      "rate limit: enforced fraction set for a policy",
      metadata: ["pace.policy": "\(policy)", "pace.enforced_fraction": "\(EnforcedFraction.share(millionths))"])
  }

  /// Removes the policy's own fraction: it then enforces the middleware's.
  public func removeEnforcedFraction(inPolicy policy: String) {
    state.withLock { _ = $0.byPolicy.removeValue(forKey: policy) }
    logger.notice("rate limit: enforced fraction removed for a policy", metadata: ["pace.policy": "\(policy)"])
  }

  /// Whether the policy named `policy` enforces its refusals of `key` now: false for a key in
  /// shadow, whose requests that policy lets through.
  ///
  /// - Parameter key: The key as the policy counts it (a long key's digest under
  ///   ``LongKeyHandling/hash``).
  public func enforces(key: String, inPolicy policy: String) -> Bool {
    snapshot.enforces(key: key, inPolicy: policy)
  }
}

/// An enforced fraction held exactly, in millionths, and the hash that places a key below or
/// above it.
enum EnforcedFraction {
  static let whole: Int64 = 1_000_000

  /// - Throws: ``RateLimitMiddlewareError/invalidSetting(name:value:rule:)`` for a fraction
  ///   outside `0…1` (NaN included).
  static func millionths(_ fraction: Double) throws(RateLimitMiddlewareError) -> Int64 {
    guard fraction.isFinite, fraction >= 0, fraction <= 1 else {
      throw .invalidSetting(
        name: "RateLimitShadowMode.enforcedFraction", value: "\(fraction)",
        rule: "must be a share of keys in 0 ≤ fraction ≤ 1")
    }
    return Int64((fraction * Double(whole)).rounded())
  }

  static func share(_ millionths: Int64) -> Double { Double(millionths) / Double(whole) }

  /// The key's place in `0..<1_000_000` for the policy: FNV-1a over the policy's name, a 0 byte
  /// and the key, then MurmurHash3's finaliser, which spreads FNV's low bits.
  static func bucket(key: String, policy: String) -> Int64 {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    func add(_ byte: UInt8) {
      hash ^= UInt64(byte)
      hash &*= 0x0000_0100_0000_01b3
    }
    for byte in policy.utf8 { add(byte) }
    add(0)
    for byte in key.utf8 { add(byte) }
    hash ^= hash >> 33
    hash &*= 0xff51_afd7_ed55_8ccd
    hash ^= hash >> 33
    hash &*= 0xc4ce_b9fe_1a85_ec53
    hash ^= hash >> 33
    return Int64(hash % UInt64(whole))
  }
}
#endif
