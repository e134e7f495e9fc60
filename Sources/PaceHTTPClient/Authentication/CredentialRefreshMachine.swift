/// The state behind ``CredentialRefresher``, apart from any lock, task or continuation: the
/// current credential, whether a refresh is in flight and who waits for it, by id, and how many
/// refreshes in a row the server refused.
struct CredentialRefreshMachine<Credential: Sendable & Equatable>: Sendable {
  /// What a caller does.
  enum Action: Sendable, Equatable {
    /// Use this credential at once.
    case use(Credential)
    /// Wait for the refresh in flight.
    case wait
    /// Start the refresh (from the credential given, `nil` for none yet) and wait for it.
    case start(from: Credential?)
    /// Throw.
    case fail(AuthenticationError)
  }

  let maximumRefreshesInARow: Int
  /// The last credential refreshed, `nil` before the first.
  private(set) var current: Credential?
  /// Whether a refresh is in flight.
  private(set) var isRefreshing = false
  /// The ids of the callers waiting for it, oldest first.
  private(set) var waiting: [UInt64] = []
  /// Refreshes after a refusal since a credential was last accepted, the one in flight included.
  private(set) var refreshesInARow = 0
  /// Whether the refresh in flight was started by a refusal (and counts in a row).
  private var inFlightCounts = false

  init(maximumRefreshesInARow: Int, current: Credential? = nil) {
    self.maximumRefreshesInARow = maximumRefreshesInARow
    self.current = current
  }

  /// A caller `id` asks for the current credential.
  mutating func current(id: UInt64) -> Action {
    if let current { return .use(current) }
    waiting.append(id)
    if isRefreshing { return .wait }
    isRefreshing = true
    inFlightCounts = false
    return .start(from: nil)
  }

  /// A caller `id` had `rejected` refused by the server.
  mutating func refresh(after rejected: Credential, id: UInt64) -> Action {
    // Refreshed since the caller read it: the refusal was of an older credential.
    if let current, current != rejected, !isRefreshing { return .use(current) }
    if isRefreshing {
      waiting.append(id)
      return .wait
    }
    guard refreshesInARow < maximumRefreshesInARow else { return .fail(.refreshLoop(attempts: refreshesInARow)) }
    refreshesInARow += 1
    isRefreshing = true
    inFlightCounts = true
    waiting.append(id)
    return .start(from: current ?? rejected)
  }

  /// The server accepted `credential` (it answered other than 401): the refreshes in a row end.
  mutating func accepted(_ credential: Credential) {
    if credential == current { refreshesInARow = 0 }
  }

  /// The refresh in flight ended with `credential`, or `nil` if it threw; returns the ids to
  /// resume with its result.
  mutating func refreshEnded(with credential: Credential?) -> [UInt64] {
    isRefreshing = false
    if let credential {
      current = credential
    } else if inFlightCounts {
      refreshesInARow -= 1  // a refresh that failed was refused by no server
    }
    defer { waiting = [] }
    return waiting
  }

  /// The caller `id` is cancelled; `true` if it was waiting, and its caller throws.
  mutating func cancel(id: UInt64) -> Bool {
    guard let index = waiting.firstIndex(of: id) else { return false }
    waiting.remove(at: index)
    return true
  }
}
