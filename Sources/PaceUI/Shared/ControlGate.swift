import Pace

/// The button-bashing guard: disables a set of controls for a while after a tap, then restores
/// them. `button.disableTemporarily(for:siblings:)` closes the shared gate.
///
/// ```swift
/// @objc func openDetail() {
///   ControlGate.shared.close([detailButton, settingsButton], for: .milliseconds(500))
///   navigationController?.pushViewController(detail, animated: true)
/// }
/// ```
///
/// The gate works on anything `Enablable` (a control, a bar button item, a menu item, a test
/// double), so its logic is tested without UIKit, on a `TestScheduler`.
///
/// Overlapping closures are counted per target: a target stays disabled until the last closure
/// that covers it has ended. Then it gets back the `isEnabled` it had when the first of them
/// began, so a control that was already disabled stays disabled. Targets are held weakly; one
/// that is released meanwhile is simply forgotten. The gate's closures end even when the gate
/// itself is no longer held.
///
/// ```
/// taps       a--------b-------
/// isEnabled  ____-----____----   (`_`: disabled for 4 steps after each tap)
/// ```
@MainActor
public final class ControlGate {
  /// The gate that `disableTemporarily(for:siblings:)` uses by default, on the main queue (also
  /// behind the deprecated `InteractionGate.shared`).
  public static let shared = ControlGate(driver: .shared)

  private let driver: GateDriver

  private init(driver: GateDriver) {
    self.driver = driver
  }

  /// A gate whose closures end on `scheduler`.
  ///
  /// - Parameter scheduler: Where the targets are re-enabled. It must run work on the main
  ///   actor: `.main` (the default), or a `TestScheduler` advanced from the main actor in tests.
  public init(scheduler: some PaceScheduler = .main) {
    driver = GateDriver(scheduler: scheduler)
  }

  /// Disables `targets` now and restores them after `duration`.
  ///
  /// - Parameters:
  ///   - targets: The controls to disable; duplicates count once.
  ///   - duration: How long they stay disabled. Not negative.
  public func close(_ targets: [any Enablable], for duration: Duration) {
    driver.close("ControlGate", targets, for: duration)
  }

  /// Ends every closure now, restoring its targets.
  public func openAll() {
    driver.openAll()
  }

  /// Whether `target` is disabled by a closure of this gate.
  ///
  /// - Parameter target: A control.
  public func isClosing(_ target: any Enablable) -> Bool {
    driver.isClosing(target)
  }

  /// The number of closures that have not ended yet.
  public var pendingClosures: Int {
    driver.pendingClosures
  }
}
