#if PostgreSQL
import Logging
import PostgresNIO

/// Runs `service` with `client` running beside it when the component made the client itself from
/// a configuration (its `init(configuration:…)`), so that the app runs one service, not a client
/// and a service. The client stops once `service` has ended, after it has drained: the
/// component's last statements (a worker giving its claims back) still have their connections.
///
/// The client runs in a detached task that this function owns (it cancels it and waits for it):
/// a child task would inherit the service's graceful-shutdown signal and its cancellation, and
/// `PostgresClient.run()` ends at either, before the service has drained.
func runningOwnedClient(
  _ client: PostgresClient, owned: Bool, _ service: () async throws -> Void
) async throws {
  guard owned else { return try await service() }
  let running = Task.detached { await client.run() }
  do {
    try await service()
  } catch {
    running.cancel()
    await running.value
    throw error
  }
  running.cancel()
  await running.value
}
#endif
