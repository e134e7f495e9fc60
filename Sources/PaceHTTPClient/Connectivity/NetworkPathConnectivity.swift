#if canImport(Network)
import Dispatch
import Network

/// A ``ConnectivitySignal`` from Network's path monitor: the path is up while `NWPathMonitor`
/// reports it `.satisfied`.
///
/// The monitor runs from initialisation until the value is released. Until its first report
/// (which comes at once on start) the path counts as down, so a retry waits for the report
/// rather than for nothing.
///
/// ```swift
/// let connectivity = NetworkPathConnectivity()
/// try await connectivity.waitUntilReachable()   // at once when online
/// ```
public final class NetworkPathConnectivity: ConnectivitySignal {
  private let monitor: NWPathMonitor
  private let signal = ManualConnectivity(isReachable: false)

  /// Monitors the paths of any interface, or of `interfaceType` only (`.wifi`, `.cellular`).
  public init(requiredInterfaceType interfaceType: NWInterface.InterfaceType? = nil) {
    monitor = interfaceType.map { NWPathMonitor(requiredInterfaceType: $0) } ?? NWPathMonitor()
    let signal = signal
    monitor.pathUpdateHandler = { path in signal.setReachable(path.status == .satisfied) }
    monitor.start(queue: DispatchQueue(label: "Pace.NetworkPathConnectivity"))
  }

  deinit {
    monitor.cancel()
  }

  /// Whether the path was up at the monitor's last report.
  public var isReachable: Bool { signal.isReachable }

  /// Returns at once when the path is up, else when the monitor reports it up again; throws
  /// `CancellationError` if the task is cancelled meanwhile.
  public func waitUntilReachable() async throws {
    try await signal.waitUntilReachable()
  }
}
#endif
