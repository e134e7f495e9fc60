#if PostgreSQL
import Logging
import Pace
import ServiceLifecycle

extension PostgresRateLimitStore {
  /// Runs the store until the task is cancelled or the service group shuts down gracefully, then
  /// shuts it down (``shutdown()``) and returns once everything it started has ended.
  ///
  /// It owns everything long-lived of the store, which it starts and stops:
  ///
  /// - the lanes (two) that send decisions in batches, each holding a connection while decisions
  ///   keep coming (one opened with `directConnection`, or one of `client`'s pool, given back
  ///   after half a second idle), and the watchdog that answers a decision at its timeout;
  /// - the purge of expired rows every ``purgeInterval`` (a purge that fails is logged and tried
  ///   again at the next interval);
  /// - under ``FailureMode/shareLimit(among:)`` with a learned count, the fleet's heartbeats.
  ///
  /// Before it starts, a decision is sent alone and leaves nothing running (see
  /// ``PostgresRateLimitStore``); once it has returned, decisions follow the failure mode. A store
  /// runs once: a second call, while it runs or after it has returned, returns at once.
  ///
  /// The client is a service of its own: run both in one `ServiceGroup`, the client first, so that
  /// the group shuts the store down before the client. A store made from a configuration runs its
  /// own client here, until the store has shut down.
  public func run() async throws {
    try await run(started: {})
  }

  /// ``run()``, calling `started` once the lanes and the watchdog run (tests wait for it).
  func run(started: @Sendable () -> Void) async throws {
    guard batcher.start() else {
      logger.warning("PostgresRateLimitStore.run() was called again: a store runs once; this call returns")
      return
    }
    try await runningOwnedClient(client, owned: runsClient) {
      logger.info("PostgreSQL rate-limit store running", metadata: ["pace.purge_interval": "\(purgeInterval)"])
      started()
      let heartbeats = startHeartbeats()
      await purgeUntilShutdown()
      heartbeats?.cancel()
      await heartbeats?.value
      await shutdown()
    }
  }

  /// Stops deciding and closes the connections the store's decisions hold (those it opened itself
  /// with `directConnection`; pool connections go back to the pool), once the decisions in flight
  /// are answered; the lanes and the watchdog end. Idempotent; ``run()`` calls it when it ends.
  ///
  /// Decisions after it follow the failure mode, as if the database were unavailable.
  public func shutdown() async {
    await batcher.shutdown()
    // A probe after the batcher's shutdown is answered at once (``StoreShutDown``).
    await probes.waitUntilAllEnded()
    logger.info("PostgreSQL rate-limit store stopped")
  }
}
#endif
