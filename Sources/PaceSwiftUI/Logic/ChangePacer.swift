import Pace

/// The logic behind the pacing view modifiers: a ``Pace/Debouncer`` or ``Pace/Throttler`` whose
/// invocations run the view's latest action on the main actor.
///
/// The view owns it in `@State`, so it lives as long as the view's identity; its timer holds it
/// only weakly, so a view that goes away drops what was pending.
@MainActor
final class ChangePacer<Value: Sendable> {
  /// The pacing a modifier asks for.
  enum Pacing: Sendable {
    case debounce(Duration, edges: Edges, maximumWait: Duration?)
    case throttle(Duration, edges: Edges)
  }

  /// What an invocation runs: the action of the latest render that saw a change.
  var action: (Value) -> Void

  private var call: @Sendable (Value) -> Void = { _ in }
  private var flushPacer: @Sendable () -> Void = {}
  private var cancelPacer: @Sendable () -> Void = {}
  private var pacerIsPending: @Sendable () -> Bool = { false }

  /// - Parameter scheduler: must run its work on the main thread: the main queue, or a
  ///   `TestScheduler` advanced by a main-actor test.
  init(_ pacing: Pacing, scheduler: any PaceScheduler, action: @escaping (Value) -> Void = { _ in }) {
    self.action = action
    // The pacer's `perform` holds this object weakly, so the view's state is not kept alive by
    // a timer.
    let perform: @Sendable (Value) -> Void = { [weak self] value in
      MainActor.assumeIsolated { self?.action(value) }
    }
    switch pacing {
    case .debounce(let interval, let edges, let maximumWait):
      let debouncer = Debouncer(
        for: interval, edges: edges, maximumWait: maximumWait, scheduler: scheduler, perform: perform
      )
      call = debouncer.call
      flushPacer = debouncer.flush
      cancelPacer = debouncer.cancel
      pacerIsPending = { debouncer.isPending }
    case .throttle(let interval, let edges):
      let throttler = Throttler(for: interval, edges: edges, scheduler: scheduler, perform: perform)
      call = throttler.call
      flushPacer = throttler.flush
      cancelPacer = throttler.cancel
      pacerIsPending = { throttler.isPending }
    }
  }

  /// The view saw `value` change.
  func send(_ value: Value) { call(value) }

  /// Runs the pending invocation now, if there is one.
  func flush() { flushPacer() }

  /// Drops the pending invocation and its timer.
  func cancel() { cancelPacer() }

  /// Whether an invocation is waiting.
  var isPending: Bool { pacerIsPending() }
}

extension ChangePacer: PacingTarget {}
