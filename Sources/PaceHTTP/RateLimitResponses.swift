#if Hummingbird || Vapor
import Pace

/// One header field, in no framework's types: each middleware turns it into its own.
package struct HeaderField: Hashable, Sendable, CustomStringConvertible {
  /// The field's name, as sent.
  package let name: String
  /// The field's value, as sent.
  package let value: String

  package init(_ name: String, _ value: String) {
    self.name = name
    self.value = value
  }

  package var description: String { "\(name): \(value)" }
}

/// A response the middleware sends in place of the route's: status, fields and a plain-text body.
package struct PlainTextResponse: Hashable, Sendable {
  /// The status code: 400, 429 or 503.
  package let status: Int
  /// The status line's reason phrase: "Too Many Requests" for 429.
  package var reasonPhrase: String {
    switch status {
    case 400: "Bad Request"
    case 429: "Too Many Requests"
    case 503: "Service Unavailable"
    default: ""
    }
  }
  /// Every field of the response, `Content-Type` included.
  package let fields: [HeaderField]
  /// The body, UTF-8 text ending in a newline.
  package let body: String

  package init(status: Int, fields: [HeaderField], body: String) {
    self.status = status
    self.fields = [HeaderField("Content-Type", "text/plain; charset=utf-8")] + fields
    self.body = body
  }
}

/// What a rate-limit middleware does with one request: the whole answer, in no framework's types,
/// so that every framework's middleware sends the same bytes.
package enum RateLimitOutcome: Hashable, Sendable {
  /// Run the route, then add `fields` to its response (none for a request without a key).
  case proceed(fields: [HeaderField])
  /// Answer with `response` instead of running the route.
  case respond(PlainTextResponse)
}

/// How the limiter's answer, or its failure, becomes a response.
package enum LimiterAnswer: Hashable, Sendable {
  /// The limiter decided.
  case decided(RateLimitDecision)
  /// The limiter refused the key or the cost; the text says why.
  case invalid(String)
  /// The limiter could not decide: its store failed.
  case unavailable
}

/// The fields of draft-ietf-httpapi-ratelimit-headers-10 and `Retry-After`, and the response for
/// every answer of the limiter: a pure function of the answer, the limit and the policy's name.
package struct RateLimitFields: Hashable, Sendable {
  package static let policy = "RateLimit-Policy"
  package static let rateLimit = "RateLimit"
  package static let retryAfter = "Retry-After"

  package let limit: RateLimit
  package let policyName: String

  package init(limit: RateLimit, policyName: String) {
    self.limit = limit
    self.policyName = policyName
  }

  /// `"name";q=permits;w=seconds`: the quota and its window.
  package var policyValue: String {
    "\"\(policyName)\";q=\(limit.permits);w=\(Self.wholeSeconds(limit.interval))"
  }

  /// The fields of an allowed request: `t` is when the key's bucket is full again, at most.
  package func fields(remaining: Int) -> [HeaderField] {
    // In saturating nanoseconds: `Duration`'s own product traps on a long interval (`Int64.max`
    // seconds, say) times a burst.
    let emission = limit.interval.paceNanoseconds / Int64(limit.permits)
    let missing = Int64(max(0, limit.burst - max(0, remaining)))
    let (product, overflow) = emission.multipliedReportingOverflow(by: missing)
    let refill = Duration.nanoseconds(overflow ? Int64.max : product)
    return [
      HeaderField(Self.policy, policyValue),
      HeaderField(Self.rateLimit, "\"\(policyName)\";r=\(remaining);t=\(Self.wholeSeconds(refill))"),
    ]
  }

  /// The fields of a limited request.
  package func fields(retryAfter: Duration) -> [HeaderField] {
    let seconds = Self.wholeSeconds(retryAfter)
    return [
      HeaderField(Self.policy, policyValue),
      HeaderField(Self.rateLimit, "\"\(policyName)\";r=0;t=\(seconds)"),
      HeaderField(Self.retryAfter, String(seconds)),
    ]
  }

  /// What the middleware does for `answer`.
  package func outcome(for answer: LimiterAnswer) -> RateLimitOutcome {
    switch answer {
    case .decided(.allowed(let remaining)):
      return .proceed(fields: fields(remaining: remaining))
    case .decided(.limited(let retryAfter)):
      return .respond(
        PlainTextResponse(
          status: 429, fields: fields(retryAfter: retryAfter),
          body: "Too many requests: retry after \(Self.wholeSeconds(retryAfter)) s\n"))
    case .invalid(let reason):
      return .respond(PlainTextResponse(status: 400, fields: [], body: "Bad request: \(reason)\n"))
    case .unavailable:
      return .respond(
        PlainTextResponse(
          status: 503, fields: [HeaderField(Self.retryAfter, "1")],
          body: "Service unavailable: the rate limiter could not decide\n"))
    }
  }

  /// Seconds rounded up: a client that waits that long is not turned away again.
  package static func wholeSeconds(_ duration: Duration) -> Int64 {
    // Through Pace's saturating conversion: `components` traps beyond `Int64.max` seconds, which
    // a configured interval may be.
    let nanoseconds = duration.paceNanoseconds
    guard nanoseconds > 0 else { return 0 }
    return nanoseconds / 1_000_000_000 + (nanoseconds % 1_000_000_000 == 0 ? 0 : 1)
  }
}
#endif
