#if Hummingbird || Vapor
/// An RFC 9457 problem details object of one of the rate-limit draft's problem types
/// (draft-ietf-httpapi-ratelimit-headers-11, section 5), which a middleware's `429` and `503`
/// carry as `application/problem+json` for a client that accepts JSON (``ProblemDetails/prefersJSON(accept:)``).
///
/// Written by hand, its members in code-point order, so that every framework sends the same bytes:
///
/// ```
/// {"detail":"Too many requests (policy \"default\"): retry after 20 s","status":429,"title":"Quota Exceeded",
///  "type":"https://iana.org/assignments/http-problem-types#quota-exceeded","violated-policies":["default"]}
/// ```
package struct ProblemDetails: Hashable, Sendable {
  /// The problem type: its URI and its title, as the draft registers them.
  package enum Kind: Hashable, Sendable {
    /// A policy's quota is used up: `429`.
    case quotaExceeded
    /// The server cannot decide, or serve, for now: `503`.
    case temporaryReducedCapacity

    /// The type URI the draft asks IANA to register.
    package var type: String {
      switch self {
      case .quotaExceeded: "https://iana.org/assignments/http-problem-types#quota-exceeded"
      case .temporaryReducedCapacity: "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
      }
    }

    /// The registered title: RFC 9457 asks that it not change from one occurrence to the next.
    package var title: String {
      switch self {
      case .quotaExceeded: "Quota Exceeded"
      case .temporaryReducedCapacity: "Temporary Reduced Capacity"
      }
    }
  }

  /// The media type of the JSON form.
  package static let mediaType = "application/problem+json"

  package let kind: Kind
  /// The response's status code, repeated in the body as RFC 9457 allows.
  package let status: Int
  /// What happened to this request, for a person: the plain-text body's one line.
  package let detail: String
  /// The names of the policies whose quota the request exceeded, in the order the request met
  /// them: the draft's `violated-policies` extension member.
  package let violatedPolicies: [String]

  package init(_ kind: Kind, status: Int, detail: String, violatedPolicies: [String]) {
    self.kind = kind
    self.status = status
    self.detail = detail
    self.violatedPolicies = violatedPolicies
  }

  /// The JSON object, on one line ending in a newline, its members sorted by name.
  package var json: String {
    var out = "{\"detail\":"
    Self.appendString(detail, to: &out)
    out += ",\"status\":\(status),\"title\":"
    Self.appendString(kind.title, to: &out)
    out += ",\"type\":"
    Self.appendString(kind.type, to: &out)
    out += ",\"violated-policies\":["
    for (index, name) in violatedPolicies.enumerated() {
      if index > 0 { out += "," }
      Self.appendString(name, to: &out)
    }
    out += "]}\n"
    return out
  }

  /// `text` as a JSON string: quoted, with `"`, `\` and every control character escaped (RFC 8259).
  package static func appendString(_ text: String, to out: inout String) {
    out.append("\"")
    for scalar in text.unicodeScalars {
      switch scalar {
      case "\"": out += "\\\""
      case "\\": out += "\\\\"
      case "\n": out += "\\n"
      case "\r": out += "\\r"
      case "\t": out += "\\t"
      case _ where scalar.value < 0x20 || scalar.value == 0x7F:
        let hex = String(scalar.value, radix: 16, uppercase: false)
        out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
      default: out.unicodeScalars.append(scalar)
      }
    }
    out.append("\"")
  }

  /// Whether a request whose `Accept` field lines are `accept` gets the JSON form rather than
  /// plain text.
  ///
  /// The rule (RFC 9110's negotiation, between the two forms a middleware has): each form's
  /// quality is that of the most specific media range in `Accept` that matches it (a type and
  /// subtype, then `type/*`, then `*/*`), 0 when none does. JSON is matched by
  /// `application/problem+json` and `application/json` (a JSON client reads a problem object), then
  /// `application/*`; plain text by `text/plain`, then `text/*`. JSON is chosen when its quality
  /// is above 0 and at least plain text's: `*/*`, `application/json`, or a browser's list ending
  /// in `*/*;q=0.8` get JSON; `text/plain`, `text/*`, or `text/plain, */*;q=0.5` get plain text. A
  /// request without `Accept` gets plain text, as before there was a JSON form. Media types are
  /// compared without case; parameters other than `q` are ignored; a member that does not parse,
  /// or whose `q` is not a number in `0…1`, is skipped.
  package static func prefersJSON(accept: [String]) -> Bool {
    guard !accept.isEmpty else { return false }
    // (specificity, quality) of the best match so far for each form; specificity 0 is no match.
    var json = (specificity: 0, quality: 0.0)
    var text = (specificity: 0, quality: 0.0)
    for line in accept {
      for member in line.split(separator: ",", omittingEmptySubsequences: true) {
        guard let range = MediaRange(member) else { continue }
        let forJSON = range.specificity(json: true)
        if forJSON > json.specificity { json = (forJSON, range.quality) }
        let forText = range.specificity(json: false)
        if forText > text.specificity { text = (forText, range.quality) }
      }
    }
    return json.quality > 0 && json.quality >= text.quality
  }

  /// One member of `Accept`: a media range and its quality.
  private struct MediaRange {
    let type: Substring
    let subtype: Substring
    let quality: Double

    init?(_ member: Substring) {
      let parts = member.split(separator: ";", omittingEmptySubsequences: false)
      let mediaType = parts[0].trimmingSpaces.lowercased()
      guard let slash = mediaType.firstIndex(of: "/") else { return nil }
      let type = mediaType[..<slash]
      let subtype = mediaType[mediaType.index(after: slash)...]
      guard !type.isEmpty, !subtype.isEmpty, type != "*" || subtype == "*" else { return nil }
      var quality = 1.0
      for parameter in parts.dropFirst() {
        let pair = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        guard pair.count == 2, pair[0].trimmingSpaces.lowercased() == "q" else { continue }
        // RFC 9110's qvalue: at most three decimals; a longer or stranger value is no quality.
        let value = pair[1].trimmingSpaces
        guard value.count <= 5, value.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
          let parsed = Double(value), parsed >= 0, parsed <= 1
        else { return nil }
        quality = parsed
      }
      self.type = type
      self.subtype = subtype
      self.quality = quality
    }

    /// How specifically this range names the JSON or the plain-text form: 3 for the type itself,
    /// 2 for `type/*`, 1 for `*/*`, 0 for no match.
    func specificity(json: Bool) -> Int {
      if type == "*" { return 1 }
      if json {
        guard type == "application" else { return 0 }
        if subtype == "*" { return 2 }
        return subtype == "problem+json" || subtype == "json" ? 3 : 0
      }
      guard type == "text" else { return 0 }
      if subtype == "*" { return 2 }
      return subtype == "plain" ? 3 : 0
    }
  }
}

extension Substring {
  /// Without the spaces and tabs around it (RFC 9110's optional whitespace).
  fileprivate var trimmingSpaces: Substring {
    var text = self
    while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
    while let last = text.last, last == " " || last == "\t" { text.removeLast() }
    return text
  }
}

extension PlainTextResponse {
  /// This response for a request whose `Accept` field lines are `accept`: its problem details as
  /// `application/problem+json` for a client that prefers JSON (``ProblemDetails/prefersJSON(accept:)``),
  /// itself otherwise, and for a response without problem details (a `400`).
  /// Either form carries `Vary: Accept`, since the body depends on that field.
  package func negotiated(accept: [String]) -> PlainTextResponse {
    guard let problem else { return self }
    var others = fields.filter { $0.name != "Content-Type" }
    others.append(Self.varyAccept)
    guard ProblemDetails.prefersJSON(accept: accept) else {
      return PlainTextResponse(status: status, fields: others, body: body, problem: problem)
    }
    return PlainTextResponse(
      status: status, contentType: ProblemDetails.mediaType, fields: others, body: problem.json, problem: problem)
  }

  private static let varyAccept = HeaderField("Vary", "Accept")
}
#endif
