import Pace
import RawStructuredFieldValues

/// The rate-limit fields of one response, parsed: the IETF `RateLimit-Policy` and `RateLimit`
/// (draft-ietf-httpapi-ratelimit-headers, Structured Fields lists), `Retry-After`, the earlier
/// drafts' `RateLimit-Limit`/`-Remaining`/`-Reset`, and the common `X-RateLimit-Limit`,
/// `-Remaining`, `-Reset`, `-Used` and `-Resource`.
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
  /// One member of `RateLimit-Policy`: a policy's name, quota and window.
  public struct Policy: Sendable, Hashable {
    /// The policy's name.
    public var name: String
    /// The requests allowed per window (`q`).
    public var quota: Int
    /// The window (`w`); `nil` when not sent.
    public var window: Duration?

    /// A policy member.
    public init(name: String, quota: Int, window: Duration?) {
      self.name = name
      self.quota = quota
      self.window = window
    }
  }

  /// One member of `RateLimit`: a policy's remaining quota and when it is whole again.
  public struct State: Sendable, Hashable {
    /// The policy's name.
    public var name: String
    /// The requests left (`r`).
    public var remaining: Int
    /// How long until the quota is whole again (`t`); `nil` when not sent.
    public var resetsIn: Duration?

    /// A state member.
    public init(name: String, remaining: Int, resetsIn: Duration?) {
      self.name = name
      self.remaining = remaining
      self.resetsIn = resetsIn
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

  /// The fields of `head`.
  ///
  /// - Parameters:
  ///   - head: The response's status and fields.
  ///   - unixNow: When the response was received, as a Unix time (since 1970-01-01 UTC): for the
  ///     fields that send a date.
  public init(parsing head: ResponseHead, receivedAt unixNow: Duration) {
    let nowSeconds = unixNow.components.seconds
    // The server's own clock when it has a valid `Date`: its dates are read against it.
    let serverNow = head.values(of: "Date").compactMap { HTTPDate.unixSeconds(parsing: $0, unixNow: nowSeconds) }
    let reference = serverNow.count == 1 ? serverNow[0] : nowSeconds
    policies = Self.policies(head.values(of: "RateLimit-Policy"))
    states = Self.states(head.values(of: "RateLimit"))
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
  public var quota: ServerQuota {
    let policy = policies.min { lhs, rhs in
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

  /// A member's name: a string or a token.
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

  static func policies(_ lines: [String]) -> [Policy] {
    listItems(lines).compactMap { item in
      guard let name = name(of: item), let quota = integer(item, "q", in: 1...Int64.max) else { return nil }
      // A Structured Fields integer has at most 15 digits: any is a `Duration` of seconds.
      let window = integer(item, "w", in: 1...Int64.max).map { Duration.seconds($0) }
      return Policy(name: name, quota: Int(clamping: quota), window: window)
    }
  }

  static func states(_ lines: [String]) -> [State] {
    listItems(lines).compactMap { item in
      guard let name = name(of: item), let remaining = integer(item, "r", in: 0...Int64.max) else { return nil }
      let resetsIn = integer(item, "t", in: 0...Int64.max).map { ServerQuota.clampedSeconds($0) }
      return State(name: name, remaining: Int(clamping: remaining), resetsIn: resetsIn)
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
