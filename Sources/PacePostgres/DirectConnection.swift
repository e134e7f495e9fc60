#if PostgreSQL
import Logging
import Pace
import PostgresNIO

/// A connection of a component's own, beside its client's pool: opened when a statement needs it
/// and none is open, replaced when the server closed it.
///
/// A pool answers an outage slowly: its statements wait for a connection while it backs off its
/// reconnection attempts, so a first statement waits its whole timeout. A connection opened on
/// demand fails at once where the server refuses connections (a stopped server), and reconnects at
/// once when it is back. Concurrent statements share the one connection (PostgreSQL pipelines
/// them) and one connection attempt.
final class DirectConnection: Sendable {
  private struct State {
    var open: PostgresConnection?
    var connecting: Task<PostgresConnection, any Error>?
    var opened = 0
    var closed = false
  }

  let configuration: PostgresConnection.Configuration
  private let logger: Logger
  private let state = LockedState(State())

  init(_ configuration: PostgresConnection.Configuration, logger: Logger) {
    self.configuration = configuration
    self.logger = logger
  }

  /// The open connection, or one opened now (joining an attempt already under way).
  ///
  /// - Throws: PostgresNIO's error if the server cannot be reached (an unavailability:
  ///   `PSQLError.connectionError`), or `StoreShutDown` after ``close()``.
  func connection() async throws -> PostgresConnection {
    enum Next {
      case use(PostgresConnection)
      case await(Task<PostgresConnection, any Error>)
      case closed
    }
    let next = state.withLock { state -> Next in
      if state.closed { return .closed }
      if let open = state.open, !open.isClosed { return .use(open) }
      state.open = nil
      if let connecting = state.connecting { return .await(connecting) }
      state.opened += 1
      let (configuration, id, logger) = (configuration, state.opened, logger)
      let connecting = Task {
        try await PostgresConnection.connect(configuration: configuration, id: id, logger: logger)
      }
      state.connecting = connecting
      return .await(connecting)
    }
    switch next {
    case .closed:
      throw StoreShutDown()
    case .use(let open):
      return open
    case .await(let connecting):
      let result = await connecting.result
      let late: PostgresConnection? = state.withLock { state in
        if state.connecting == connecting { state.connecting = nil }
        guard case .success(let connection) = result else { return nil }
        if state.closed { return connection }
        if state.open == nil { state.open = connection }
        return nil
      }
      if let late {
        // Opened after close(): nobody else will close it.
        try? await late.close()
        throw StoreShutDown()
      }
      return try result.get()
    }
  }

  deinit {
    // The component went away without running (calls made, `run()` never called): the connection
    // is closed here, and kept alive by the closing future until its channel has closed.
    guard let open = state.withLock({ $0.open }), !open.isClosed else { return }
    open.close().whenComplete { _ in _ = open }
  }

  /// Closes the connection, if one is open; later statements throw `StoreShutDown`.
  func close() async {
    let open = state.withLock { state -> PostgresConnection? in
      state.closed = true
      defer { state.open = nil }
      return state.open
    }
    guard let open, !open.isClosed else { return }
    do {
      try await open.close()
    } catch {
      logger.warning("closing a direct connection failed", metadata: errorMetadata(error))
    }
  }
}
#endif
