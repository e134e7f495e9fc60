#if AsyncHTTPClient
public import AsyncHTTPClient
public import Logging
public import NIOCore
import NIOHTTP1
import NIOPosix
import Pace
public import PaceHTTPClient
import Tracing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension HTTPClient {
  /// The longest body of a retryable response read at once: a longer one, or one of unknown
  /// length, is left to the caller (and, if the request is retried, dropped with its connection).
  static let retriedBodyLimit = 64 * 1024

  /// Executes `request` through `requests`: held until the server's quota for its key allows it,
  /// and retried as their policy and budget allow.
  ///
  /// ```swift
  /// let requests = PacedRequests()
  /// let request = HTTPClientRequest(url: "https://api.example.com/items")
  /// let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10), pacedBy: requests)
  /// ```
  ///
  /// Each attempt is `execute(_:timeout:logger:)`, with the whole `timeout`; its response's
  /// `RateLimit`, `RateLimit-Policy`, `X-RateLimit-*` and `Retry-After` fields pace the key's next
  /// requests. A `429` or `503`, and a connection error (`isConnectionError(_:)`)
  /// of an idempotent request, are tried again after a backoff, at least the server's
  /// `Retry-After`, while the budget allows; a final `429` or `503` is returned. The body of a
  /// `429` or `503` with a `Content-Length` of 64 KiB at most is read before the response is
  /// returned or retried, so that its connection goes back to the pool; a longer one is left
  /// unread (a retry then drops it, and its connection).
  ///
  /// Each attempt is traced, with the client's tracer (`HTTPClient.Configuration.tracing`), as a
  /// span `pace.http_client.attempt` whose child is AsyncHTTPClient's own span of the request: how
  /// long the attempt was held before it went (`pace.http_client.wait`, in seconds: the server's
  /// pacing and the retry's backoff), which resend it is (`http.request.resend_count`), the status,
  /// and the fields read (`http.response.header.ratelimit`, `…ratelimit-policy`, `…retry-after`,
  /// `…age` and the `x-ratelimit-*` ones). Without a tracer nothing is recorded.
  ///
  /// A retry sends `request` again, body included. A `.bytes` body, or a `.stream` of a sequence
  /// that can be iterated again (an array of buffers, a file read anew), is re-sendable; a stream
  /// that can be iterated once (an `AsyncStream`, a request being proxied) is not: pass
  /// `idempotent: false` for such a request (under the default policy, which retries only
  /// idempotent requests, it is then sent once), or collect its body into `.bytes` first.
  ///
  /// - Parameters:
  ///   - request: The request.
  ///   - timeout: The deadline of each attempt. An attempt cut by it is tried again, for an
  ///     idempotent request, as a connection error is.
  ///   - requests: The paced requests that hold and retry it.
  ///   - key: What the server counts separately; the request's origin by default
  ///     (`PacedRequests.originKey(scheme:host:port:)`).
  ///   - idempotent: Whether the request may be sent twice; by default, whether its method is
  ///     `GET`, `HEAD`, `OPTIONS`, `TRACE`, `PUT` or `DELETE` (RFC 9110).
  ///   - collectingBodyUpTo: The most bytes of a body read within each attempt; nil (the default)
  ///     leaves the body to the caller, as `execute(_:timeout:logger:)` does. With it, the whole
  ///     body is read before `execute` returns (as `.bytes`), so that a connection cut mid-body is
  ///     tried again like any connection error; a longer body throws AsyncHTTPClient's
  ///     `NIOTooManyBytesError`. Without it, a cut in the body fails the caller's read, after
  ///     `execute` returned, where nothing can retry it.
  ///   - isConnectionError: Whether an error is a connection failure that a retry may mend, in
  ///     addition to those `isConnectionError(_:)` knows; nil (the default) for those alone.
  ///   - deadline: How long the whole execution may take from this call, every wait and attempt
  ///     included; nil (the default) for no deadline. See `PacedRequests.send(key:idempotent:deadline:…)`.
  ///   - logger: The logger of each attempt; the client's background logger by default.
  ///   - isolation: The caller's actor, so that requests started in order from it are paced in
  ///     that order; leave the default.
  /// - Returns: The last attempt's response.
  /// - Throws: The last attempt's error; `ServerPacingError` when the server's quota would hold the
  ///   request longer than the limiter's maximum wait; `PacedRequestsError` when the deadline
  ///   would pass or the last attempt timed out; `CancellationError` when the task is cancelled.
  public func execute(
    _ request: HTTPClientRequest,
    timeout: TimeAmount,
    pacedBy requests: PacedRequests,
    key: String? = nil,
    idempotent: Bool? = nil,
    collectingBodyUpTo maximumBodyBytes: Int? = nil,
    isConnectionError: (@Sendable (any Error) -> Bool)? = nil,
    deadline: Duration? = nil,
    logger: Logger? = nil,
    isolation: isolated (any Actor)? = #isolation
  ) async throws -> HTTPClientResponse {
    let key = key ?? Self.pacingKey(for: request.url)
    let idempotent = idempotent ?? PacedRequests.isIdempotent(method: request.method.rawValue)
    let attempts = AttemptTracing(tracer: tracer)
    // `timeout` is each attempt's: one cut by it is a timeout, retried as `send`'s own would be.
    let (response, _) = try await requests.send(
      key: key, idempotent: idempotent, deadline: deadline,
      isConnectionError: {
        Self.isConnectionError($0) || ($0 as? HTTPClientError) == .deadlineExceeded || isConnectionError?($0) == true
      },
      isolation: isolation
    ) {
      try await attempts.traced {
        try await self.attempt(
          request, timeout: timeout, pacedBy: requests, collectingBodyUpTo: maximumBodyBytes, logger: logger)
      }
    }
    return response
  }

  /// Executes `request` through `requests` with a credential from `credentials`, which
  /// `authorize` puts on each attempt's copy of the request: a 401 refreshes it once for every
  /// request refused with it, and sends this one again with the new credential (see
  /// `PacedRequests.send(key:idempotent:credentials:…)`).
  ///
  /// ```swift
  /// let tokens = CredentialRefresher<String> { _ in try await signIn() }
  /// let response = try await client.execute(
  ///   request, timeout: .seconds(10), pacedBy: requests, credentials: tokens
  /// ) { request, token in
  ///   request.headers.replaceOrAdd(name: "Authorization", value: "Bearer \(token)")
  /// }
  /// ```
  ///
  /// - Parameters:
  ///   - request: The request, without its credential.
  ///   - timeout: Each attempt's timeout.
  ///   - requests: The paced requests that hold and retry it.
  ///   - credentials: Where the credential comes from, and who refreshes it.
  ///   - key: What the server counts separately; the request's origin by default.
  ///   - idempotent: Whether the request may be sent twice; by default, by its method.
  ///   - collectingBodyUpTo: The most bytes of a body read within each attempt (see the plain
  ///     `execute(_:timeout:pacedBy:…)`).
  ///   - isConnectionError: Whether an error is a connection failure that a retry may mend.
  ///   - deadline: How long the whole execution may take from this call, refreshes included.
  ///   - logger: The logger of each attempt.
  ///   - isolation: The caller's actor; leave the default.
  ///   - authorize: Puts the credential on a copy of the request.
  /// - Returns: The last attempt's response.
  /// - Throws: What the plain `execute(_:timeout:pacedBy:…)` throws;
  ///   `AuthenticationError.refreshLoop(attempts:)` when the server refuses every refreshed
  ///   credential; what the refresh throws.
  public func execute<Credential: Sendable & Equatable>(
    _ request: HTTPClientRequest,
    timeout: TimeAmount,
    pacedBy requests: PacedRequests,
    credentials: CredentialRefresher<Credential>,
    key: String? = nil,
    idempotent: Bool? = nil,
    collectingBodyUpTo maximumBodyBytes: Int? = nil,
    isConnectionError: (@Sendable (any Error) -> Bool)? = nil,
    deadline: Duration? = nil,
    logger: Logger? = nil,
    isolation: isolated (any Actor)? = #isolation,
    authorize: @escaping @Sendable (inout HTTPClientRequest, Credential) -> Void
  ) async throws -> HTTPClientResponse {
    let key = key ?? Self.pacingKey(for: request.url)
    let idempotent = idempotent ?? PacedRequests.isIdempotent(method: request.method.rawValue)
    let attempts = AttemptTracing(tracer: tracer)
    let (response, _) = try await requests.send(
      key: key, idempotent: idempotent, credentials: credentials, deadline: deadline,
      isConnectionError: {
        Self.isConnectionError($0) || ($0 as? HTTPClientError) == .deadlineExceeded || isConnectionError?($0) == true
      },
      isolation: isolation
    ) { credential in
      var authorized = request
      authorize(&authorized, credential)
      return try await attempts.traced {
        try await self.attempt(
          authorized, timeout: timeout, pacedBy: requests, collectingBodyUpTo: maximumBodyBytes, logger: logger)
      }
    }
    return response
  }

  /// One attempt of ``execute(_:timeout:pacedBy:key:idempotent:collectingBodyUpTo:isConnectionError:deadline:logger:isolation:)``.
  private func attempt(
    _ request: HTTPClientRequest, timeout: TimeAmount, pacedBy requests: PacedRequests,
    collectingBodyUpTo maximumBodyBytes: Int?, logger: Logger?
  ) async throws -> (HTTPClientResponse, ResponseHead) {
    var response = try await self.execute(request, timeout: timeout, logger: logger)
    let head = ResponseHead(
      status: Int(response.status.code), headerFields: response.headers.map { ($0.name, $0.value) })
    if let maximumBodyBytes {
      // Within the attempt: a connection cut mid-body fails the attempt, which a retry may mend.
      response.body = .bytes(try await response.body.collect(upTo: maximumBodyBytes))
    } else if requests.retryStrategy.retryableStatuses.contains(head.status),
      let length = response.headers.first(name: "Content-Length").flatMap(Int.init),
      length <= Self.retriedBodyLimit
    {
      // Read now, so that the connection is reused whether or not the request is retried.
      response.body = .bytes(try await response.body.collect(upTo: Self.retriedBodyLimit))
    }
    return (response, head)
  }

  /// Whether `error` is a connection failure that another attempt may mend: the connection could
  /// not be made (refused, unreachable, timed out), or was closed or reset before the response
  /// came, or the request's deadline passed while waiting for one.
  ///
  /// A closed connection or a read timeout may come after the server acted on the request: only
  /// idempotent requests are retried after one, unless the policy says otherwise.
  public static func isConnectionError(_ error: any Error) -> Bool {
    switch error {
    case is HTTPParserError:
      // A response cut mid-head (or mid-body, while it is read): the connection ended early.
      return true
    case let error as HTTPClientError:
      return [.connectTimeout, .remoteConnectionClosed, .readTimeout, .getConnectionFromPoolTimeout].contains(error)
    case is NIOConnectionError:
      return true
    case let error as ChannelError:
      switch error {
      case .connectTimeout, .ioOnClosedChannel, .eof: return true
      default: return false
      }
    case let error as IOError:
      return [ECONNREFUSED, ECONNRESET, ECONNABORTED, ETIMEDOUT, EHOSTUNREACH, ENETUNREACH, ENETDOWN, EPIPE]
        .contains(error.errnoCode)
    default:
      return false
    }
  }

  /// The key of `url`'s origin, or the URL itself when it has none (a Unix socket's).
  static func pacingKey(for url: String) -> String {
    guard let parsed = URLParts(url) else { return url }
    return PacedRequests.originKey(scheme: parsed.scheme, host: parsed.host, port: parsed.port)
  }
}

/// The spans of one paced send's attempts: each a child of the caller's span, numbered, with how
/// long it was held before it went. Without a tracer (none configured, or the no-op one) it
/// allocates nothing and starts no span.
struct AttemptTracing: Sendable {
  static let spanName = "pace.http_client.attempt"
  static let wait = "pace.http_client.wait"
  static let resendCount = "http.request.resend_count"
  static let statusCode = "http.response.status_code"
  static let errorType = "error.type"
  /// The response fields a paced client reads, recorded as OpenTelemetry's
  /// `http.response.header.<name>`.
  static let fieldsRead = [
    "ratelimit", "ratelimit-policy", "retry-after", "age", "x-ratelimit-limit", "x-ratelimit-remaining",
    "x-ratelimit-reset",
  ]

  private struct Progress {
    /// When the previous attempt ended, or the send began.
    var since: ContinuousClock.Instant
    var attempts = 0
  }

  private let tracer: (any Tracer)?
  private let progress: LockedState<Progress>?

  init(tracer: (any Tracer)?) {
    guard let tracer, !(tracer is NoOpTracer) else {
      (self.tracer, progress) = (nil, nil)
      return
    }
    self.tracer = tracer
    progress = LockedState(Progress(since: .now))
  }

  func traced(
    _ attempt: () async throws -> (HTTPClientResponse, ResponseHead)
  ) async throws -> (HTTPClientResponse, ResponseHead) {
    guard let tracer, let progress else { return try await attempt() }
    let started = ContinuousClock.now
    let (since, resends) = progress.withLock { progress in
      defer { progress.attempts += 1 }
      return (progress.since, progress.attempts)
    }
    defer { progress.withLock { $0.since = .now } }
    return try await tracer.withSpan(Self.spanName, ofKind: .internal) { span in
      let (seconds, attoseconds) = since.duration(to: started).components
      span.attributes[Self.wait] = Double(seconds) + Double(attoseconds) / 1e18
      if resends > 0 { span.attributes[Self.resendCount] = resends }
      do {
        let result = try await attempt()
        span.attributes[Self.statusCode] = result.1.status
        for name in Self.fieldsRead {
          let values = result.1.headerFields.filter { $0.name.lowercased() == name }.map(\.value)
          if !values.isEmpty { span.attributes["http.response.header.\(name)"] = values }
        }
        return result
      } catch {
        span.attributes[Self.errorType] = String(describing: type(of: error))
        throw error
      }
    }
  }
}

/// The scheme, host and port of an absolute URL, without Foundation.
struct URLParts: Equatable {
  let scheme: String
  let host: String
  let port: Int?

  init?(_ url: String) {
    guard let colon = url.firstIndex(of: ":"), url[colon...].hasPrefix("://") else { return nil }
    scheme = String(url[..<colon])
    var authority = url[url.index(colon, offsetBy: 3)...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
    if let userInfoEnd = authority.lastIndex(of: "@") { authority = authority[authority.index(after: userInfoEnd)...] }
    // An IPv6 literal keeps its brackets; a port follows the last `:` after them.
    let hostEnd = authority.lastIndex(of: "]") ?? authority.startIndex
    if let colon = authority[hostEnd...].lastIndex(of: ":") {
      guard let port = Int(authority[authority.index(after: colon)...]), (0...65_535).contains(port) else { return nil }
      host = String(authority[..<colon])
      self.port = port
    } else {
      host = String(authority)
      port = nil
    }
    guard !scheme.isEmpty, !host.isEmpty else { return nil }
  }
}
#endif
