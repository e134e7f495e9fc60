#if PACE_UI_STAND_IN
import UIKitStandIn
#elseif canImport(UIKit) && !os(watchOS)
import UIKit
#endif

#if PACE_UI_STAND_IN || (canImport(UIKit) && !os(watchOS))
import Pace

extension UIControl: Enablable {}

extension UIBarItem: Enablable {}
#endif
