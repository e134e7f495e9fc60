#if canImport(Foundation) && !PACE_UI_STAND_IN
import Foundation
import Pace

extension Fuser where Event == Notification {
  /// A fuser over `NotificationCenter` notifications: each connection adds an observer and
  /// disposing it removes the observer.
  ///
  /// ```swift
  /// let events: Fuser<ScreenEvent> = .fromAll(
  ///   .extract({ _ in .keyboardShown }, .fromNotifications(named: UIResponder.keyboardDidShowNotification)),
  ///   .extract({ _ in .becameActive }, .fromNotifications(named: UIApplication.didBecomeActiveNotification))
  /// )
  /// ```
  ///
  /// Notifications are dispatched synchronously on the posting thread. `Notification` is not
  /// `Sendable`, so extract what you need (`map`, `extract`) before a rate-limiting operator.
  ///
  /// - Parameters:
  ///   - name: The notification name.
  ///   - object: Only notifications posted by this object; `nil` (the default) for any.
  ///   - center: The notification center; `.default` by default.
  public static func fromNotifications(
    named name: Notification.Name,
    object: (any AnyObject & Sendable)? = nil,
    center: NotificationCenter = .default
  ) -> Fuser<Notification> {
    Fuser { dispatch in
      let token = center.addObserver(forName: name, object: object, queue: nil) { notification in
        dispatch(notification)
      }
      let observation = Observation(token: token, center: center)
      return AnyDisposable { observation.remove() }
    }
  }
}

/// An observer token that is removed from its center once.
private final class Observation: @unchecked Sendable {
  // @unchecked Sendable: `token` is read and cleared only under its `LockedState`'s lock;
  // `center` is immutable and NotificationCenter is thread-safe.
  private let token: LockedState<(any NSObjectProtocol)?>
  private let center: NotificationCenter

  init(token: sending any NSObjectProtocol, center: NotificationCenter) {
    self.token = LockedState(token)
    self.center = center
  }

  func remove() {
    if let token = token.withLock({ $0.take() }) { center.removeObserver(token) }
  }
}
#endif
