import Pace
import PaceHTTPClient

/// The field names the fuzzer's lines are sent under: the first byte of each line picks one.
let names = [
  "RateLimit-Policy", "RateLimit", "Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
  "X-RateLimit-Used", "X-RateLimit-Resource", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Date",
]

/// libFuzzer entry point: any bytes, as lines of rate-limit fields (each line's first byte picks
/// the name), parsed at three receiving times. Every quota must be one a limiter can act on: a
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
  for field in fields {
    _ = HTTPDate.unixSeconds(parsing: field.value, unixNow: 1_700_000_000)
  }
  return 0
}
