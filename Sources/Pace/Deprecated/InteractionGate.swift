/// The button-bashing guard as 0.3.0 shipped it in `Pace`: it moved to `PaceUI`, with the UIKit
/// and AppKit glue that uses it, as `ControlGate` (a type cannot move between modules under one
/// name: importing both would make the name ambiguous). Kept, unchanged, for source
/// compatibility: it drives the same logic, and its `shared` gate is `ControlGate.shared`'s.
@available(*, deprecated, renamed: "ControlGate", message: "import PaceUI and use ControlGate")
@MainActor
public final class InteractionGate {
  // Forwards only; each member's documentation is `ControlGate`'s.
  /// The gate on the main queue that `ControlGate.shared` closes too.
  public static let shared = InteractionGate(driver: .shared)
  private let driver: GateDriver
  private init(driver: GateDriver) { self.driver = driver }
  /// A gate whose closures end on `scheduler`, which runs work on the main actor.
  public init(scheduler: some PaceScheduler = .main) { driver = GateDriver(scheduler: scheduler) }
  /// Disables `targets` now and restores them after `duration` (not negative).
  public func close(_ targets: [any Enablable], for duration: Duration) {
    driver.close("InteractionGate", targets, for: duration)
  }
  /// Ends every closure now, restoring its targets.
  public func openAll() { driver.openAll() }
  /// Whether `target` is disabled by a closure of this gate.
  public func isClosing(_ target: any Enablable) -> Bool { driver.isClosing(target) }
  /// The number of closures that have not ended yet.
  public var pendingClosures: Int { driver.pendingClosures }
}
