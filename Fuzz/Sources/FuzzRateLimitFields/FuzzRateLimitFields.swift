import Pace
import PaceHTTPClient

/// The field names the fuzzer's lines are sent under: the first byte of each line picks one.
let names = [
  "RateLimit-Policy", "RateLimit", "Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
  "X-RateLimit-Used", "X-RateLimit-Resource", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Date",
  "Age",
]

/// Every set of draft versions the parser may be told to read.
let draftSets: [Set<ServerRateLimitFields.DraftVersion>] = [[], [.draft11], [.editorsCopy], [.draft11, .editorsCopy]]

/// libFuzzer entry point: any bytes, as lines of rate-limit fields (each line's first byte picks
/// the name), parsed at three receiving times and under every set of draft versions. Every quota must be one a limiter can act on: a
/// positive quota and window, a remaining count not negative, every delay within
/// `0 ... ServerQuota.maximumDelay`. Anything else traps, which libFuzzer reports with the input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRateLimitFields(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
  let bytes = UnsafeRawBufferPointer(start: start, count: count)
  var fields: [(name: String, value: String)] = []
  for line in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
    guard let first = line.first else { continue }
    fields.append((name: names[Int(first) % names.count], value: String(decoding: line.dropFirst(), as: UTF8.self)))
  }
  let head = ResponseHead(status: 429, headerFields: fields)
  for now in [Duration.zero, .seconds(1_700_000_000), .seconds(Int64.max)] {
    let quota = ServerQuota(parsing: head, receivedAt: now)
    precondition(quota.quota.map { $0 > 0 } ?? true, "quota \(quota)")
    precondition(quota.window.map { $0 > .zero } ?? true, "window \(quota)")
    precondition(quota.remaining.map { $0 >= 0 } ?? true, "remaining \(quota)")
    for delay in [quota.resetsIn, quota.retryAfter] {
      precondition(delay.map { $0 >= .zero && $0 <= ServerQuota.maximumDelay } ?? true, "delay \(quota)")
    }
  }
  // Draft -11's parameters and the editor's copy's: counts in range, and nothing kept larger than
  // what was sent (a partition key is at most 3 bytes for every 4 characters of its base64).
  let sent = fields.reduce(0) { $0 + $1.value.utf8.count }
  for drafts in draftSets {
    let parsed = ServerRateLimitFields(parsing: head, receivedAt: .seconds(1_700_000_000), reading: drafts)
    precondition(parsed.policies.allSatisfy { $0.quota > 0 && ($0.window.map { $0 > .zero } ?? true) }, "policy")
    precondition(parsed.states.allSatisfy { $0.remaining >= 0 }, "state")
    let kept =
      parsed.policies.reduce(0) { $0 + ($1.partitionKey?.count ?? 0) + ($1.quotaUnit?.rawValue.utf8.count ?? 0) }
      + parsed.states.reduce(0) { $0 + ($1.partitionKey?.count ?? 0) }
    precondition(kept <= sent, "kept \(kept) of \(sent) bytes")
  }
  _ = head.isFromCache
  for field in fields {
    _ = HTTPDate.unixSeconds(parsing: field.value, unixNow: 1_700_000_000)
  }
  return 0
}
