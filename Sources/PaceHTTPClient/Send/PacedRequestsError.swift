import Pace

/// Why ``PacedRequests/send(key:idempotent:deadline:attemptTimeout:isConnectionError:isolation:_:)``
/// ended without an answer of the server's.
public enum PacedRequestsError: Error, Hashable, CustomStringConvertible {
  /// The send's deadline would pass, or passed, during a wait or an attempt. `needed` is how long
  /// the wait would have taken (a back-off, what the server's `Retry-After` still holds); `nil`
  /// when unknown (a wait in the key's queue, an attempt, a wait for the network path, cut at the
  /// deadline). `remaining` is what was left of the deadline when the send failed.
  case deadlineExceeded(needed: Duration?, remaining: Duration)
  /// The last attempt took `after` without an answer and was cancelled; no retry was left (or
  /// the request is not idempotent).
  case attemptTimedOut(after: Duration)

  /// What happened, in words.
  public var description: String {
    switch self {
    case .deadlineExceeded(let needed?, let remaining):
      "The request would wait \(needed.paceDescription), beyond its deadline \(remaining.paceDescription) away"
    case .deadlineExceeded(nil, let remaining):
      remaining > .zero
        ? "The request's deadline was \(remaining.paceDescription) away" : "The request's deadline passed"
    case .attemptTimedOut(let after):
      "The request's last attempt got no answer within \(after.paceDescription)"
    }
  }
}
