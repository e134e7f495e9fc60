/// Something that can be enabled and disabled for input: a control, a bar button item, a menu
/// item, or a test double.
///
/// `PaceUI` makes `UIControl`, `UIBarButtonItem` and `NSControl` conform; conform your own types
/// to render into them with ``Diffuser/intoEnabled(_:)`` and to guard them with PaceUI's
/// `disableTemporarily(for:siblings:)`.
@MainActor
public protocol Enablable: AnyObject {
  /// Whether the object accepts input.
  var isEnabled: Bool { get set }
}

extension Diffuser where State == Bool {
  /// A diffuser that sets `target.isEnabled` to the state when it changed (and on the first
  /// run). The target is held weakly.
  ///
  /// ```swift
  /// .map(\.canSubmit, .intoEnabled(submitButton))
  /// ```
  ///
  /// - Parameter target: The control or item to enable and disable.
  @MainActor
  public static func intoEnabled(_ target: some Enablable) -> Diffuser<Bool> {
    into { [weak target] isEnabled in target?.isEnabled = isEnabled }
  }
}
