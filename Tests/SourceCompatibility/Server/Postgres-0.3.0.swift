// Calls that compiled against PacePostgres 0.3.0 (tag 0.3.0, b987f07, trait PostgreSQL): the names
// 0.3.0 added, with their released labels. Not a test target: Scripts/check-source-compatibility.sh
// --server type-checks this file against the server build (.build-server) and fails on an error
// (deprecation warnings are expected and allowed).
// Spelled as released: a rename leaves this file alone (its old name must still compile here).
import Logging
import Pace
import PacePostgres
import PostgresNIO

func postgresCallsOf030(_ configuration: PostgresClient.Configuration, client: PostgresClient) async throws {
  // A store built from the app's configuration, sharing the limit among a fleet while PostgreSQL is away.
  let store = try PostgresRateLimitStore(
    configuration: configuration, table: "pace_rate_limits",
    whenUnavailable: .shareLimit(among: .learned(assuming: 4, heartbeatInterval: .seconds(5))), timeout: .seconds(1),
    logger: Logger(label: "rate-limits"))
  _ = try PostgresRateLimitStore(client: client, whenUnavailable: .shareLimit(among: .instances(3)))
  let policy: PostgresRateLimitStore.UnavailablePolicy = store.whenUnavailable
  switch policy {
  case .throwError: print("throw")
  case .allow: print("allow")
  case .deny(let retryAfter): print(retryAfter)
  case .fallback(let limiter): print(limiter.limit)
  case .shareLimit(let fleet): print(fleet.assumedCount, fleet.heartbeatInterval as Any, fleet.liveSpan as Any)
  }
  let fleet: PostgresRateLimitStore.FleetSize = .instances(2)
  let live: Int = try await store.heartbeat()
  let size: Int? = store.fleetSize
  _ = (fleet, live, size)
  try await store.run()

  // The store behind a keyed limiter, one limit or a limit per key, for every policy.
  _ = KeyedRateLimiter<String>(limit: .slidingWindow(100, per: .seconds(60)), clock: ContinuousClock(), store: store)
  _ = KeyedRateLimiter<String>(
    limits: { key in
      key.hasPrefix("pro:") ? .fixedWindow(1_000, per: .seconds(60)) : .slidingWindow(100, per: .seconds(60))
    },
    clock: ContinuousClock(), store: store)
  let decision: RateLimitDecision = try await store.tryAcquire(
    "key", cost: 1, limit: .fixedWindow(10, per: .seconds(1)))
  _ = decision

  // A debouncer built from the configuration, keeping calls locally while PostgreSQL is away.
  let debouncer = try PostgresDebouncer<String>(
    configuration: configuration, quiet: .seconds(2), maxWait: .seconds(10),
    circuitBreaker: CircuitBreaker(), whenUnavailable: .keepLocally(capacity: 1_000)
  ) { key, payload in print(key, payload) }
  switch debouncer.whenUnavailable {
  case .throwError: print("throw")
  case .keepLocally(let capacity): print(capacity)
  }
  let breaker: CircuitBreaker = debouncer.circuitBreaker
  _ = breaker
  try await debouncer.run()
}
