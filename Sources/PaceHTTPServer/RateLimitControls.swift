#if Hummingbird || Vapor
import Logging
import Metrics
import NIOCore
import Pace

/// How a framework reads a request's client: its connection's peer, and the field lines of a
/// forwarding header (read only for a trusted proxy's connection).
package struct ClientReader<Input>: Sendable {
  package let peer: @Sendable (Input) -> SocketAddress?
  package let forwarded: @Sendable (Input, String) -> [String]

  package init(
    peer: @escaping @Sendable (Input) -> SocketAddress?, forwarded: @escaping @Sendable (Input, String) -> [String]
  ) {
    self.peer = peer
    self.forwarded = forwarded
  }
}

/// What an operator sets on a middleware at run time, around its policies' decisions: the
/// exemptions and blocks read before any limiter is asked, the near-limit hook called after.
package struct RateLimitControls: Sendable {
  /// One policy's share: its near-limit signals and its counters of exempted and blocked requests.
  package struct Policy: Sendable {
    let nearLimit: NearLimitTracker
    let exempted: Counter
    let blocked: Counter
    /// The requests the policy limited in shadow and let through.
    let shadowLimited: Counter

    package init(name: String, threshold: NearLimitThreshold, metricsFactory: any MetricsFactory) {
      nearLimit = NearLimitTracker(policy: name, threshold: threshold, metricsFactory: metricsFactory)
      func counter(_ outcome: String) -> Counter {
        Counter(
          label: "pace_http_rate_limit_responses_total", dimensions: [("policy", name), ("outcome", outcome)],
          factory: metricsFactory)
      }
      exempted = counter("exempted")
      blocked = counter("blocked")
      shadowLimited = Counter(
        label: "pace_http_rate_limit_shadow_limited_total", dimensions: [("policy", name)], factory: metricsFactory)
    }
  }

  package let exemptions: RateLimitExemptions?
  package let blocks: RateLimitBlocks<String>?
  package let onNearLimit: (@Sendable (NearLimitSignal) -> Void)?
  /// Which refusals are enforced; nil enforces every one.
  package let shadowMode: RateLimitShadowMode?
  /// The wall clock the blocks are read on: the system's, or a test's.
  let unixTime: @Sendable () -> UnixTime
  /// The blocks already logged, so that each is logged once per instance, not once per request.
  let loggedBlocks = ReportedOnce(maximumRemembered: 10_000)

  /// - Parameter unixTime: The wall clock the blocks are read on; the system's by default.
  package init(
    exemptions: RateLimitExemptions? = nil, blocks: RateLimitBlocks<String>? = nil,
    onNearLimit: (@Sendable (NearLimitSignal) -> Void)? = nil, shadowMode: RateLimitShadowMode? = nil,
    unixTime: @escaping @Sendable () -> UnixTime = { UnixTime.now }
  ) {
    self.exemptions = exemptions
    self.blocks = blocks
    self.onNearLimit = onNearLimit
    self.shadowMode = shadowMode
    self.unixTime = unixTime
  }

  /// Whether a request is screened before its decisions: false for a middleware with neither
  /// exemptions nor blocks, whose requests then cost nothing more.
  package var screens: Bool { exemptions != nil || blocks != nil }
}

/// Remembers what was reported, by a 64-bit hash, in two generations of at most half the maximum
/// each: a thing forgotten (the older generation dropped) may be reported once more.
final class ReportedOnce: Sendable {
  private struct Memory {
    var newer: Set<Int> = []
    var older: Set<Int> = []
  }

  private let memory = LockedState(Memory())
  private let generation: Int

  init(maximumRemembered: Int) {
    generation = max(1, maximumRemembered / 2)
  }

  /// Whether `hash` is new: true once, until it is forgotten.
  func isNew(_ hash: Int) -> Bool {
    memory.withLock { memory in
      guard !memory.newer.contains(hash), !memory.older.contains(hash) else { return false }
      memory.newer.insert(hash)
      if memory.newer.count >= generation {
        memory.older = memory.newer
        memory.newer = []
      }
      return true
    }
  }
}

extension RateLimitGate {
  /// The answer to a request before any decision: a `429` for a blocked key, or the request let
  /// through for an exempt one (nil if neither); a key exempt in one policy alone is taken out of
  /// `charges`, so that policy lets the request through.
  ///
  /// Blocks come first: an exempt key or address that is blocked is refused.
  ///
  /// - Parameters:
  ///   - charges: One per policy, in order.
  ///   - clientAddress: The request's client's address, read only for exempt ranges.
  ///   - clientKey: The key of the request's client's address (`ip:…`), read only for blocks.
  package func screen(
    _ charges: inout [Charge], clientAddress: () -> IPAddress?, clientKey: () -> String?
  ) -> RateLimitOutcome? {
    if let blocks = controls.blocks, let blocked = blocked(charges, blocks: blocks, clientKey: clientKey) {
      return blocked
    }
    guard let exemptions = controls.exemptions?.snapshot else { return nil }
    var exempt = !exemptions.ranges.isEmpty && clientAddress().map(exemptions.exempts(address:)) == true
    if !exempt, !exemptions.keys.isEmpty {
      exempt = charges.contains { $0.key.map(exemptions.exempts(key:)) ?? false }
    }
    if exempt {
      for policy in policies { policy.controls.exempted.increment() }
      return .proceed(fields: [])
    }
    guard !exemptions.keysByPolicy.isEmpty else { return nil }
    for index in charges.indices {
      guard let key = charges[index].key, exemptions.exempts(key: key, inPolicy: policies[index].name) else {
        continue
      }
      policies[index].controls.exempted.increment()
      charges[index] = Charge(key: nil, cost: charges[index].cost)
    }
    return nil
  }

  /// The `429` for the first of the request's keys that is blocked, each policy's in order and
  /// then its client's address; nil if none is.
  private func blocked(
    _ charges: [Charge], blocks: RateLimitBlocks<String>, clientKey: () -> String?
  ) -> RateLimitOutcome? {
    let now = controls.unixTime()
    for (index, charge) in charges.enumerated() {
      guard let key = charge.key, let end = blocks.blockedUntil(for: key, now: now) else { continue }
      return refuse(key, until: end, now: now, policy: index)
    }
    // The address is blocked whatever the policies count: the first policy answers for it.
    guard let key = clientKey(), let end = blocks.blockedUntil(for: key, now: now) else { return nil }
    return refuse(key, until: end, now: now, policy: 0)
  }

  /// The `429` for `key`, blocked until `end`: the policy's members (its limit for the key, and
  /// `r=0` with `t` the seconds until the block ends), `Retry-After` the same seconds, and a body
  /// that says when, in UTC. Logged once per block.
  private func refuse(_ key: String, until end: UnixTime, now: UnixTime, policy index: Int) -> RateLimitOutcome {
    let policy = policies[index]
    let retryAfter = end - now
    let limiterKey = longKeys.limiterKey(for: key)
    let fields = policy.fields(limit: policy.limit(for: key), key: limiterKey)
    let refused = RateLimitFields.tooManyRequests(states: [(fields, .limited(retryAfter: retryAfter))], deniedBy: 0)
    policy.controls.blocked.increment()
    var hasher = Hasher()
    hasher.combine(key)
    hasher.combine(end)
    if controls.loggedBlocks.isNew(hasher.finalize()) {
      // Never the key itself (an API key): the first 16 digits of its SHA-256, as the traces have.
      logger.info(
        "rate limit: a blocked key was refused",
        metadata: [
          "pace.policy": "\(policy.name)", "pace.key.hash": "\(SHA256.hex(key).prefix(16))",
          "pace.blocked_until": "\(Self.rfc3339(end))",
        ])
    }
    let seconds = RateLimitFields.wholeSeconds(retryAfter)
    let detail = "Blocked (policy \(fields.quotedName)) until \(Self.rfc3339(end)): retry after \(seconds) s"
    return .respond(
      PlainTextResponse(
        status: 429, fields: refused.fields.filter { $0.name != "Content-Type" }, body: detail + "\n",
        problem: ProblemDetails(.quotaExceeded, status: 429, detail: detail, violatedPolicies: [policy.name])))
  }

  /// `end` as RFC 3339 in UTC, to the second, rounded up (a client that comes back then is let
  /// through): `2026-11-28T17:36:07Z`.
  package static func rfc3339(_ end: UnixTime) -> String {
    let nanoseconds = end.nanosecondsSinceEpoch
    // Rounded up: a division truncates towards zero, up for an instant before the epoch.
    var seconds = nanoseconds / 1_000_000_000
    if nanoseconds > 0, nanoseconds % 1_000_000_000 != 0 { seconds += 1 }
    var days = seconds / 86_400
    var secondOfDay = seconds % 86_400
    if secondOfDay < 0 {
      secondOfDay += 86_400
      days -= 1
    }
    // Howard Hinnant's civil_from_days: the proleptic Gregorian date of a day count since 1970.
    let shifted = days + 719_468
    let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
    let dayOfEra = shifted - era * 146_097
    let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
    let monthIndex = (5 * dayOfYear + 2) / 153
    let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
    let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
    let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
    func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
    let yearText =
      year >= 0 && year < 10_000 ? String(repeating: "0", count: 4 - String(year).count) + "\(year)" : "\(year)"
    return
      "\(yearText)-\(two(month))-\(two(day))T\(two(secondOfDay / 3600)):\(two(secondOfDay / 60 % 60)):\(two(secondOfDay % 60))Z"
  }

  /// Counts a near-limit signal of the allowed decision that left `remaining` for `key` (the key
  /// the limiter counts) under `limit`, after `cost` was taken, and calls the hook, outside every
  /// lock.
  func signalNearLimit(_ policy: Policy, key: String, limit: RateLimit, cost: Int, remaining: Int) {
    guard let signal = policy.controls.nearLimit.signal(key: key, limit: limit, cost: cost, remaining: remaining)
    else { return }
    controls.onNearLimit?(signal)
  }
}
/// What the screening before the decisions makes of a request: the answer, or what to decide.
package enum Admission<Charges: Sendable>: Sendable {
  /// Answer with this, without a decision: a blocked request, an exempt one.
  case answered(RateLimitOutcome)
  /// Decide these charges.
  case decide(Charges)
}

extension RateLimitMiddlewareState {
  /// The key of `input`'s client address: `ip:…`.
  package func clientKey(_ input: Input, client: ClientReader<Input>) -> String? {
    clientAddress.key(peer: client.peer(input)) { client.forwarded(input, clientAddress.forwardingHeaderName) }
  }

  /// The charge of a middleware of one policy, after its exemptions and blocks.
  package func admitOne(_ input: Input, client: ClientReader<Input>) -> Admission<RateLimitGate.Charge> {
    let charge = charge(0, input) { clientKey($0, client: client) }
    guard gate.controls.screens else { return .decide(charge) }
    var charges = [charge]
    if let answer = screen(&charges, input, client: client) { return .answered(answer) }
    return .decide(charges[0])
  }

  /// Every policy's charge, after the exemptions and blocks.
  package func admit(_ input: Input, client: ClientReader<Input>) -> Admission<[RateLimitGate.Charge]> {
    var charges = policies.indices.map { index in charge(index, input) { clientKey($0, client: client) } }
    guard gate.controls.screens else { return .decide(charges) }
    if let answer = screen(&charges, input, client: client) { return .answered(answer) }
    return .decide(charges)
  }

  private func screen(
    _ charges: inout [RateLimitGate.Charge], _ input: Input, client: ClientReader<Input>
  ) -> RateLimitOutcome? {
    gate.screen(
      &charges,
      clientAddress: {
        clientAddress.ipAddress(peer: client.peer(input)) {
          client.forwarded(input, clientAddress.forwardingHeaderName)
        }
      },
      clientKey: { clientKey(input, client: client) })
  }
}
#endif
