/// Event sources in, one stream of events out: connects to one or more sources and forwards
/// their events to a single `dispatch` closure.
///
/// A fuser is a description. It does nothing until ``connect(_:)``, which starts every listener
/// and returns a ``Disposable`` that stops them all:
///
/// ```swift
/// enum ScreenEvent { case refresh, search(String), keyboardShown }
///
/// let events: Fuser<ScreenEvent> = .fromAll(
///   .extract({ _ in .refresh }, .fromEvents(refreshControl, for: .valueChanged)),
///   .extract(ScreenEvent.search, searchText.debounced(for: .milliseconds(300))),
///   .extract({ _ in .keyboardShown }, .fromNotifications(named: keyboardDidShow))
/// )
/// let connection = events.connect { event in store.send(event) }
/// // ...
/// connection.dispose()   // every listener is removed, exactly once
/// ```
///
/// Every constructor and operator keeps these laws (the tests check each one against all of
/// them):
/// - events arrive in the order their source produced them;
/// - nothing is dispatched before `connect`;
/// - nothing is dispatched once `dispose()` has returned (an event already being dispatched on
///   another thread may finish);
/// - `dispose()` reaches every source exactly once;
/// - connections are independent: each `connect` starts its own listeners, and disposing one
///   connection leaves the others working.
///
/// Events are dispatched on the thread the source produces them on: the main thread for UI
/// sources, the posting thread for notifications, the scheduler for ``debounced(for:edges:maximumWait:merge:scheduler:)``.
/// Use ``connectOnMainActor(_:)`` to handle them on the main actor.
public struct Fuser<Event>: Sendable {
  /// Starts the source's listeners, sending events to `dispatch`; returns their teardown.
  private let connectSource: @Sendable (_ dispatch: @escaping @Sendable (Event) -> Void) -> any Disposable

  /// A fuser over a source described by a connect closure.
  ///
  /// `connect` starts listening, sends each event to `dispatch`, and returns what stops
  /// listening. It runs once per ``connect(_:)``:
  ///
  /// ```swift
  /// let ticks = Fuser<Void> { dispatch in
  ///   let timer = DispatchSource.makeTimerSource(queue: .main)
  ///   timer.schedule(deadline: .now(), repeating: .seconds(1))
  ///   timer.setEventHandler { dispatch(()) }
  ///   timer.resume()
  ///   return AnyDisposable { timer.cancel() }
  /// }
  /// ```
  ///
  /// The returned disposable is disposed at most once, when the connection is disposed.
  ///
  /// - Parameter connect: Starts the source; returns its teardown.
  public init(
    _ connect: @escaping @Sendable (_ dispatch: @escaping @Sendable (Event) -> Void) -> any Disposable
  ) {
    connectSource = connect
  }

  /// Starts listening to every source; events go to `dispatch` until the result is disposed.
  ///
  /// Keep the result: like every Pace disposable it disposes the connection when released.
  ///
  /// - Parameter dispatch: Receives the events, on the thread that produced each of them.
  /// - Returns: The connection; dispose it (or release it) to remove every listener.
  public func connect(_ dispatch: @escaping @Sendable (Event) -> Void) -> AnyDisposable {
    let connection = FuserConnection()
    let teardown = connectSource { event in
      // The gate that makes "nothing after dispose" hold for every source, however its
      // teardown behaves.
      if connection.isActive { dispatch(event) }
    }
    connection.attach(teardown)
    return AnyDisposable { connection.dispose() }
  }
}

extension Fuser where Event: Sendable {
  /// Starts listening to every source and handles the events on the main actor.
  ///
  /// An event produced on the main thread is handled at once; one produced on another thread is
  /// handed to the main queue, in order with the other events from that thread.
  ///
  /// ```swift
  /// connection = events.connectOnMainActor { [weak self] event in self?.render(event) }   // stored in self: weak
  /// ```
  ///
  /// - Parameter dispatch: Receives the events, on the main actor.
  /// - Returns: The connection; dispose it (or release it) to remove every listener.
  public func connectOnMainActor(_ dispatch: @escaping @MainActor @Sendable (Event) -> Void) -> AnyDisposable {
    let main = DispatchScheduler.main
    return connect { event in
      if main.isCurrent {
        MainActor.assumeIsolated { dispatch(event) }
      } else {
        main.enqueue { MainActor.assumeIsolated { dispatch(event) } }
      }
    }
  }
}

/// One connection's state: whether it is still active, and the source's teardown.
final class FuserConnection: Sendable {
  private struct State {
    var isDisposed = false
    /// The source's teardown, once its connect closure has returned it.
    var teardown: (any Disposable)?
  }

  private let state = LockedState(State())

  /// Whether events may still be dispatched.
  var isActive: Bool {
    state.withLock { !$0.isDisposed }
  }

  /// Stores the source's teardown, or runs it at once if the connection was disposed while the
  /// source was connecting.
  func attach(_ teardown: any Disposable) {
    let disposeNow = state.withLock { state -> Bool in
      guard !state.isDisposed else { return true }
      state.teardown = teardown
      return false
    }
    if disposeNow { teardown.dispose() }
  }

  /// Stops dispatching and runs the teardown, once.
  func dispose() {
    let teardown = state.withLock { state -> (any Disposable)? in
      guard !state.isDisposed else { return nil }
      state.isDisposed = true
      return state.teardown.take()
    }
    teardown?.dispose()
  }
}
