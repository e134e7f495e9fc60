/// Whether the network path is up, for a retry after a connection error to wait for it.
public protocol ConnectivitySignal: Sendable {
  /// Returns at once when the path is up, else when it comes back; throws `CancellationError` if the task is cancelled.
  func waitUntilReachable() async throws
}
