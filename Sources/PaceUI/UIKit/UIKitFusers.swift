#if PACE_UI_STAND_IN
import UIKitStandIn
#elseif canImport(UIKit) && !os(watchOS)
import UIKit
#endif

#if PACE_UI_STAND_IN || (canImport(UIKit) && !os(watchOS))
import Pace

extension Fuser where Event: UIControl {
  /// A fuser over a control's events: each connection adds a `UIAction` for `events`, which
  /// dispatches the control; disposing the connection removes it.
  ///
  /// ```swift
  /// let taps: Fuser<ScreenEvent> = .extract({ _ in .retry }, .fromEvents(retryButton, for: .touchUpInside))
  /// ```
  ///
  /// Connect on the main actor. The control is held weakly.
  ///
  /// - Parameters:
  ///   - control: The control.
  ///   - events: The events to listen to; `.primaryActionTriggered` by default.
  public static func fromEvents(
    _ control: Event,
    for events: UIControl.Event = .primaryActionTriggered
  ) -> Fuser<Event> {
    fromEvents(control, for: events) { $0 }
  }
}

extension Fuser where Event: Sendable {
  /// A fuser over a control's events that reads what it needs from the control on the main
  /// actor, when the event happens.
  ///
  /// ```swift
  /// let queries = Fuser.fromEvents(searchField, for: .editingChanged) { $0.text ?? "" }
  ///   .debounced(for: .milliseconds(300))
  /// ```
  ///
  /// Connect on the main actor. The control is held weakly.
  ///
  /// - Parameters:
  ///   - control: The control.
  ///   - events: The events to listen to; `.primaryActionTriggered` by default.
  ///   - extract: Turns the control into the event, on the main actor.
  public static func fromEvents<Control: UIControl>(
    _ control: Control,
    for events: UIControl.Event = .primaryActionTriggered,
    _ extract: @escaping @MainActor @Sendable (Control) -> Event
  ) -> Fuser<Event> {
    Fuser { [weak control] dispatch in
      MainActor.assumeIsolated {
        guard let control else { return AnyDisposable {} }
        let action = UIAction { [weak control] _ in
          if let control { dispatch(extract(control)) }
        }
        control.addAction(action, for: events)
        return AnyDisposable { [weak control] in
          onMainActor { control?.removeAction(action, for: events) }
        }
      }
    }
  }

  /// A fuser over an existing gesture recognizer that reads what it needs from the recognizer on
  /// the main actor, when the action happens.
  ///
  /// ```swift
  /// let swipeEnds = Fuser.fromGestures(pan) { $0.state }.filter { $0 == .ended }
  /// ```
  ///
  /// Connect on the main actor. The recognizer is held weakly.
  ///
  /// - Parameters:
  ///   - recognizer: A recognizer, usually already attached to a view.
  ///   - extract: Turns the recognizer into the event, on the main actor.
  public static func fromGestures<Recognizer: UIGestureRecognizer>(
    _ recognizer: Recognizer,
    _ extract: @escaping @MainActor @Sendable (Recognizer) -> Event
  ) -> Fuser<Event> {
    Fuser { [weak recognizer] dispatch in
      MainActor.assumeIsolated {
        guard let recognizer else { return AnyDisposable {} }
        let trampoline = ActionTrampoline { [weak recognizer] in
          if let recognizer { dispatch(extract(recognizer)) }
        }
        recognizer.addTarget(trampoline, action: ActionTrampoline.action)
        // The recognizer does not retain its targets: the connection keeps the trampoline.
        return AnyDisposable { [weak recognizer] in
          onMainActor { recognizer?.removeTarget(trampoline, action: ActionTrampoline.action) }
        }
      }
    }
  }
}

extension Fuser where Event: UIGestureRecognizer {
  /// A fuser over an existing gesture recognizer: each connection adds a target that dispatches
  /// the recognizer on each action (check its `state`); disposing the connection removes it.
  ///
  /// ```swift
  /// let pans = Fuser.fromGestures(panRecognizer)   // Fuser<UIPanGestureRecognizer>
  /// ```
  ///
  /// Connect on the main actor. The recognizer is held weakly.
  ///
  /// - Parameter recognizer: A recognizer, usually already attached to a view.
  public static func fromGestures(_ recognizer: Event) -> Fuser<Event> {
    fromGestures(recognizer) { $0 }
  }

  /// A fuser that attaches a new gesture recognizer to `view` for each connection and removes it
  /// when the connection is disposed, so connections never share a recognizer.
  ///
  /// ```swift
  /// let taps: Fuser<ScreenEvent> = .extract({ _ in .dismiss }, .fromGestures(on: dimmingView) { UITapGestureRecognizer() })
  /// ```
  ///
  /// Connect on the main actor. The view is held weakly.
  ///
  /// - Parameters:
  ///   - view: The view to attach the recognizers to.
  ///   - makeRecognizer: Makes the recognizer of one connection.
  public static func fromGestures(
    on view: UIView,
    _ makeRecognizer: @escaping @MainActor @Sendable () -> Event
  ) -> Fuser<Event> {
    Fuser { [weak view] dispatch in
      MainActor.assumeIsolated {
        guard let view else { return AnyDisposable {} }
        let recognizer = makeRecognizer()
        let connection = fromGestures(recognizer).connect(dispatch)
        view.addGestureRecognizer(recognizer)
        return AnyDisposable { [weak view] in
          connection.dispose()
          onMainActor { view?.removeGestureRecognizer(recognizer) }
        }
      }
    }
  }
}
#endif
