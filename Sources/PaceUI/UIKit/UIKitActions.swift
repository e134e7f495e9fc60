#if PACE_UI_STAND_IN
import UIKitStandIn
#elseif canImport(UIKit) && !os(watchOS)
import UIKit
#endif

#if PACE_UI_STAND_IN || (canImport(UIKit) && !os(watchOS))
import Pace

extension UIControl {
  /// Adds an action whose handler is throttled: by default it runs at once for the first event
  /// and then ignores events for `interval` (the leading edge only, right for taps).
  ///
  /// ```swift
  /// payButton.addAction(for: .touchUpInside, throttle: .seconds(1)) { _ in checkout() }
  /// ```
  ///
  /// The action lives as long as the control (UIKit keeps it); remove it with
  /// `removeAction(_:for:)` using the returned action.
  ///
  /// - Parameters:
  ///   - controlEvents: The events that trigger the action; `.primaryActionTriggered` by default.
  ///   - interval: The least time between handler runs. Not negative.
  ///   - edges: ``Edges/leading`` by default; add ``Edges/trailing`` to also run once for the
  ///     events ignored during a window.
  ///   - scheduler: Where the handler runs. It must run work on the main actor: `.main` (the
  ///     default), or a ``TestScheduler`` advanced from the main actor in tests.
  ///   - handler: The handler, on the main actor.
  /// - Returns: The action added to the control.
  @discardableResult
  public func addAction(
    for controlEvents: UIControl.Event = .primaryActionTriggered,
    throttle interval: Duration,
    edges: Edges = .leading,
    scheduler: some PaceScheduler = .main,
    handler: @escaping @MainActor @Sendable (UIAction) -> Void
  ) -> UIAction {
    let throttler = Throttler<UIAction>(for: interval, edges: edges, scheduler: scheduler) { action in
      MainActor.assumeIsolated { handler(action) }
    }
    let action = UIAction { action in throttler.call(action) }
    addAction(action, for: controlEvents)
    return action
  }

  /// Adds an action whose handler is debounced: by default it runs once events have stopped for
  /// `interval` (the trailing edge, right for typing).
  ///
  /// ```swift
  /// // The field holds its action: capture the field weakly.
  /// searchField.addAction(for: .editingChanged, debounce: .milliseconds(300)) { [weak searchField] _ in
  ///   search(searchField?.text ?? "")
  /// }
  /// ```
  ///
  /// - Parameters:
  ///   - controlEvents: The events that trigger the action; `.primaryActionTriggered` by default.
  ///   - interval: How long events must stop before the handler runs. Not negative.
  ///   - edges: ``Edges/trailing`` by default.
  ///   - maximumWait: The longest an event waits for the handler; `nil` (the default) for no bound.
  ///   - scheduler: Where the handler runs. It must run work on the main actor: `.main` (the
  ///     default), or a ``TestScheduler`` advanced from the main actor in tests.
  ///   - handler: The handler, on the main actor.
  /// - Returns: The action added to the control.
  @discardableResult
  public func addAction(
    for controlEvents: UIControl.Event = .primaryActionTriggered,
    debounce interval: Duration,
    edges: Edges = .trailing,
    maximumWait: Duration? = nil,
    scheduler: some PaceScheduler = .main,
    handler: @escaping @MainActor @Sendable (UIAction) -> Void
  ) -> UIAction {
    let debouncer = Debouncer<UIAction>(for: interval, edges: edges, maximumWait: maximumWait, scheduler: scheduler) {
      action in
      MainActor.assumeIsolated { handler(action) }
    }
    let action = UIAction { action in debouncer.call(action) }
    addAction(action, for: controlEvents)
    return action
  }
}

// As released in 0.1.0, before the glossary spelled every maximum out: `maxWait:` is
// `maximumWait:`. `maxWait` has no default here, so a call that names neither label reaches the
// current method alone.
extension UIControl {
  /// Adds an action whose handler is debounced.
  @available(*, deprecated, renamed: "addAction(for:debounce:edges:maximumWait:scheduler:handler:)")
  @discardableResult
  public func addAction(
    for controlEvents: UIControl.Event = .primaryActionTriggered,
    debounce interval: Duration,
    edges: Edges = .trailing,
    maxWait: Duration?,
    scheduler: some PaceScheduler = .main,
    handler: @escaping @MainActor @Sendable (UIAction) -> Void
  ) -> UIAction {
    addAction(
      for: controlEvents, debounce: interval, edges: edges, maximumWait: maxWait, scheduler: scheduler,
      handler: handler)
  }
}
#endif
