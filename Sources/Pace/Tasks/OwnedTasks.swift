/// The fire-and-forget tasks an object starts: cancelled when the object lets go of them, and
/// awaitable by a test.
///
/// A view model often registers a call synchronously and lets a task deliver the result:
///
/// ```swift
/// @MainActor final class ResultsModel {
///   private(set) var items: [String] = []
///   let tasks = OwnedTasks()
///   private let search: AsyncDebouncer<String, [String]>
///   // init sets `search`
///
///   func queryChanged(_ query: String) {
///     let results = search.submit(query)          // registered now, in order
///     tasks.spawn { [weak self] in
///       guard let items = try? await results.value else { return }  // superseded
///       self?.items = items
///     }
///   }
/// }
/// ```
///
/// A plain `Task { }` there works in the app, but a test cannot await it without the model
/// exposing it, and it runs on after the model is gone. Spawned through `OwnedTasks`, the task:
///
/// - starts on the caller's actor, like `Task { }` (a main-actor method spawns main-actor work);
/// - is cancelled when the `OwnedTasks` is released (with its owner) or by ``cancelAll()``, so a
///   task that waits for a result holds nothing but what it captured;
/// - is awaited by a test with PaceTesting's `waitForAll(timeout:)` (which fails the test when the
///   tasks do not end in time) or `TestScheduler.settle(by:awaiting:)`; production code that must
///   await them (an app draining its work before it suspends) calls ``waitUntilAllEnded()``, which
///   waits as long as they run.
///
/// Capture the owner weakly (`[weak self]`), and read the result into a local before touching
/// `self`: in `self?.items = try await results.value` the `self?` is evaluated, and held
/// strongly, before the `await`, so the owner lives until the result comes.
///
/// Made with ``init(clock:)`` and the model's clock, the tasks are also followed by a
/// ``TestScheduler`` passed as that clock: PaceTesting's `settle(by:)` lets each one run to its
/// next wait on the scheduler (a sleep on it, a `RateLimiter` permit, a shared run) or its end
/// before it moves time, as it does for the pacers' invocations. In the app, with any other
/// clock, they are plain tasks.
public final class OwnedTasks: Sendable {
  private struct State {
    var nextID: UInt64 = 0
    var running: [UInt64: Task<Void, Never>] = [:]
    /// Waiters of ``waitUntilAllEnded()``, resumed with `true` once `running` is empty, or with `false`
    /// by their timeout.
    var idleWaiters: [UInt64: UnsafeContinuation<Bool, Never>] = [:]

    mutating func makeID() -> UInt64 {
      nextID &+= 1
      return nextID
    }
  }

  private let state = LockedState(State())
  /// The scheduler that follows the tasks, when the clock given is a ``TestScheduler``.
  private let scheduler: TestScheduler?

  /// An empty set of tasks; store it in the object that spawns them.
  public init() {
    scheduler = nil
  }

  /// An empty set of tasks that a ``TestScheduler`` given as `clock` follows; store it in the
  /// object that spawns them, and pass the clock the object was given.
  ///
  /// On a `TestScheduler`, each task counts as running from its spawn until it ends, except
  /// while it waits on that scheduler: sleeping on it, waiting in `acquire` of a
  /// ``RateLimiter`` or ``KeyedRateLimiter`` on it, or waiting for the run of a ``SharedWork`` or
  /// ``KeyedSharedWork`` on it. PaceTesting's `settle(by:)` waits for the running ones before it
  /// moves time, so a test sees exactly what ran by each instant. A task that awaits anything
  /// else (another task's value, a real request, its own `async let` children) keeps `settle`
  /// waiting until its time limit fails the test: follow only the tasks that wait on the clock.
  ///
  /// - Parameter clock: The clock the owner was given; any other clock than a `TestScheduler`
  ///   makes this the same as ``init()``.
  public init<C: Clock>(clock: C) where C.Duration == Duration {
    scheduler = clock as? TestScheduler
  }

  deinit {
    // The owner is gone: nothing the tasks deliver has anywhere to go.
    let tasks = state.withLock { state in Array(state.running.values) }
    for task in tasks { task.cancel() }
  }

  /// Starts `work` in a new task that inherits the caller's actor, as `Task { }` does, and keeps
  /// it until it ends.
  ///
  /// - Parameter work: The work; it runs until it ends or is cancelled with the others.
  public func spawn(
    @_inheritActorContext _ work: sending @escaping @isolated(any) () async -> Void
  ) {
    let id = state.withLock { $0.makeID() }
    let task: Task<Void, Never>
    let scheduler = self.scheduler
    if let scheduler {
      // Counted in before it can run, out by the task below once it has ended.
      scheduler.activityStarted()
      // `withValue` runs its closure once, before it returns, and nothing else uses `work`: it
      // is still sent to the one task, as `sending` asks.
      nonisolated(unsafe) let work = work
      task = TrackedTask.start(on: scheduler) { Task(operation: work) }
    } else {
      task = Task(operation: work)
    }
    state.withLock { $0.running[id] = task }
    // The work's closure cannot be wrapped without losing its actor, so a second task notes its
    // end. It holds the set weakly: the owner's release still cancels the work.
    Task { [weak self] in
      _ = await task.value
      scheduler?.activityStopped()
      self?.finished(id)
    }
  }

  /// Cancels every task spawned so far; tasks spawned later run as usual.
  public func cancelAll() {
    let tasks = state.withLock { Array($0.running.values) }
    for task in tasks { task.cancel() }
  }

  /// How many spawned tasks have not ended yet.
  public var count: Int {
    state.withLock { $0.running.count }
  }

  /// Returns once every task spawned so far, and every task those spawn meanwhile, has ended;
  /// at once if none runs. It waits as long as the tasks run: for production code (an app
  /// draining its work before it suspends).
  ///
  /// A test calls PaceTesting's `waitForAll(timeout:)` instead, which records a failure when the
  /// tasks still run after its time limit: work that needs virtual time the test has not
  /// advanced never ends, and this wait would hang the test. The name says "until all ended",
  /// not "wait for", so that a test does not reach for it by accident.
  public func waitUntilAllEnded() async {
    _ = await waitUntilIdle(timeout: nil)
  }

  /// Returns once every task spawned so far has ended, however long that takes.
  @available(
    *, deprecated,
    message:
      "waits with no time limit, and hangs a test whose tasks wait for time it has not advanced: in a test call waitForAll(timeout:) from PaceTesting; in the app, waitUntilAllEnded()"
  )
  public func waitForAll() async {
    await waitUntilAllEnded()
  }

  /// ``waitUntilAllEnded()`` for at most `timeout` of real time; `false` if the tasks still run then.
  package func waitUntilIdle(timeout: Duration?) async -> Bool {
    let id = state.withLock { $0.makeID() }
    let timer = timeout.map { timeout in
      Task { [weak self] in
        // Cancelled as soon as the tasks end: a passing test never waits for it.
        guard await Task.sleepUnlessCancelled(for: timeout) else { return }
        self?.state.withLock { $0.idleWaiters.removeValue(forKey: id) }?.resume(returning: false)
      }
    }
    let idle = await withUnsafeContinuation { (continuation: UnsafeContinuation<Bool, Never>) in
      let idle = state.withLock { state -> Bool in
        guard state.running.isEmpty else {
          state.idleWaiters[id] = continuation
          return false
        }
        return true
      }
      if idle { continuation.resume(returning: true) }
    }
    timer?.cancel()
    return idle
  }

  private func finished(_ id: UInt64) {
    let waiters = state.withLock { state -> [UnsafeContinuation<Bool, Never>] in
      state.running[id] = nil
      guard state.running.isEmpty else { return [] }
      defer { state.idleWaiters = [:] }
      return Array(state.idleWaiters.values)
    }
    for waiter in waiters { waiter.resume(returning: true) }
  }
}
