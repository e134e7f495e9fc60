public import CoreMetrics
public import Pace

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An app's requests paced by what the servers say, and retried when a retry can mend them: the
/// one object an app holds, whatever its HTTP library.
///
/// ```swift
/// let requests = PacedRequests()
/// let (data, head) = try await requests.send(key: "https://api.example.com", idempotent: true) {
///   try await fetch(request)        // one attempt: the body and the response's head
/// }
/// ```
///
/// ``send(key:idempotent:deadline:attemptTimeout:isConnectionError:isolation:_:)`` is the loop the URLSession and AsyncHTTPClient
/// glue call. For each attempt it:
/// 1. waits for the key's turn in its `ServerPacedLimiter` (the server's `RateLimit`,
///    `X-RateLimit-*` and `Retry-After` of earlier responses hold it until the quota allows);
/// 2. runs the attempt, and records what its response said (or that it had none, or that a cache
///    answered: `Age` above 0, whose fields are not current);
/// 3. asks the `RetryStrategy` whether to try again (429, 503, connection errors; idempotent
///    requests only, by default), and the `RetryBudget` whether a retry is in the budget; if
///    so, waits the policy's delay (at least the server's `Retry-After`) and goes back to 1.
///
/// When the attempts or the budget run out, or the server asks for a `Retry-After` longer than
/// the policy's maximum, `send` returns the last response (a final 429 or 503 is an answer the
/// caller can read); it rethrows the last connection error. A wait the limiter refuses (longer
/// than `maximumWait`) throws `ServerPacingError`. Cancellation throws `CancellationError` at
/// once from any wait.
public final class PacedRequests: Sendable {
  /// When to try again.
  public let retryStrategy: RetryStrategy
  /// How many retries recent requests allow; `nil` for no budget.
  public let retryBudget: RetryBudget?
  /// The limiter that holds each key's requests until the server's quota allows them.
  public let limiter: ServerPacedLimiter<String>

  /// Time, timers and sleeps for the send loop.
  let time: SendClock
  let unixTime: @Sendable () -> Duration
  let metrics: PacedRequestsMetrics
  /// When a slow attempt of an idempotent request is hedged; nil for never.
  let hedge: Hedge?
  /// Each key's recent latencies, when the hedge reads them.
  let latencies: LatencyWindows?
  /// The circuit breaker each key's attempts go through; nil for none.
  public let breaker: KeyedCircuitBreaker<String>?
  /// What a retry after a connection error waits on until the network path is up; nil for none.
  public let connectivity: (any ConnectivitySignal)?
  /// Each key's concurrency limit as it stands; nil when the requests have none.
  public let concurrency: UpstreamConcurrencyLimits?

  /// Paced requests.
  ///
  /// - Parameters:
  ///   - retry: When to try again; `RetryStrategy()` by default: 3 attempts, backoff from 200 ms to
  ///     20 s, 429 and 503.
  ///   - budget: How many retries recent requests allow: 10 % of the last 10 s's requests plus
  ///     1 a second by default (on `ContinuousClock`: pass a budget on a `TestScheduler` in
  ///     tests); `nil` for no budget.
  ///   - hedge: When a slow attempt of an idempotent request is sent a second time, the first
  ///     answer winning (``Hedge``); nil (the default) for never. A hedge is withdrawn from
  ///     `budget`.
  ///   - breaker: The circuit breaker of each key (make it with the same clock); nil (the default)
  ///     for none. An open breaker fails a send at once with `CircuitBreakerError`, saying until
  ///     when. Connection errors, timeouts and 5xx answers are failures, except a 503 with
  ///     `Retry-After` (the server says when to come back, and the limiter holds the key until
  ///     then); a 429 is pacing, reported as ignored; any other answer is a success.
  ///   - connectivity: What a retry after a connection error waits on, before its back-off, until
  ///     the network path is up (`NetworkPathConnectivity` on Apple platforms,
  ///     `ManualConnectivity` or a signal of the app's elsewhere), no later than the send's
  ///     deadline; nil (the default) retries without waiting for it.
  ///   - concurrency: How many attempts of one key may be in flight at once
  ///     (``ConcurrencyLimit/adaptive(_:)``: a limit per key that moves with the upstream's round
  ///     trips and its 429 and 5xx answers); nil (the default) for no limit. An attempt waits for
  ///     a place after the key's turn in the limiter, until the send's deadline; a hedge goes only
  ///     if a place is free.
  ///   - maximumWait: The longest a request waits for the server's quota. Not negative.
  ///   - localModel: How the limiter models a server's quota per window (see `ServerPacedLimiter`).
  ///   - clock: The clock for waits and backoff: `ContinuousClock` by default, or a `TestScheduler`.
  ///   - unixTime: The Unix time now, for the fields that send dates; the system's by default. A
  ///     test on virtual time passes a time that follows its clock.
  ///   - metricsFactory: Where retries, budget withdrawals and 429s are counted (see
  ///     <doc:ServerPacing#Counted>); the process's `MetricsSystem` by default, which counts
  ///     nothing until a backend is bootstrapped.
  public init<C: Clock>(
    retry: RetryStrategy = RetryStrategy(),
    budget: RetryBudget? = RetryBudget(),
    hedge: Hedge? = nil,
    breaker: KeyedCircuitBreaker<String>? = nil,
    connectivity: (any ConnectivitySignal)? = nil,
    concurrency: ConcurrencyLimit? = nil,
    maximumWait: Duration = .seconds(60),
    localModel: RateLimit.Algorithm = .slidingWindow,
    clock: C = ContinuousClock(),
    unixTime: (@Sendable () -> Duration)? = nil,
    metricsFactory: any MetricsFactory = MetricsSystem.factory
  ) where C.Duration == Duration {
    retryStrategy = retry
    retryBudget = budget
    self.hedge = hedge
    self.breaker = breaker
    self.connectivity = connectivity
    latencies = hedge?.latencySamples.map { LatencyWindows(capacity: $0) }
    limiter = ServerPacedLimiter(maximumWait: maximumWait, localModel: localModel, clock: clock)
    time = SendClock(clock)
    self.unixTime = unixTime ?? Self.systemUnixTime
    metrics = PacedRequestsMetrics(factory: metricsFactory)
    let metrics = metrics
    self.concurrency = concurrency.map { UpstreamConcurrencyLimits($0.adaptiveLimit, clock: clock, metrics: metrics) }
  }

  /// The key of a request's origin: `scheme://host:port`, lowercased, the scheme's default port
  /// left out, an IPv6 address in brackets (`http://[::1]:8080`, as a URL writes it, whether
  /// `host` has them or not); what ``send(key:idempotent:deadline:attemptTimeout:isConnectionError:isolation:_:)``'s glue passes by
  /// default.
  public static func originKey(scheme: String, host: String, port: Int?) -> String {
    let scheme = scheme.lowercased()
    var host = host.lowercased()
    // Foundation's `URL.host` drops an IPv6 address's brackets; without them the port would read
    // as part of the address.
    if host.contains(":"), !host.hasPrefix("[") { host = "[\(host)]" }
    let defaultPort = scheme == "https" || scheme == "wss" ? 443 : scheme == "http" || scheme == "ws" ? 80 : nil
    guard let port, port != defaultPort else { return "\(scheme)://\(host)" }
    return "\(scheme)://\(host):\(port)"
  }

  /// Whether a request of `method` may be sent twice with the same effect (RFC 9110, section
  /// 9.2.2): `GET`, `HEAD`, `OPTIONS`, `TRACE`, `PUT` and `DELETE`, in any case.
  public static func isIdempotent(method: String) -> Bool {
    ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"].contains(method.uppercased())
  }

  /// Sends a request through the key's limiter, retrying as the policy and budget allow.
  ///
  /// - Parameters:
  ///   - key: What the server counts separately: the request's origin by default
  ///     (``originKey(scheme:host:port:)``), or a route or credential.
  ///   - idempotent: Whether the request may be sent twice (``isIdempotent(method:)``); only
  ///     those are retried unless the policy says otherwise.
  ///   - deadline: How long the whole send may take from this call: every wait (the key's turn,
  ///     a back-off, a hedge's delay, a wait for the network) and every attempt ends by then. A
  ///     wait known to pass it (a back-off, a `Retry-After`, a key with no quota left until it is
  ///     whole again) fails at once; a wait whose length is unknown (the key's queue, the network)
  ///     and an attempt are cut at the deadline. Nil (the default) for no deadline; zero or
  ///     negative fails before anything is sent.
  ///   - attemptTimeout: How long one attempt may run before it is cancelled; a cancelled attempt
  ///     is a timeout, which the policy retries as a connection error (idempotent requests only,
  ///     by default). Nil (the default) for none. Positive.
  ///   - isConnectionError: Whether an error the attempt threw is a connection failure that a
  ///     retry may mend; any other error is rethrown at once.
  ///   - isolation: The caller's actor; leave the default. A request reaches the key's limiter on
  ///     it before `send` first suspends, so that requests started in order from one actor are
  ///     paced, and start, in that order.
  ///   - attempt: One attempt: the body and the response's head. It must end when its task is
  ///     cancelled (URLSession's and AsyncHTTPClient's do), for a timeout or a deadline to end it.
  /// - Returns: The last attempt's body and head: a success, or the last retryable failure when
  ///   no retry is left.
  /// - Throws: The last attempt's error; `ServerPacingError` when the server's quota would hold
  ///   the request longer than `maximumWait`; ``PacedRequestsError/deadlineExceeded(needed:remaining:)``
  ///   when the deadline would pass, with the time the wait needed;
  ///   ``PacedRequestsError/attemptTimedOut(after:)`` when the last attempt timed out and no retry
  ///   was left; `CancellationError` if the task is cancelled.
  public func send<Body: Sendable>(
    key: String,
    idempotent: Bool,
    deadline: Duration? = nil,
    attemptTimeout: Duration? = nil,
    isConnectionError: @Sendable (any Error) -> Bool = { _ in false },
    isolation: isolated (any Actor)? = #isolation,
    _ attempt: @Sendable () async throws -> (Body, ResponseHead)
  ) async throws -> (Body, ResponseHead) {
    precondition(
      attemptTimeout.map { $0 > .zero } ?? true,
      "PacedRequests: attemptTimeout must be positive (got \(attemptTimeout ?? .zero))")
    return try await sendLoop(
      key: key, idempotent: idempotent, deadline: deadline, attemptTimeout: attemptTimeout,
      isConnectionError: isConnectionError, isolation: isolation, attempt)
  }

  /// The system's Unix time (`CLOCK_REALTIME`).
  @Sendable static func systemUnixTime() -> Duration {
    var time = timespec()
    clock_gettime(CLOCK_REALTIME, &time)
    return .seconds(Int64(time.tv_sec)) + .nanoseconds(Int64(time.tv_nsec))
  }
}
