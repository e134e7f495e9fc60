// Calls that compiled against PacePostgres 0.2.0 (tag 0.2.0, 278bc1f, trait PostgreSQL): the names
// 0.2.0 added, with their released labels. Not a test target: Scripts/check-source-compatibility.sh
// --server type-checks this file against the server build (.build-server) and fails on an error
// (deprecation warnings are expected and allowed).
// Spelled as released: a rename leaves this file alone (its old name must still compile here).
import Logging
import Pace
import PacePostgres
import PostgresNIO

func postgresCallsOf020(_ client: PostgresClient, fallback: KeyedRateLimiter<String>) async throws {
  let store = try PostgresRateLimitStore(
    client: client, table: "pace_rate_limits", whenUnavailable: .fallback(fallback), timeout: .seconds(1),
    circuitBreaker: CircuitBreaker(failureThreshold: 5, coolDown: .milliseconds(500)), purgeInterval: .seconds(60),
    directConnection: nil, logger: Logger(label: "rate-limits"))
  _ = try PostgresRateLimitStore(client: client, whenUnavailable: .deny(retryAfter: .seconds(1)))
  _ = try PostgresRateLimitStore(client: client, whenUnavailable: .allow)
  let statement: String = try PostgresRateLimitStore.decisionStatement(table: "pace_rate_limits")
  await store.shutdown()
  _ = statement

  let debouncer = try PostgresDebouncer<String>(client: client, quiet: .seconds(2), maxWait: .seconds(10)) {
    key, payload in print(key, payload)
  }
  try await debouncer.call("key", "payload")
}
