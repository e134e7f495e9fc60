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

/// A response the middleware sends in place of the route's: status, fields and a plain-text body,
/// and for a `429` or a `503` the same answer as problem details, sent instead to a client that
/// accepts JSON (``negotiated(accept:)``).
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
  private static let contentType = HeaderField("Content-Type", "text/plain; charset=utf-8")
  /// The body, UTF-8 text ending in a newline.
  package let body: String
  /// The answer as RFC 9457 problem details; nil for a `400`, which has no problem type of the
  /// draft's.
  package let problem: ProblemDetails?

  /// - Parameter contentType: The body's media type; plain text by default.
  package init(
    status: Int, contentType: String? = nil, fields: [HeaderField], body: String, problem: ProblemDetails? = nil
  ) {
    self.status = status
    var all = [contentType.map { HeaderField("Content-Type", $0) } ?? Self.contentType]
    all.reserveCapacity(fields.count + 1)
    all += fields
    self.fields = all
    self.body = body
    self.problem = problem
  }

  private init(status: Int, allFields: [HeaderField], body: String, problem: ProblemDetails?) {
    self.status = status
    fields = allFields
    self.body = body
    self.problem = problem
  }

  /// The same answer with `member` last in its `RateLimit-Policy` list, or in a field of its own
  /// if it has none.
  package func adding(policyMember member: String) -> PlainTextResponse {
    var all = fields
    if let index = all.firstIndex(where: { $0.name == RateLimitFields.policy }) {
      all[index] = HeaderField(RateLimitFields.policy, all[index].value + ", " + member)
    } else {
      all.append(HeaderField(RateLimitFields.policy, member))
    }
    return PlainTextResponse(status: status, allFields: all, body: body, problem: problem)
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

/// The fields of draft-ietf-httpapi-ratelimit-headers-11 (-10's parameters) and `Retry-After` for one policy, and the
/// response for every answer of its limiter: a pure function of the answer, the limit and the
/// policy's name.
///
/// Each policy is one member of the `RateLimit-Policy` and `RateLimit` lists (Structured Fields):
/// `"name";q=permits;w=seconds` and `"name";r=remaining;t=seconds`, with `;pk=:…:` for a policy
/// that discloses partition keys (``RateLimitPolicy/disclosingPartitionKeys(_:)``). `t` is when the key's quota
/// is whole again, at most, rounded up to whole seconds:
///
/// | policy | allowed | limited |
/// |---|---|---|
/// | token bucket | until the bucket is full | `retryAfter` |
/// | sliding window | the window (every permit counted now has left it by then) | `retryAfter`: until enough permits have left the window |
/// | fixed window | the window's end (the limiter's `timeUntilWindowEnds(for:)`) | `retryAfter`: the window's end |
///
/// A key with its whole quota left has `t=0`.
package struct RateLimitFields: Hashable, Sendable {
  package static let policy = "RateLimit-Policy"
  package static let rateLimit = "RateLimit"
  package static let retryAfter = "Retry-After"

  package let limit: RateLimit
  package let policyName: String
  /// How long until the key's fixed window ends, for a fixed window's `t`; `nil` (the whole window,
  /// an upper bound) when unknown.
  package private(set) var windowEndsIn: Duration?
  /// The request's partition key as a byte sequence (`:base64:`), for `pk`; nil for none.
  package var partitionKey: String?
  /// The name as a Structured Fields string: quoted, with `"` and `\` escaped.
  package let quotedName: String
  /// `"name";q=permits;w=seconds`: the quota and its window.
  package let policyValue: String

  /// - Precondition: `policyName` is printable ASCII (a Structured Fields string), as configured
  ///   by the program.
  package init(limit: RateLimit, policyName: String, windowEndsIn: Duration? = nil) {
    Self.checkName(policyName)
    self.init(limit: limit, policyName: policyName, quotedName: Self.quoted(policyName), windowEndsIn: windowEndsIn)
  }

  /// `name` as a Structured Fields string: quoted, with `"` and `\` escaped.
  package static func quoted(_ name: String) -> String {
    var quoted = "\""
    for character in name {
      if character == "\"" || character == "\\" { quoted.append("\\") }
      quoted.append(character)
    }
    quoted.append("\"")
    return quoted
  }

  private init(limit: RateLimit, policyName: String, quotedName: String, windowEndsIn: Duration?) {
    self.limit = limit
    self.policyName = policyName
    self.windowEndsIn = windowEndsIn
    self.quotedName = quotedName
    // Made once per limit, not per request: a middleware keeps the fields of its policy's limit.
    self.policyValue = "\(quotedName);q=\(limit.permits);w=\(Self.wholeSeconds(limit.interval))"
  }

  /// The same policy's fields for `limit` and `windowEndsIn`: the name is not checked or quoted
  /// again, and the policy member is rewritten only for another limit.
  package func with(limit: RateLimit, windowEndsIn: Duration?) -> RateLimitFields {
    if limit == self.limit && windowEndsIn == self.windowEndsIn { return self }
    guard limit == self.limit else {
      return RateLimitFields(limit: limit, policyName: policyName, quotedName: quotedName, windowEndsIn: windowEndsIn)
    }
    var fields = self
    fields.windowEndsIn = windowEndsIn
    return fields
  }

  /// - Precondition: `policyName` is printable ASCII.
  package static func checkName(_ policyName: String) {
    precondition(
      policyName.unicodeScalars.allSatisfy { (0x20...0x7E).contains($0.value) },
      "RateLimitMiddleware: a policy's name is printable ASCII (got \(policyName.debugDescription))")
  }

  /// `"name";r=remaining;t=seconds` for a key with `remaining` permits left.
  package func stateValue(remaining: Int) -> String {
    let untilWhole: Duration
    switch limit.algorithm {
    case .tokenBucket:
      // In saturating nanoseconds: `Duration`'s own product traps on a long interval (`Int64.max`
      // seconds, say) times a burst.
      let emission = limit.interval.paceNanoseconds / Int64(limit.permits)
      let missing = Int64(max(0, limit.burst - max(0, remaining)))
      let (product, overflow) = emission.multipliedReportingOverflow(by: missing)
      untilWhole = .nanoseconds(overflow ? Int64.max : product)
    case .slidingWindow:
      untilWhole = remaining >= limit.permits ? .zero : limit.interval
    case .fixedWindow:
      untilWhole = remaining >= limit.permits ? .zero : min(windowEndsIn ?? limit.interval, limit.interval)
    }
    return "\(quotedName);r=\(max(0, remaining));t=\(Self.wholeSeconds(untilWhole))\(partitionKeyParameter)"
  }

  /// `;pk=:…:`, or nothing.
  private var partitionKeyParameter: String {
    partitionKey.map { ";pk=\($0)" } ?? ""
  }

  /// `"name";r=0;t=seconds` for a key limited for `retryAfter`.
  package func stateValue(retryAfter: Duration) -> String {
    "\(quotedName);r=0;t=\(Self.wholeSeconds(retryAfter))\(partitionKeyParameter)"
  }

  /// The state member for `decision`.
  package func stateValue(_ decision: RateLimitDecision) -> String {
    switch decision {
    case .allowed(let remaining): stateValue(remaining: remaining)
    case .limited(let retryAfter): stateValue(retryAfter: retryAfter)
    }
  }

  /// The fields of an allowed request: `t` is when the key's quota is whole again, at most.
  package func fields(remaining: Int) -> [HeaderField] {
    [HeaderField(Self.policy, policyValue), HeaderField(Self.rateLimit, stateValue(remaining: remaining))]
  }

  /// The fields of a limited request.
  package func fields(retryAfter: Duration) -> [HeaderField] {
    Self.fields(states: [(self, .limited(retryAfter: retryAfter))], deniedBy: 0)
  }

  /// Both lists for several policies, one member each, in order; with `Retry-After` when
  /// `deniedBy` names the policy that denied the request.
  package static func fields(states: [(RateLimitFields, RateLimitDecision)], deniedBy: Int? = nil) -> [HeaderField] {
    guard !states.isEmpty else { return [] }
    // One policy, the usual case, joins nothing.
    let policies = states.count == 1 ? states[0].0.policyValue : states.map(\.0.policyValue).joined(separator: ", ")
    let members =
      states.count == 1
      ? states[0].0.stateValue(states[0].1) : states.map { $0.0.stateValue($0.1) }.joined(separator: ", ")
    var fields = [HeaderField(policy, policies), HeaderField(rateLimit, members)]
    if let deniedBy, case .limited(let retryAfter) = states[deniedBy].1 {
      fields.append(HeaderField(Self.retryAfter, String(wholeSeconds(retryAfter))))
    }
    return fields
  }

  /// The `429` for a request that the policy at `deniedBy` limited: every policy's fields, and a
  /// body that names the one that denied it.
  package static func tooManyRequests(states: [(RateLimitFields, RateLimitDecision)], deniedBy: Int)
    -> PlainTextResponse
  {
    let denier = states[deniedBy]
    let seconds: Int64
    if case .limited(let retryAfter) = denier.1 { seconds = wholeSeconds(retryAfter) } else { seconds = 0 }
    let detail = "Too many requests (policy \(denier.0.quotedName)): retry after \(seconds) s"
    // Every policy that limited the request: the one that refused it, and any in shadow before it.
    let violated = states.compactMap { $0.1.isAllowed ? nil : $0.0.policyName }
    return PlainTextResponse(
      status: 429, fields: fields(states: states, deniedBy: deniedBy), body: detail + "\n",
      problem: ProblemDetails(.quotaExceeded, status: 429, detail: detail, violatedPolicies: violated))
  }

  /// What the middleware does for `answer`, with this policy alone.
  package func outcome(for answer: LimiterAnswer) -> RateLimitOutcome {
    switch answer {
    case .decided(.allowed(let remaining)):
      return .proceed(fields: fields(remaining: remaining))
    case .decided(let limited):
      return .respond(Self.tooManyRequests(states: [(self, limited)], deniedBy: 0))
    case .invalid(let reason):
      return .respond(Self.badRequest(reason))
    case .unavailable:
      return .respond(Self.unavailable(policies: [policyName]))
    }
  }

  /// The `400` for a key or cost the limiter refuses.
  package static func badRequest(_ reason: String) -> PlainTextResponse {
    PlainTextResponse(status: 400, fields: [], body: "Bad request: \(reason)\n")
  }

  /// The `503` for a limiter that could not decide.
  package static let unavailable = unavailable(policies: [])

  /// The `503` for the limiter of the policies named `policies` that could not decide; its
  /// problem details (`temporary-reduced-capacity`) name them.
  package static func unavailable(policies: [String]) -> PlainTextResponse {
    let detail = "Service unavailable: the rate limiter could not decide"
    return PlainTextResponse(
      status: 503, fields: [HeaderField(retryAfter, "1")], body: detail + "\n",
      problem: ProblemDetails(.temporaryReducedCapacity, status: 503, detail: detail, violatedPolicies: policies))
  }

  /// `ours` added in front of the same fields already on a response (an inner middleware's):
  /// each list keeps every member, the outer policies first, as a request meets them.
  ///
  /// - Parameter existing: The response's value of a field, its field lines joined by `, `; nil
  ///   if it has none.
  package static func merged(_ ours: [HeaderField], existing: (String) -> String?) -> [HeaderField] {
    ours.map { field in
      guard field.name == policy || field.name == rateLimit, let inner = existing(field.name), !inner.isEmpty else {
        return field
      }
      return HeaderField(field.name, field.value + ", " + inner)
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
