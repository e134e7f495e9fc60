import Pace
import RawStructuredFieldValues

/// The rate-limit fields of one response, parsed: the IETF `RateLimit-Policy` and `RateLimit`
/// (draft-ietf-httpapi-ratelimit-headers -10 and -11, and the editor's copy after -11: see
/// ``DraftVersion``; Structured Fields lists), `Retry-After`, the earlier drafts'
/// `RateLimit-Limit`/`-Remaining`/`-Reset`, and the common `X-RateLimit-Limit`, `-Remaining`,
/// `-Reset`, `-Used` and `-Resource`.
///
/// ```swift
/// let fields = ServerRateLimitFields(parsing: head, receivedAt: .seconds(1_700_000_000))
/// limiter.record(fields.quota, for: origin)
/// ```
///
/// Every field is hostile input. A value that does not parse is ignored, alone: the other fields
/// still count. A number too large for its meaning is clamped (every delay to
/// `ServerQuota/maximumDelay`), a negative one is ignored. A field sent several times with
/// different values counts with its most cautious value: the smallest quota or remaining, the
/// longest reset or `Retry-After`.
///
/// - `X-RateLimit-Reset` (and `RateLimit-Reset`) is seconds from now, or a Unix time in seconds
///   when above 10⁹ (as GitHub sends it: 10⁹ seconds from now is 31 years away, and 10⁹ as a Unix
///   time is in 2001). Decimals are accepted.
/// - An HTTP date (`Retry-After`, an epoch reset) is read against the response's own `Date` field
///   when it has a valid one, so that a client whose clock is off waits what the server meant;
///   against `receivedAt` otherwise.
public struct ServerRateLimitFields: Sendable, Hashable {
  /// The revisions of draft-ietf-httpapi-ratelimit-headers whose `RateLimit` parameters the
  /// parser reads. They name the same things differently; `RateLimit-Policy` is spelled alike in
  /// all of them (`q`, `qu`, `w`, `pk`).
  ///
  /// By default the parser reads every revision: an item is read by the one whose required
  /// parameter it carries (`r`, or `a`); the other's names are comments to it. An item that
  /// carries both is read both ways, and the more cautious reading counts: the fewer available,
  /// the longer window.
  public enum DraftVersion: Sendable, Hashable, CaseIterable {
    /// draft -10 and draft -11, which spell the field alike: `r`, the available quota ("remaining"
    /// in -10), and `t`, the effective window ("reset" in -10), in seconds. Names are Strings.
    case draft11
    /// The working group's editor's copy after draft -11, not published as a draft: `a`, the
    /// available quota, and `w`, the effective window, in seconds. Names are Strings or Tokens.
    case editorsCopy
  }

  /// What a policy's quota counts (`qu`, draft -10 and -11, section 3.1.2): a name in the
  /// RateLimit Quota Units registry, or any other name, kept as sent.
  public struct QuotaUnit: Sendable, Hashable, RawRepresentable, CustomStringConvertible {
    /// The unit's name, as sent.
    public var rawValue: String

    /// The unit named `rawValue`.
    public init(rawValue: String) {
      self.rawValue = rawValue
    }

    /// Requests: the default when a policy names no unit.
    public static let requests = QuotaUnit(rawValue: "requests")
    /// Bytes of content processed by the server.
    public static let contentBytes = QuotaUnit(rawValue: "content-bytes")
    /// Requests processed at the same time.
    public static let concurrentRequests = QuotaUnit(rawValue: "concurrent-requests")

    /// The unit's name.
    public var description: String { rawValue }

    /// Whether the unit counts requests over a window: `requests`, or `request` as the draft's
    /// registry (-11 section 10.3) spells it.
    var countsRequests: Bool { rawValue == "requests" || rawValue == "request" }
  }

  /// One member of `RateLimit-Policy`: a policy's name, quota and window.
  public struct Policy: Sendable, Hashable {
    /// The policy's name.
    public var name: String
    /// The quota units allowed per window (`q`): requests unless ``quotaUnit`` says otherwise.
    public var quota: Int
    /// The window (`w`); `nil` when not sent.
    public var window: Duration?
    /// What ``quota`` counts (`qu`, draft -10 and -11); `nil` when not sent, which means requests.
    public var quotaUnit: QuotaUnit?
    /// The partition key the server counts the request against (`pk`, a Byte Sequence, draft -10
    /// and -11); `nil` when not sent, or sent as anything but a valid Byte Sequence.
    public var partitionKey: [UInt8]?

    /// A policy member.
    public init(name: String, quota: Int, window: Duration?) {
      self.name = name
      self.quota = quota
      self.window = window
    }

    /// A policy member with a quota unit and a partition key.
    ///
    /// - Parameters:
    ///   - name: The policy's name.
    ///   - quota: The quota units allowed per window.
    ///   - window: The window.
    ///   - quotaUnit: What `quota` counts; `nil` for requests, not sent.
    ///   - partitionKey: The partition key.
    public init(
      name: String, quota: Int, window: Duration?, quotaUnit: QuotaUnit? = nil, partitionKey: [UInt8]? = nil
    ) {
      self.name = name
      self.quota = quota
      self.window = window
      self.quotaUnit = quotaUnit
      self.partitionKey = partitionKey
    }

    /// Whether the quota counts requests over a window.
    var countsRequests: Bool { quotaUnit?.countsRequests ?? true }
  }

  /// One member of `RateLimit`: a policy's available quota and its effective window.
  public struct State: Sendable, Hashable {
    /// The policy's name.
    public var name: String
    /// The available quota (`r` in draft -10 and -11, `a` in the editor's copy after -11), in the
    /// policy's quota units.
    public var remaining: Int
    /// The effective window: how long the available quota must last, at most until the quota is
    /// whole again (`t` in draft -10 and -11, `w` in the editor's copy); `nil` when not sent.
    public var resetsIn: Duration?
    /// The partition key the server counted the request against (`pk`, a Byte Sequence, draft -10
    /// and -11); `nil` when not sent, or sent as anything but a valid Byte Sequence.
    public var partitionKey: [UInt8]?

    /// A state member.
    public init(name: String, remaining: Int, resetsIn: Duration?) {
      self.name = name
      self.remaining = remaining
      self.resetsIn = resetsIn
    }

    /// A state member with a partition key.
    ///
    /// - Parameters:
    ///   - name: The policy's name.
    ///   - remaining: The available quota.
    ///   - resetsIn: The effective window.
    ///   - partitionKey: The partition key.
    public init(name: String, remaining: Int, resetsIn: Duration?, partitionKey: [UInt8]? = nil) {
      self.name = name
      self.remaining = remaining
      self.resetsIn = resetsIn
      self.partitionKey = partitionKey
    }
  }

  /// The members of `RateLimit-Policy` that parsed, in order.
  public var policies: [Policy] = []
  /// The members of `RateLimit` that parsed, in order.
  public var states: [State] = []
  /// `Retry-After`, as a delay from the response.
  public var retryAfter: Duration?
  /// `X-RateLimit-Limit` (or `RateLimit-Limit`).
  public var limit: Int?
  /// `X-RateLimit-Remaining` (or `RateLimit-Remaining`).
  public var remaining: Int?
  /// `X-RateLimit-Reset` (or `RateLimit-Reset`), as a delay from the response.
  public var resetsIn: Duration?
  /// `X-RateLimit-Used`.
  public var used: Int?
  /// `X-RateLimit-Resource`: which of the server's quotas counted the request (GitHub's `core`,
  /// `search`, …).
  public var resource: String?

  /// The fields of `head`, reading every ``DraftVersion``.
  ///
  /// - Parameters:
  ///   - head: The response's status and fields.
  ///   - unixNow: When the response was received, as a Unix time (since 1970-01-01 UTC): for the
  ///     fields that send a date.
  public init(parsing head: ResponseHead, receivedAt unixNow: Duration) {
    self.init(parsing: head, receivedAt: unixNow, reading: Set(DraftVersion.allCases))
  }

  /// The fields of `head`, reading the `RateLimit` parameters of the draft versions `drafts`.
  ///
  /// - Parameters:
  ///   - head: The response's status and fields.
  ///   - unixNow: When the response was received, as a Unix time (since 1970-01-01 UTC): for the
  ///     fields that send a date.
  ///   - drafts: The versions whose `RateLimit` parameters are read; every version by default.
  public init(parsing head: ResponseHead, receivedAt unixNow: Duration, reading drafts: Set<DraftVersion>) {
    let nowSeconds = unixNow.components.seconds
    // The server's own clock when it has a valid `Date`: its dates are read against it.
    let serverNow = head.values(of: "Date").compactMap { HTTPDate.unixSeconds(parsing: $0, unixNow: nowSeconds) }
    let reference = serverNow.count == 1 ? serverNow[0] : nowSeconds
    policies = Self.policies(head.values(of: "RateLimit-Policy"))
    states = Self.states(head.values(of: "RateLimit"), reading: drafts)
    retryAfter = head.values(of: "Retry-After")
      .compactMap { Self.delay(parsing: $0, referenceUnixSeconds: reference) }.max()
    limit = Self.counts(head, "X-RateLimit-Limit", "RateLimit-Limit").min()
    remaining = Self.counts(head, "X-RateLimit-Remaining", "RateLimit-Remaining").min()
    used = Self.counts(head, "X-RateLimit-Used").max()
    // An epoch reset marks a window's end to the second: read against the receipt's own fraction
    // of a second (a `Date` has none), moved by the server's clock only when the two disagree by
    // more than the `Date`'s own rounding.
    let skew = reference.subtractingReportingOverflow(nowSeconds)
    let resetReference = !skew.overflow && abs(skew.partialValue) > 2 ? unixNow + .seconds(skew.partialValue) : unixNow
    resetsIn = (head.values(of: "X-RateLimit-Reset") + head.values(of: "RateLimit-Reset"))
      .flatMap(Self.listMembers).compactMap { Self.reset(parsing: $0, reference: resetReference) }.max()
    // Names of a few printable characters; several different names say nothing.
    let resources = Set(head.values(of: "X-RateLimit-Resource").flatMap(Self.listMembers))
    resource = resources.count == 1 ? resources.first.flatMap(Self.resourceName) : nil
  }

  /// What the fields say about the quota, for `ServerPacedLimiter/record(_:for:)`.
  ///
  /// With several IETF policies, the quota and window are the policy of the lowest rate (it binds
  /// in the long run), and the remaining and reset are the state with the fewest remaining (it
  /// binds first; the longest reset among equals). Without IETF fields, the `X-RateLimit-*`
  /// fields: `remaining` is `limit - used` when only those are sent.
  ///
  /// Only quotas of requests pace requests: a policy in another ``QuotaUnit`` (content bytes, a
  /// concurrency) is left out, and a state of such a policy (of the same name, compared without
  /// regard to ASCII case) counts only once spent, when no request may go until its window ends.
  public var quota: ServerQuota {
    let otherUnits = policies.filter { !$0.countsRequests }.map(\.name)
    let states = states.filter { state in
      state.remaining == 0 || !otherUnits.contains { ResponseHead.namesMatch($0, state.name) }
    }
    let policy = policies.filter(\.countsRequests).min { lhs, rhs in
      // The lowest rate q/w; a policy without a window counts as the slowest of its quota.
      let left = Double(lhs.quota) / Self.seconds(lhs.window)
      let right = Double(rhs.quota) / Self.seconds(rhs.window)
      return left < right
    }
    let state = states.min { lhs, rhs in
      lhs.remaining != rhs.remaining
        ? lhs.remaining < rhs.remaining : (lhs.resetsIn ?? .zero) > (rhs.resetsIn ?? .zero)
    }
    if policy != nil || state != nil {
      return ServerQuota(
        quota: policy?.quota, window: policy?.window, remaining: state?.remaining, resetsIn: state?.resetsIn,
        retryAfter: retryAfter)
    }
    var remaining = self.remaining
    if remaining == nil, let limit, let used { remaining = max(0, limit - min(used, limit)) }
    return ServerQuota(quota: limit, remaining: remaining, resetsIn: resetsIn, retryAfter: retryAfter)
  }

  private static func seconds(_ window: Duration?) -> Double {
    guard let window else { return .infinity }
    return max(Double(window.components.seconds), 1)
  }

  // MARK: Structured Fields

  /// The members of a Structured Fields list, from all of its lines; empty if it does not parse
  /// (the whole field is then ignored, as RFC 8941 says).
  static func listItems(_ lines: [String]) -> [Item] {
    guard !lines.isEmpty else { return [] }
    let joined = lines.joined(separator: ", ")
    // A sane field is short; a huge one is not parsed at all.
    guard joined.utf8.count <= 16_384 else { return [] }
    var parser = StructuredFieldValueParser(Array(joined.utf8))
    guard let members = try? parser.parseListFieldValue() else { return [] }
    return members.compactMap { member in
      if case .item(let item) = member { return item }
      return nil
    }
  }

  /// A member's name: a String (draft -10 and -11) or a Token (the editor's copy after -11).
  static func name(of item: Item) -> String? {
    switch item.rfc9651BareItem {
    case .string(let name), .token(let name): name
    default: nil
    }
  }

  /// A parameter that is an integer, within `range`.
  static func integer(_ item: Item, _ key: String, in range: ClosedRange<Int64>) -> Int64? {
    guard case .integer(let value)? = item.rfc9651Parameters[key], range.contains(value) else { return nil }
    return value
  }

  /// A policy's quota unit (`qu`): a String (draft -10 and -11, section 3.1.2), or a Token read as
  /// its name; `.some(nil)` when not sent; `nil` when sent as anything else, which makes the item
  /// malformed: its quota would be read in a unit the server did not mean.
  static func quotaUnit(_ item: Item) -> QuotaUnit?? {
    switch item.rfc9651Parameters["qu"] {
    case nil: .some(nil)
    case .string(let unit)?, .token(let unit)?: QuotaUnit(rawValue: unit)
    default: nil
    }
  }

  /// A partition key (`pk`, sections 3.1.4 and 4.1.3): a Byte Sequence; `nil` for anything else.
  /// Only a label: one that does not decode is dropped, and its item still counts.
  static func partitionKey(_ item: Item) -> [UInt8]? {
    guard case .undecodedByteSequence(let base64)? = item.rfc9651Parameters["pk"] else { return nil }
    return Base64.decode(base64)
  }

  static func policies(_ lines: [String]) -> [Policy] {
    listItems(lines).compactMap { item in
      guard let name = name(of: item), let quota = integer(item, "q", in: 1...Int64.max),
        let unit = quotaUnit(item)
      else { return nil }
      // A Structured Fields integer has at most 15 digits: any is a `Duration` of seconds.
      let window = integer(item, "w", in: 1...Int64.max).map { Duration.seconds($0) }
      return Policy(
        name: name, quota: Int(clamping: quota), window: window, quotaUnit: unit, partitionKey: partitionKey(item))
    }
  }

  static func states(_ lines: [String], reading drafts: Set<DraftVersion>) -> [State] {
    listItems(lines).compactMap { item in
      guard let name = name(of: item) else { return nil }
      // Each version's names for the available quota and the effective window; an item is read by
      // the versions whose required parameter it carries.
      var readings: [(remaining: Int64, resetsIn: Duration?)] = []
      for draft in DraftVersion.allCases where drafts.contains(draft) {
        let (available, window) = draft == .draft11 ? ("r", "t") : ("a", "w")
        guard let remaining = integer(item, available, in: 0...Int64.max) else { continue }
        readings.append((remaining, integer(item, window, in: 0...Int64.max).map { ServerQuota.clampedSeconds($0) }))
      }
      guard let remaining = readings.map(\.remaining).min() else { return nil }
      let resetsIn = readings.compactMap(\.resetsIn).max()
      return State(
        name: name, remaining: Int(clamping: remaining), resetsIn: resetsIn, partitionKey: partitionKey(item))
    }
  }

  // MARK: Numbers and dates

  /// The comma-separated members of a value, trimmed: a field sent twice arrives as `"5, 5"`.
  static func listMembers(_ value: String) -> [String] {
    value.split(separator: ",", omittingEmptySubsequences: false).map { trimmed(Substring($0)) }
  }

  static func trimmed(_ text: Substring) -> String {
    String(text.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
  }

  /// The whole numbers of the first field of `names` that has any; each line and member counted.
  static func counts(_ head: ResponseHead, _ names: String...) -> [Int] {
    for name in names {
      let values = head.values(of: name).flatMap(listMembers).compactMap { count(parsing: $0) }
      if !values.isEmpty { return values }
    }
    return []
  }

  /// A count: ASCII digits, saturating at `Int.max`; `nil` for anything else.
  static func count(parsing text: String) -> Int? {
    guard let (whole, fraction) = decimal(parsing: text), fraction == 0 else { return nil }
    return Int(clamping: whole)
  }

  /// A non-negative decimal number, `digits[.digits]`: its whole part (saturating) and its
  /// fraction in nanoseconds (rounded up). `nil` for anything else: a sign, an exponent, spaces
  /// inside.
  static func decimal(parsing text: String) -> (whole: Int64, nanoseconds: Int64)? {
    let bytes = Array(text.utf8.prefix(256))
    guard !bytes.isEmpty, bytes.count < 256 else { return nil }
    var whole: Int64 = 0
    var fraction: Int64 = 0
    var fractionDigits = 0
    var sawDot = false
    var sawDigit = false
    var roundUp = false
    for byte in bytes {
      if byte == UInt8(ascii: ".") {
        guard !sawDot, sawDigit else { return nil }
        sawDot = true
        continue
      }
      guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
      let digit = Int64(byte - UInt8(ascii: "0"))
      sawDigit = true
      if sawDot {
        if fractionDigits < 9 {
          fraction = fraction * 10 + digit
          fractionDigits += 1
        } else if digit > 0 {
          roundUp = true
        }
      } else {
        let (times, overflow1) = whole.multipliedReportingOverflow(by: 10)
        let (plus, overflow2) = times.addingReportingOverflow(digit)
        whole = overflow1 || overflow2 ? .max : plus
      }
    }
    guard sawDigit, bytes.last != UInt8(ascii: ".") else { return nil }
    while fractionDigits < 9 {
      fraction *= 10
      fractionDigits += 1
    }
    if roundUp { fraction += 1 }
    return (whole, fraction)
  }

  /// A resource's name: 1 to 64 printable ASCII characters.
  static func resourceName(_ text: String) -> String? {
    let bytes = text.utf8
    guard (1...64).contains(bytes.count), bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
    return text
  }

  /// `Retry-After`: delay-seconds, or an HTTP date read against `referenceUnixSeconds`.
  static func delay(parsing text: String, referenceUnixSeconds: Int64) -> Duration? {
    let value = trimmed(Substring(text))
    if let (whole, nanoseconds) = decimal(parsing: value) {
      return ServerQuota.clampedSeconds(whole, nanoseconds: nanoseconds)
    }
    guard let date = HTTPDate.unixSeconds(parsing: value, unixNow: referenceUnixSeconds) else { return nil }
    return ServerQuota.clampedSeconds(max(0, date.subtractingReportingOverflow(referenceUnixSeconds).partialValue))
  }

  /// A reset: seconds from now, or a Unix time in seconds when above 10⁹, read against
  /// `reference` (a Unix time).
  static func reset(parsing text: String, reference: Duration) -> Duration? {
    guard let (whole, nanoseconds) = decimal(parsing: text) else { return nil }
    guard whole > 1_000_000_000 else { return ServerQuota.clampedSeconds(whole, nanoseconds: nanoseconds) }
    // Durations hold any Int64 of seconds and their difference without overflow.
    let delay = .seconds(whole) + .nanoseconds(nanoseconds) - reference
    return delay <= .zero ? .zero : min(delay, ServerQuota.maximumDelay)
  }
}

extension ServerQuota {
  /// What `head`'s rate-limit fields say: ``ServerRateLimitFields/quota`` of the fields parsed.
  ///
  /// - Parameters:
  ///   - head: The response's status and fields.
  ///   - unixNow: When the response was received, as a Unix time.
  public init(parsing head: ResponseHead, receivedAt unixNow: Duration) {
    self = ServerRateLimitFields(parsing: head, receivedAt: unixNow).quota
  }

  /// `seconds` and `nanoseconds` as a duration, within `0 ... maximumDelay`, without overflow.
  static func clampedSeconds(_ seconds: Int64, nanoseconds: Int64 = 0) -> Duration {
    let cap = maximumDelay.components.seconds
    guard seconds >= 0 else { return .zero }
    guard seconds < cap else { return maximumDelay }
    return min(.seconds(seconds) + .nanoseconds(nanoseconds), maximumDelay)
  }
}
