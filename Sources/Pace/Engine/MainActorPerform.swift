import Dispatch

#if canImport(Darwin)
import Darwin
#endif

/// What the main-actor initialisers of ``Debouncer``, ``Throttler`` and ``Coalescer`` use to hand
/// a main-actor closure to a scheduler, so that a scheduler running it off the main thread stops
/// the process with a message instead of racing.
enum MainActorPerform {
  /// Fails at once when `scheduler` is known to run work off the main thread: a
  /// ``DispatchScheduler`` on another queue, or a ``ClockScheduler`` (its work runs in tasks).
  /// Other schedulers, ``TestScheduler`` among them, are checked each time they run the closure.
  static func checkScheduler(_ scheduler: any PaceScheduler, for type: StaticString) {
    if let dispatch = scheduler as? DispatchScheduler {
      // Compared by label too: on Linux, `DispatchQueue.main` is a new wrapper at each use.
      precondition(
        dispatch.queue === DispatchQueue.main || dispatch.queue.label == DispatchQueue.main.label,
        """
        \(type): perform is main-actor isolated, but the scheduler runs it on the queue \
        '\(dispatch.queue.label)', off the main thread; pass .main, or a TestScheduler advanced on the main actor
        """
      )
    } else if scheduler is any ClockSchedulerProtocol {
      preconditionFailure(
        """
        \(type): perform is main-actor isolated, but a ClockScheduler runs it in a task, off the main thread; \
        pass .main, or a TestScheduler advanced on the main actor
        """
      )
    }
  }

  /// `perform`, run main-actor isolated; run off the main thread it fails with a message that
  /// says so.
  static func wrap<Value: Sendable>(
    _ type: StaticString,
    _ perform: @escaping @MainActor @Sendable (Value) -> Void
  ) -> @Sendable (Value) -> Void {
    { value in
      checkOnMainThread(type)
      MainActor.assumeIsolated { perform(value) }
    }
  }

  /// Fails with a message naming `type` unless the caller runs on the main thread, where the
  /// main actor runs.
  static func checkOnMainThread(_ type: StaticString) {
    // Work the main queue runs, and the main thread outside any queue block, see the main queue's tag.
    if DispatchScheduler.main.isCurrent { return }
    #if canImport(Darwin)
    // The main thread inside another queue's `sync`, which the runtime's main-actor check accepts too.
    if pthread_main_np() != 0 { return }
    #endif
    // `MainActor.assumeIsolated` alone would trap without saying why.
    preconditionFailure(
      """
      \(type): perform is main-actor isolated, but its scheduler ran it off the main thread; \
      pass .main, or advance the TestScheduler on the main actor
      """
    )
  }
}

/// What a ``Pacer`` invokes, as its pacer's initialiser was given it: `perform`, and for an
/// `owner:` pacer whether the owner is gone (a call then cancels instead).
struct PacerPerform<Value: Sendable>: Sendable {
  let perform: @Sendable (Value) -> Void
  /// `nil` for a pacer without an owner.
  let ownerIsGone: (@Sendable () -> Bool)?

  private init(perform: @escaping @Sendable (Value) -> Void, ownerIsGone: (@Sendable () -> Bool)?) {
    self.perform = perform
    self.ownerIsGone = ownerIsGone
  }

  /// `perform` as it is: the `@Sendable` initialisers'.
  init(_ perform: @escaping @Sendable (Value) -> Void) {
    self.init(perform: perform, ownerIsGone: nil)
  }

  /// A main-actor `perform` on `scheduler`, for the initialisers of `type`: a scheduler known to
  /// run it off the main thread fails at once, any other at the invocation.
  static func mainActor(
    _ type: StaticString, scheduler: any PaceScheduler, _ perform: @escaping @MainActor @Sendable (Value) -> Void
  ) -> Self {
    MainActorPerform.checkScheduler(scheduler, for: type)
    return Self(MainActorPerform.wrap(type, perform))
  }

  /// A main-actor `perform` that gets `owner`, held weakly, for an `owner:` initialiser of
  /// `type`: once the owner is gone, it does nothing.
  static func owned<Owner: AnyObject & Sendable>(
    _ type: StaticString,
    owner: Owner,
    scheduler: any PaceScheduler,
    perform: @escaping @MainActor @Sendable (Owner, Value) -> Void
  ) -> Self {
    let weakOwner = WeakOwner(owner)
    let run = mainActor(type, scheduler: scheduler) { value in
      guard let owner = weakOwner.value else { return }
      perform(owner, value)
    }
    return Self(perform: run.perform, ownerIsGone: { weakOwner.value == nil })
  }
}

/// Lets ``MainActorPerform`` recognise a ``ClockScheduler`` of any clock.
protocol ClockSchedulerProtocol {}
extension ClockScheduler: ClockSchedulerProtocol {}

/// Holds an owner weakly for the `owner:` initialisers: each invocation gets it strongly, and
/// once it is gone, calls do nothing.
struct WeakOwner<Owner: AnyObject & Sendable>: Sendable {
  private weak var object: Owner?

  init(_ object: Owner) {
    self.object = object
  }

  var value: Owner? { object }
}
