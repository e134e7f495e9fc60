import Pace

extension Enablable {
  /// The button-bashing guard: disables this control (or bar button item, menu item, your own
  /// ``Enablable``) and `siblings` for `duration`, then restores them. Call it first thing in the
  /// control's action.
  ///
  /// ```swift
  /// // The button holds its action: capture it, and the controller holding the button, weakly.
  /// openButton.addAction(UIAction { [weak self, weak openButton] _ in
  ///   guard let self, let openButton else { return }
  ///   openButton.disableTemporarily(siblings: [settingsButton])
  ///   navigationController?.pushViewController(detail, animated: true)
  /// }, for: .touchUpInside)
  /// ```
  ///
  /// Overlapping calls keep a shared control disabled until the last one ends, and a control
  /// that was disabled before stays disabled (see ``ControlGate``). It disables the controls
  /// rather than pacing a function, hence not a "debounce": for that, see `Debouncer`.
  ///
  /// - Parameters:
  ///   - duration: How long the controls stay disabled; 500 ms by default. Not negative.
  ///   - siblings: Other controls or items to disable with this one.
  ///   - gate: The gate that keeps the count; the shared main-queue gate by default.
  public func disableTemporarily(
    for duration: Duration = .milliseconds(500),
    siblings: [any Enablable] = [],
    gate: ControlGate = .shared
  ) {
    gate.close([self] + siblings, for: duration)
  }

  /// The 0.3.0 spelling with a gate of `Pace`'s deprecated `InteractionGate`, kept for source
  /// compatibility: pass a ``ControlGate`` instead.
  ///
  /// - Parameters:
  ///   - duration: How long the controls stay disabled; 500 ms by default. Not negative.
  ///   - siblings: Other controls or items to disable with this one.
  ///   - gate: The deprecated gate that keeps the count.
  @available(*, deprecated, message: "pass a ControlGate (InteractionGate moved to PaceUI as ControlGate)")
  @_disfavoredOverload
  public func disableTemporarily(
    for duration: Duration = .milliseconds(500),
    siblings: [any Enablable] = [],
    gate: InteractionGate
  ) {
    gate.close([self] + siblings, for: duration)
  }

  /// The seed's name of `disableTemporarily(for:siblings:gate:)`, kept for source compatibility
  /// (0.3.0 had it on `UIControl` and `NSControl`).
  ///
  /// - Parameters:
  ///   - delay: How long the controls stay disabled; 500 ms by default. Not negative.
  ///   - siblings: Other controls or items to disable with this one.
  ///   - gate: The deprecated gate that keeps the count: the shared main-queue gate by default.
  @available(*, deprecated, renamed: "disableTemporarily(for:siblings:gate:)")
  public func debounce(
    delay: Duration = .milliseconds(500), siblings: [any Enablable] = [], gate: InteractionGate = .shared
  ) {
    disableTemporarily(for: delay, siblings: siblings, gate: gate)
  }
}
