#if PACE_UI_STAND_IN
import UIKitStandIn
#elseif canImport(UIKit) && !os(watchOS)
import UIKit
#endif

#if PACE_UI_STAND_IN || (canImport(UIKit) && !os(watchOS))
/// A target for UIKit's target-action APIs that have no closure form (gesture recognizers):
/// receives the action and calls a closure.
@MainActor
final class ActionTrampoline: NSObject {
  private let handler: @MainActor () -> Void

  init(_ handler: @escaping @MainActor () -> Void) {
    self.handler = handler
    super.init()
  }

  #if PACE_UI_STAND_IN
  // No Objective-C runtime on Linux: the stand-in's NSObject receives the selector.
  static var action: Selector { Selector("invoke:") }

  override func standInPerform(_ selector: Selector, with argument: Any?) {
    guard selector == Self.action else { return super.standInPerform(selector, with: argument) }
    invoke(argument as Any)
  }

  func invoke(_ sender: Any) {
    handler()
  }
  #else
  static var action: Selector { #selector(ActionTrampoline.invoke(_:)) }

  @objc func invoke(_ sender: Any) {
    handler()
  }
  #endif
}
#endif
