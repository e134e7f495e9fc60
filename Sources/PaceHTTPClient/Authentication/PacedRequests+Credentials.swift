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
  ///   - isConnectionError: Whether an error the attempt threw is a connection failure that a
  ///     retry may mend.
  ///   - attempt: One attempt with the credential: the body and the response's head.
  /// - Returns: The last attempt's body and head, as `send(key:idempotent:…)` returns them.
  /// - Throws: ``AuthenticationError/refreshLoop(attempts:)`` when the server refuses every
  ///   refreshed credential; what the refresh throws; what `send(key:idempotent:…)` throws.
  public func send<Body: Sendable, Credential: Sendable & Equatable>(
    key: String,
    idempotent: Bool,
    credentials: CredentialRefresher<Credential>,
    isConnectionError: @Sendable (any Error) -> Bool = { _ in false },
    _ attempt: @Sendable (Credential) async throws -> (Body, ResponseHead)
  ) async throws -> (Body, ResponseHead) {
    var credential = try await credentials.current()
    while true {
      let sent = credential
      let response = try await send(key: key, idempotent: idempotent, isConnectionError: isConnectionError) {
        try await attempt(sent)
      }
      guard response.1.status == 401 else {
        credentials.accepted(sent)
        return response
      }
      credential = try await credentials.refresh(after: sent)
    }
  }
}
