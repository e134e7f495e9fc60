#if PostgreSQL
import Logging
import Pace
import PostgresNIO

/// Listens on a PostgreSQL notification channel (`LISTEN`) over a connection leased from a
/// client's pool for as long as it listens, and listens again after the connection is lost.
///
/// A notification sent while no connection listens is lost (PostgreSQL keeps none for a channel
/// nobody listens on), so the owner is told each time the `LISTEN` is in force again
/// (`listening`), and re-reads what the notifications speak of then.
struct ChannelListener: Sendable {
  let client: PostgresClient
  let channel: String
  let logger: Logger
  /// The first wait before listening again after a failure; it doubles up to ``maximumRetryDelay``.
  var retryDelay: Duration = .milliseconds(100)
  var maximumRetryDelay: Duration = .seconds(5)

  /// Listens until the task is cancelled.
  ///
  /// - Parameters:
  ///   - listening: Called each time the `LISTEN` is in force: first, and after each reconnection.
  ///   - received: Called with each notification's payload, in order, one at a time.
  ///   - failed: Called when a connection could not listen or was lost, before the wait to listen
  ///     again.
  func run(
    listening: @Sendable () async -> Void,
    received: @Sendable (String) async -> Void,
    failed: @Sendable (any Error) async -> Void
  ) async {
    var delay = retryDelay
    let listened = LockedState(false)
    while !Task.isCancelled {
      listened.withLock { $0 = false }
      do {
        try await client.withConnection { connection in
          try await connection.listen(on: channel) { notifications in
            listened.withLock { $0 = true }
            logger.debug("listening", metadata: ["pace.channel": "\(channel)"])
            await listening()
            for try await notification in notifications { await received(notification.payload) }
          }
        }
        // The sequence ends only with its connection.
        if Task.isCancelled { return }
        await failed(ListeningEnded())
      } catch {
        if Task.isCancelled { return }
        await failed(error)
      }
      // A connection that listened and was lost: the next one is tried soon.
      if listened.withLock({ $0 }) { delay = retryDelay }
      do {
        try await Task.sleep(for: delay)
      } catch {
        return
      }
      delay = min(delay * 2, maximumRetryDelay)
    }
  }
}
/// The notifications of a listening connection ended without an error: its connection closed.
struct ListeningEnded: Error, CustomStringConvertible {
  var description: String { "the listening connection closed" }
}
#endif
