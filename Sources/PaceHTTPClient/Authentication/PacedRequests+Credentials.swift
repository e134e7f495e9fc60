import Pace

extension PacedRequests {
  /// Sends a request with a credential, refreshing it once for all the requests the server
  /// refuses together (401), and sending this one again with the new credential.
  ///
  /// ```swift
  /// let credentials = CredentialRefresher<String> { _ in try await signIn() }
  /// let (data, head) = try await requests.send(
  ///   key: origin, idempotent: true, credentials: credentials
  /// ) { token in
  ///   try await fetch(request, bearer: token)
  /// }
  /// ```
  ///
  /// Each send, the first and every one after a refresh, goes through the plain
  /// `send(key:idempotent:…)`: paced by the key's limiter and retried as its strategy says. A 401 is sent again whether the request is idempotent or not: the server
  /// refused it before acting on it. An answer other than 401 is returned, and tells `credentials`
  /// that its credential was accepted.
  ///
  /// - Parameters:
  ///   - key: What the server counts separately (see `send(key:idempotent:…)`).
  ///   - idempotent: Whether the request may be sent twice.
  ///   - credentials: Where the credential comes from, and who refreshes it.
  ///   - deadline: How long the whole of it may take from this call, every send and every wait
  ///     included: each send gets what is left of it, and the wait for a refresh ends at it
  ///     (``PacedRequestsError/deadlineExceeded(needed:remaining:)``; the refresh itself goes on
  ///     for the other requests that wait for it). Nil (the default) for none.
  ///   - attemptTimeout: How long one attempt may run (see `send(key:idempotent:…)`).
  ///   - isConnectionError: Whether an error the attempt threw is a connection failure that a
  ///     retry may mend.
  ///   - isolation: The caller's actor; leave the default.
  ///   - attempt: One attempt with the credential: the body and the response's head.
  /// - Returns: The last attempt's body and head, as `send(key:idempotent:…)` returns them.
  /// - Throws: ``AuthenticationError/refreshLoop(attempts:)`` when the server refuses every
  ///   refreshed credential; what the refresh throws; what `send(key:idempotent:…)` throws.
  public func send<Body: Sendable, Credential: Sendable & Equatable>(
    key: String,
    idempotent: Bool,
    credentials: CredentialRefresher<Credential>,
    deadline: Duration? = nil,
    attemptTimeout: Duration? = nil,
    isConnectionError: @Sendable (any Error) -> Bool = { _ in false },
    isolation: isolated (any Actor)? = #isolation,
    _ attempt: @Sendable (Credential) async throws -> (Body, ResponseHead)
  ) async throws -> (Body, ResponseHead) {
    let end = deadline.map { time.now().advanced(by: $0) }
    /// What is left of the deadline, or `deadlineExceeded` once nothing is.
    func remaining() throws -> Duration? {
      guard let end else { return nil }
      let left = time.now().duration(to: end)
      guard left > .zero else { throw PacedRequestsError.deadlineExceeded(needed: nil, remaining: .zero) }
      return left
    }
    var credential = try await credentials.current()
    while true {
      let sent = credential
      let response = try await send(
        key: key, idempotent: idempotent, deadline: try remaining(), attemptTimeout: attemptTimeout,
        isConnectionError: isConnectionError, isolation: isolation
      ) {
        try await attempt(sent)
      }
      guard response.1.status == 401 else {
        credentials.accepted(sent)
        return response
      }
      credential = try await refreshed(credentials, after: sent, before: end)
    }
  }

  /// `credentials` refreshed after `sent` was refused, waited for no later than `end`.
  private func refreshed<Credential: Sendable & Equatable>(
    _ credentials: CredentialRefresher<Credential>, after sent: Credential, before end: PaceInstant?
  ) async throws -> Credential {
    guard let end else { return try await credentials.refresh(after: sent) }
    guard time.now() < end else { throw PacedRequestsError.deadlineExceeded(needed: nil, remaining: .zero) }
    // A task of its own, so that the deadline can take this request out of the wait alone.
    return try await time.value(of: Task { try await credentials.refresh(after: sent) }, cutAt: end)
  }
}
