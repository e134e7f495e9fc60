/// Something that tears a connection down: removes a listener, an observer or a target, or
/// cancels a task.
///
/// ``Fuser/connect(_:)`` returns one; keep it for as long as you want events and call
/// ``dispose()`` when you are done:
///
/// ```swift
/// let connection = events.connect { event in handle(event) }
/// // ...
/// connection.dispose()
/// ```
///
/// Conforming types make ``dispose()`` idempotent and safe to call from any thread, as
/// ``AnyDisposable`` and ``DisposableGroup`` do.
///
/// ## Released without `dispose()`
///
/// Pace's disposables follow one rule: **a disposable that is released disposes itself**, like
/// Combine's `AnyCancellable`. A connection lives exactly as long as you keep its disposable, so
/// forgetting `dispose()` never leaks a listener, and dropping the result of `connect` ends the
/// connection at once (the compiler warns about an unused result).
public protocol Disposable: Sendable {
  /// Tears the connection down. Calls after the first do nothing; safe from any thread.
  func dispose()
}
