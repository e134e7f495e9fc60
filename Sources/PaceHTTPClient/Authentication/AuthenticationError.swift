/// Why a request could not be authenticated.
public enum AuthenticationError: Error, Sendable, Hashable {
  /// The server refused the credential right after each of `attempts` refreshes in a row: a
  /// refresh that mends nothing (a clock skew, a revoked account, a server bug) is not tried
  /// forever.
  case refreshLoop(attempts: Int)
}
