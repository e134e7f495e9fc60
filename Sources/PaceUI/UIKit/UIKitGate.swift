#if PACE_UI_STAND_IN
import UIKitStandIn
#elseif canImport(UIKit) && !os(watchOS)
import UIKit
#endif

#if PACE_UI_STAND_IN || (canImport(UIKit) && !os(watchOS))
import Pace

extension UIControl: Enablable {}

extension UIControl {
  /// The old name of `disableTemporarily(for:siblings:gate:)`, kept for source compatibility.
  @available(*, deprecated, renamed: "disableTemporarily(for:siblings:gate:)")
  public func debounce(
    delay: Duration = .milliseconds(500), siblings: [any Enablable] = [], gate: InteractionGate = .shared
  ) {
    disableTemporarily(for: delay, siblings: siblings, gate: gate)
  }
}
extension UIBarItem: Enablable {}
#endif
