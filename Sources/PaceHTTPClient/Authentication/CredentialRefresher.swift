import Pace

/// A credential (an access token, a signed header) refreshed once for all the requests that the
/// server refused with it at the same time.
///
/// ```swift
/// let credentials = CredentialRefresher<String> { expired in
///   try await signIn(refreshing: expired)   // one call, however many requests got a 401
/// }
/// let token = try await credentials.current()
/// // …the server answers 401 to a request sent with `token`:
/// let fresh = try await credentials.refresh(after: token)
/// ```
///
/// Fifty requests refused together share one refresh: the first starts it, the others wait for
/// it, and a request that was refused with a credential older than the current one gets the
/// current one without a refresh. A credential refused right after a refresh, again and again,
/// is a loop (a revoked account, a clock skew): after `maximumRefreshesInARow` refreshes with no
/// credential accepted in between, ``refresh(after:)`` throws
/// ``AuthenticationError/refreshLoop(attempts:)``. ``accepted(_:)`` (the server answered other
/// than 401) ends the row; `PacedRequests`' `send(key:idempotent:credentials:deadline:attemptTimeout:isConnectionError:isolation:_:)`
/// calls it.
///
/// A refresh that throws throws to every caller waiting for it, and the next refusal tries again.
/// A cancelled caller stops waiting at once; the refresh goes on for the others.
public final class CredentialRefresher<Credential: Sendable & Equatable>: Sendable {
  private struct State {
    var machine: CredentialRefreshMachine<Credential>
    var continuations: [UInt64: UnsafeContinuation<Credential, any Error>] = [:]
    var nextID: UInt64 = 0
  }

  private let state: LockedState<State>
  private let refresh: @Sendable (Credential?) async throws -> Credential

  /// A refresher.
  ///
  /// - Parameters:
  ///   - initial: The credential to start with; `nil` to refresh at the first ``current()``.
  ///   - maximumRefreshesInARow: How many refreshes may follow one another with no credential
  ///     accepted in between before a refusal is a loop. Positive.
  ///   - refresh: Makes a new credential from the refused one (`nil` for the first). Runs once at
  ///     a time, in a task of its own, so that a caller's cancellation does not end it.
  public init(
    initial: Credential? = nil,
    maximumRefreshesInARow: Int = 3,
    refresh: @escaping @Sendable (Credential?) async throws -> Credential
  ) {
    precondition(
      maximumRefreshesInARow > 0,
      "CredentialRefresher: maximumRefreshesInARow must be positive (got \(maximumRefreshesInARow))")
    state = LockedState(
      State(machine: CredentialRefreshMachine(maximumRefreshesInARow: maximumRefreshesInARow, current: initial)))
    self.refresh = refresh
  }

  /// How many callers wait for the refresh in flight now.
  public var waitingCount: Int { state.withLock { $0.machine.waiting.count } }

  /// The current credential; the first call refreshes one (once, for every caller meanwhile).
  ///
  /// - Throws: What the refresh throws; `CancellationError` if the task is cancelled meanwhile.
  public func current() async throws -> Credential {
    try await perform { machine, id in machine.current(id: id) }
  }

  /// A credential to replace `rejected`, which the server refused (a 401): the current one if it
  /// is newer, else the result of a refresh shared with every caller that asks meanwhile.
  ///
  /// - Throws: ``AuthenticationError/refreshLoop(attempts:)`` after `maximumRefreshesInARow`
  ///   refreshes with none accepted in between; what the refresh throws; `CancellationError` if the
  ///   task is cancelled meanwhile.
  public func refresh(after rejected: Credential) async throws -> Credential {
    try await perform { machine, id in machine.refresh(after: rejected, id: id) }
  }

  /// Says that the server accepted `credential` (it answered other than 401), which ends a row of
  /// refreshes.
  public func accepted(_ credential: Credential) {
    state.withLock { $0.machine.accepted(credential) }
  }

  private func perform(
    _ event:
      @Sendable (inout CredentialRefreshMachine<Credential>, UInt64) ->
      CredentialRefreshMachine<Credential>
      .Action
  ) async throws -> Credential {
    let id = state.withLock { state in
      state.nextID &+= 1
      return state.nextID
    }
    return try await withTaskCancellationHandler(
      operation: {
        try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Credential, any Error>) in
          let action = state.withLock { state -> CredentialRefreshMachine<Credential>.Action? in
            // Cancelled before it could wait: the handler below found nothing to resume.
            if Task.isCancelled { return nil }
            let action = event(&state.machine, id)
            switch action {
            case .wait, .start: state.continuations[id] = continuation
            case .use, .fail: break
            }
            return action
          }
          switch action {
          case .use(let credential)?: continuation.resume(returning: credential)
          case .fail(let error)?: continuation.resume(throwing: error)
          case .wait?: break
          case .start(let from)?: startRefresh(from: from)
          case nil: continuation.resume(throwing: CancellationError())
          }
        }
      },
      onCancel: {
        let cancelled = state.withLock { state in
          state.machine.cancel(id: id) ? state.continuations.removeValue(forKey: id) : nil
        }
        cancelled?.resume(throwing: CancellationError())
      })
  }

  /// Runs the refresh in a task of its own, then resumes its waiters with the lock released.
  private func startRefresh(from credential: Credential?) {
    Task {
      let result: Result<Credential, any Error>
      do {
        result = .success(try await refresh(credential))
      } catch {
        result = .failure(error)
      }
      let waiters = state.withLock { state in
        state.machine.refreshEnded(with: try? result.get()).compactMap { state.continuations.removeValue(forKey: $0) }
      }
      for waiter in waiters { waiter.resume(with: result) }
    }
  }
}
