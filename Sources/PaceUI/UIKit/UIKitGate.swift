#if PACE_UI_STAND_IN
import UIKitStandIn
#elseif canImport(UIKit) && !os(watchOS)
import UIKit
#endif

#if PACE_UI_STAND_IN || (canImport(UIKit) && !os(watchOS))
import Pace

extension UIControl: Enablable {}
extension UIBarItem: Enablable {}

extension UIControl {
  /// The button-bashing guard: disables this control and `siblings` for `delay`, then
  /// restores them. Call it first thing in the control's action.
  ///
  /// ```swift
  /// openButton.addAction(UIAction { _ in
  ///   openButton.debounce(siblings: [settingsButton])
  ///   navigationController?.pushViewController(detail, animated: true)
  /// }, for: .touchUpInside)
  /// ```
  ///
  /// Overlapping calls keep a shared control disabled until the last one ends, and a control
  /// that was disabled before stays disabled (see ``InteractionGate``).
  ///
  /// - Parameters:
  ///   - delay: How long the controls stay disabled; 500 ms by default.
  ///   - siblings: Other controls or bar button items to disable with this one.
  ///   - gate: The gate that keeps the count; the shared main-queue gate by default.
  public func debounce(
    delay: Duration = .milliseconds(500),
    siblings: [any Enablable] = [],
    gate: InteractionGate = .shared
  ) {
    gate.close([self] + siblings, for: delay)
  }
}
#endif
