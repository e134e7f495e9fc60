#if PACE_UI_STAND_IN
import UIKitStandIn
#elseif canImport(UIKit) && !os(watchOS)
import UIKit
#endif

#if PACE_UI_STAND_IN || (canImport(UIKit) && !os(watchOS))
import Pace

extension Diffuser where State == String? {
  /// A diffuser that sets the label's `text` when the state changed (and on the first run).
  ///
  /// ```swift
  /// .map(\.title, .intoText(titleLabel))
  /// ```
  ///
  /// - Parameter label: The label, held weakly.
  @MainActor
  public static func intoText(_ label: UILabel) -> Diffuser<String?> {
    .into { [weak label] text in label?.text = text }
  }

  /// A diffuser that sets the text field's `text` when the state changed (and on the first run).
  ///
  /// - Parameter field: The text field, held weakly.
  @MainActor
  public static func intoText(_ field: UITextField) -> Diffuser<String?> {
    .into { [weak field] text in field?.text = text }
  }

  /// A diffuser that sets the button's title for `state` when the state changed (and on the
  /// first run).
  ///
  /// - Parameters:
  ///   - button: The button, held weakly.
  ///   - state: The control state whose title to set; `.normal` by default.
  @MainActor
  public static func intoTitle(_ button: UIButton, for state: UIControl.State = .normal) -> Diffuser<String?> {
    .into { [weak button] title in button?.setTitle(title, for: state) }
  }
}

extension Diffuser where State == Bool {
  /// A diffuser that sets the view's `isHidden` when the state changed (and on the first run).
  ///
  /// ```swift
  /// .map({ !$0.isLoading }, .intoHidden(spinner))
  /// ```
  ///
  /// - Parameter view: The view, held weakly.
  @MainActor
  public static func intoHidden(_ view: UIView) -> Diffuser<Bool> {
    .into { [weak view] isHidden in view?.isHidden = isHidden }
  }
}
#endif
