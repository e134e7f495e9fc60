public import Foundation
import Pace

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

extension URLSession {
  /// Loads `request` through `requests`: held until the server's quota for its key allows it, and
  /// retried as their policy and budget allow.
  ///
  /// ```swift
  /// let requests = PacedRequests()
  /// let (data, response) = try await URLSession.shared.data(for: request, pacedBy: requests)
  /// ```
  ///
  /// Each attempt is `data(for:)`; its response's `RateLimit`, `RateLimit-Policy`,
  /// `X-RateLimit-*` and `Retry-After` fields pace the key's next requests. A `429` or `503`, and
  /// a connection error (`isConnectionError(_:)`) of an idempotent request, are tried
  /// again after a backoff, at least the server's `Retry-After`, while the budget allows; a final
  /// `429` or `503` is returned, as `data(for:)` returns it. A request with a body sends the same
  /// `httpBody` again; one with an `httpBodyStream` (which can be read once) is never retried.
  ///
  /// On Linux, where FoundationNetworking's `data(for:)` can deadlock when it is cancelled
  /// (swift-corelibs-foundation#5412), each attempt is a data task with a completion handler
  /// instead. A cancelled attempt (an `attemptTimeout` that passes, or a cancelled caller) throws
  /// `URLError(.cancelled)` at once, as `data(for:)` does, but its transfer is not cancelled: it
  /// runs on to its end or the session's own timeout, holding its connection until then.
  ///
  /// - Parameters:
  ///   - request: The request.
  ///   - requests: The paced requests that hold and retry it; one for the app, or per API.
  ///   - key: What the server counts separately; the request's origin by default
  ///     (``PacedRequests/originKey(scheme:host:port:)``). Pass a credential's or route's key when
  ///     the server counts by one.
  ///   - idempotent: Whether the request may be sent twice; by default, whether its method is
  ///     `GET`, `HEAD`, `OPTIONS`, `TRACE`, `PUT` or `DELETE` (RFC 9110).
  ///   - deadline: How long the whole load may take from this call, every wait and attempt
  ///     included; nil (the default) for no deadline. See
  ///     ``PacedRequests/send(key:idempotent:deadline:attemptTimeout:isConnectionError:isolation:_:)``.
  ///   - attemptTimeout: How long one attempt may take before it is cancelled (and retried, for an
  ///     idempotent request); nil (the default) leaves it to the session's own timeout.
  ///   - isConnectionError: Whether an error is a connection failure that a retry may mend, in
  ///     addition to those ``isConnectionError(_:)`` knows; nil (the default) for those alone.
  ///   - isolation: The caller's actor, so that requests started in order from it are paced in
  ///     that order; leave the default.
  /// - Returns: The last attempt's data and response.
  /// - Throws: The last attempt's error; `ServerPacingError` when the server's quota would hold the
  ///   request longer than the limiter's maximum wait; ``PacedRequestsError`` when the deadline
  ///   would pass or the last attempt timed out; `CancellationError` when the task is cancelled.
  public func data(
    for request: URLRequest, pacedBy requests: PacedRequests, key: String? = nil, idempotent: Bool? = nil,
    deadline: Duration? = nil, attemptTimeout: Duration? = nil,
    isConnectionError: (@Sendable (any Error) -> Bool)? = nil,
    isolation: isolated (any Actor)? = #isolation
  ) async throws -> (Data, URLResponse) {
    let key = key ?? Self.pacingKey(for: request.url)
    let idempotent = Self.mayBeSentTwice(request, idempotent: idempotent)
    let (loaded, _) = try await requests.send(
      key: key, idempotent: idempotent, deadline: deadline, attemptTimeout: attemptTimeout,
      isConnectionError: { Self.isConnectionError($0) || isConnectionError?($0) == true }, isolation: isolation
    ) {
      let loaded = try await self.attempt(request)
      return (loaded, Self.head(of: loaded.1))
    }
    return loaded
  }

  /// Loads `request` through `requests` with a credential from `credentials`, which `authorize`
  /// puts on each attempt's copy of the request: a 401 refreshes it once for every request
  /// refused with it, and sends this one again with the new credential (see
  /// ``PacedRequests/send(key:idempotent:credentials:deadline:attemptTimeout:isConnectionError:isolation:_:)``).
  ///
  /// ```swift
  /// let tokens = CredentialRefresher<String> { _ in try await signIn() }
  /// let (data, response) = try await URLSession.shared.data(
  ///   for: request, pacedBy: requests, credentials: tokens
  /// ) { request, token in
  ///   request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
  /// }
  /// ```
  ///
  /// - Parameters:
  ///   - request: The request, without its credential.
  ///   - requests: The paced requests that hold and retry it.
  ///   - credentials: Where the credential comes from, and who refreshes it.
  ///   - key: What the server counts separately; the request's origin by default.
  ///   - idempotent: Whether the request may be sent twice; by default, by its method.
  ///   - deadline: How long the whole load may take from this call, refreshes included.
  ///   - attemptTimeout: How long one attempt may take before it is cancelled.
  ///   - isConnectionError: Whether an error is a connection failure that a retry may mend, in
  ///     addition to those ``isConnectionError(_:)`` knows.
  ///   - isolation: The caller's actor; leave the default.
  ///   - authorize: Puts the credential on a copy of the request.
  /// - Returns: The last attempt's data and response.
  /// - Throws: What ``data(for:pacedBy:key:idempotent:deadline:attemptTimeout:isConnectionError:isolation:)``
  ///   throws; `AuthenticationError.refreshLoop(attempts:)` when the server refuses every
  ///   refreshed credential; what the refresh throws.
  public func data<Credential: Sendable & Equatable>(
    for request: URLRequest, pacedBy requests: PacedRequests, credentials: CredentialRefresher<Credential>,
    key: String? = nil, idempotent: Bool? = nil, deadline: Duration? = nil, attemptTimeout: Duration? = nil,
    isConnectionError: (@Sendable (any Error) -> Bool)? = nil,
    isolation: isolated (any Actor)? = #isolation,
    authorize: @escaping @Sendable (inout URLRequest, Credential) -> Void
  ) async throws -> (Data, URLResponse) {
    let key = key ?? Self.pacingKey(for: request.url)
    let idempotent = Self.mayBeSentTwice(request, idempotent: idempotent)
    let (loaded, _) = try await requests.send(
      key: key, idempotent: idempotent, credentials: credentials, deadline: deadline, attemptTimeout: attemptTimeout,
      isConnectionError: { Self.isConnectionError($0) || isConnectionError?($0) == true }, isolation: isolation
    ) { credential in
      var authorized = request
      authorize(&authorized, credential)
      let loaded = try await self.attempt(authorized)
      return (loaded, Self.head(of: loaded.1))
    }
    return loaded
  }

  /// One attempt: `data(for:)`, except where FoundationNetworking's `data(for:)` can deadlock
  /// when it is cancelled (see ``cancellableData(for:)``).
  func attempt(_ request: URLRequest) async throws -> (Data, URLResponse) {
    #if canImport(FoundationNetworking)
    try await cancellableData(for: request)
    #else
    try await data(for: request)
    #endif
  }

  #if canImport(FoundationNetworking)
  /// `data(for:)` for FoundationNetworking (Linux), whose cancellation leaves the transfer to
  /// finish instead of cancelling it.
  ///
  /// FoundationNetworking's own `data(for:)` cancels its `URLSessionTask` from the task's
  /// cancellation handler, which the runtime runs holding the task's status lock, and
  /// `URLSessionTask.cancel()` waits for the session's queue; when that queue is meanwhile
  /// finishing the transfer, it resumes the task, which waits for the status lock: both wait for
  /// good (swift-corelibs-foundation#5412; Swift 6.3.1 has it). A cancel that comes as the
  /// transfer ends can also trap inside FoundationNetworking ("a task that is not in the
  /// registry"). So a cancelled attempt throws `URLError(.cancelled)` at once, as `data(for:)`
  /// does, and its transfer goes on to its end (or the session's timeout) unobserved: it is never
  /// cancelled.
  func cancellableData(for request: URLRequest) async throws -> (Data, URLResponse) {
    // The caller's continuation, taken by whichever ends the wait first (the transfer or the
    // caller's cancellation), and whether the caller was cancelled: under the lock.
    let waiter = LockedState<(continuation: CheckedContinuation<(Data, URLResponse), any Error>?, cancelled: Bool)>(
      (nil, false))
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<(Data, URLResponse), any Error>) in
        let cancelled = waiter.withLock { state in
          if !state.cancelled { state.continuation = continuation }
          return state.cancelled
        }
        if cancelled {
          continuation.resume(throwing: URLError(.cancelled))
          return
        }
        dataTask(with: request) { data, response, error in
          let continuation = waiter.withLock { state in
            defer { state.continuation = nil }
            return state.continuation
          }
          if let response, error == nil {
            continuation?.resume(returning: (data ?? Data(), response))
          } else {
            continuation?.resume(throwing: error ?? URLError(.badServerResponse))
          }
        }.resume()
      }
    } onCancel: {
      let continuation = waiter.withLock { state in
        state.cancelled = true
        defer { state.continuation = nil }
        return state.continuation
      }
      // Resumed from another thread, once the runtime has released the task's status lock.
      if let continuation { DispatchQueue.global().async { continuation.resume(throwing: URLError(.cancelled)) } }
    }
  }
  #endif

  /// Whether `error` is a connection failure that another attempt may mend: the host could not be
  /// found or reached, the connection was lost (or cut mid-answer: `cannotParseResponse`, and
  /// `unknown`, which FoundationNetworking on Linux reports for a cut), the request timed out, or
  /// the device is offline.
  ///
  /// A timeout or a lost connection may come after the server acted on the request: only
  /// idempotent requests are retried after one, unless the policy says otherwise.
  public static func isConnectionError(_ error: any Error) -> Bool {
    guard let error = error as? URLError else { return false }
    switch error.code {
    case .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .networkConnectionLost, .notConnectedToInternet,
      .timedOut, .cannotParseResponse, .unknown:
      return true
    default:
      return false
    }
  }

  /// Whether `request` may be sent again: as `idempotent` says, or by its method; never when its
  /// body is a stream, which can be read once.
  static func mayBeSentTwice(_ request: URLRequest, idempotent: Bool?) -> Bool {
    request.httpBodyStream == nil && (idempotent ?? PacedRequests.isIdempotent(method: request.httpMethod ?? "GET"))
  }

  /// The key of `url`'s origin, or `""` for a URL without a host (a file, say): every such
  /// request shares one key, which no server paces.
  static func pacingKey(for url: URL?) -> String {
    url.flatMap(PacedRequests.originKey(for:)) ?? ""
  }

  /// The status and header fields of `response`; a response that is not HTTP's (a file's) has
  /// status 200 and no fields.
  static func head(of response: URLResponse) -> ResponseHead {
    guard let response = response as? HTTPURLResponse else { return ResponseHead(status: 200, headerFields: []) }
    var fields: [(name: String, value: String)] = []
    for (name, value) in response.allHeaderFields {
      if let name = name as? String, let value = value as? String { fields.append((name, value)) }
    }
    return ResponseHead(status: response.statusCode, headerFields: fields)
  }
}

extension PacedRequests {
  /// The key of `url`'s origin (`scheme://host:port`, as ``originKey(scheme:host:port:)``
  /// writes it), what the glue passes by default; `nil` for a URL without a scheme or a host.
  ///
  /// ```swift
  /// PacedRequests.originKey(for: URL(string: "HTTPS://API.example.com:443/v1/items?page=2")!)
  /// // "https://api.example.com"
  /// ```
  public static func originKey(for url: URL) -> String? {
    guard let scheme = url.scheme, let host = url.host, !host.isEmpty else { return nil }
    return originKey(scheme: scheme, host: host, port: url.port)
  }
}
