/// The driver of ``KeyedSharedWork`` and ``SharedWork``: takes the lock, asks the
/// ``SharedWorkMachine``, releases the lock, then starts or cancels a run's task and resumes the
/// callers. The user's operation runs in the run's task, never under the lock.
///
/// On a ``TestScheduler`` a run's task is one the scheduler follows (``TrackedTask``), as a
/// pacer's invocation is: counted in as it starts, out as it ends or waits on the scheduler. A
/// followed caller waiting for a run is counted out while it waits, and in by whatever resumes
/// it, so that PaceTesting's `settle` waits for the run rather than for its callers.
@usableFromInline
final class SharedWorkStorage<Key: Hashable & Sendable, Value: Sendable>: Sendable {
  // The paths a call takes are `@inlinable`, so that they are specialised for the caller's `Key`
  // and `Value`: unspecialised, each generic type they touch is looked up at run time, which cost
  // more than the rest of a run. What only tests use (a `TestScheduler`'s counting, the watchers)
  // stays behind calls that are not inlined.
  @usableFromInline typealias Continuation = UnsafeContinuation<Value, any Error>
  @usableFromInline typealias Operation = @Sendable () async throws -> Value

  /// A caller waiting for a run: its continuation, and whether a ``TestScheduler`` follows its
  /// task (it is counted out while it waits).
  @usableFromInline
  struct Caller {
    @usableFromInline let continuation: Continuation
    @usableFromInline let tracked: Bool

    @inlinable init(_ continuation: Continuation, tracked: Bool) {
      self.continuation = continuation
      self.tracked = tracked
    }
  }

  /// One run in flight: its task (once started) and its callers, the first inline and the others
  /// in a dictionary made only when a second caller joins (a run has one caller, mostly).
  @usableFromInline
  struct Run {
    @usableFromInline var task: Task<Void, Never>?
    @usableFromInline var first: (id: UInt64, caller: Caller)?
    @usableFromInline var others: [UInt64: Caller] = [:]

    @inlinable init(first id: UInt64, _ caller: Caller) {
      first = (id, caller)
    }

    @inlinable mutating func add(_ id: UInt64, _ caller: Caller) {
      others[id] = caller
    }

    @inlinable mutating func remove(_ id: UInt64) -> Caller? {
      if let first, first.id == id {
        self.first = nil
        return first.caller
      }
      return others.removeValue(forKey: id)
    }

    @inlinable func caller(_ id: UInt64) -> Caller? {
      if let first, first.id == id { return first.caller }
      return others[id]
    }

    /// Every caller still waiting.
    @inlinable var callers: Callers {
      Callers(first: first?.caller, others: others.isEmpty ? [] : Array(others.values))
    }
  }

  /// The callers a run's end resumes: the first inline, so that a run with one caller resumes it
  /// without an array.
  @usableFromInline
  struct Callers {
    @usableFromInline var first: Caller?
    @usableFromInline var others: [Caller]

    @inlinable init(first: Caller? = nil, others: [Caller] = []) {
      self.first = first
      self.others = others
    }

    @inlinable var trackedCount: Int {
      var count = first?.tracked == true ? 1 : 0
      for caller in others where caller.tracked { count += 1 }
      return count
    }

    @inlinable func resumeAll(with result: Result<Value, any Error>) {
      first?.continuation.resume(with: result)
      for caller in others { caller.continuation.resume(with: result) }
    }
  }

  /// What a test waits for.
  @usableFromInline
  enum Condition {
    /// At least `count` callers wait for `key`'s run.
    case callers(Key, atLeast: Int)
    /// At least `count` calls have reached the machine.
    case calls(atLeast: Int)
    /// No run is in flight.
    case idle
  }

  @usableFromInline typealias Watchers = [UnsafeContinuation<Bool, Never>]

  @usableFromInline
  struct State {
    @usableFromInline var machine: SharedWorkMachine<Key>
    @usableFromInline var runs: [UInt64: Run] = [:]
    /// The successful results kept for reuse, by run.
    @usableFromInline var kept: [UInt64: Value] = [:]
    @usableFromInline var lastCaller: UInt64 = 0
    /// How many calls have reached the machine (joined, started, reused or refused).
    @usableFromInline var calls = 0
    /// Tests waiting for a condition; empty outside tests.
    @usableFromInline var watchers = ConditionWaiters<Condition>()

    @inlinable init(machine: SharedWorkMachine<Key>) {
      self.machine = machine
    }

    func holds(_ condition: Condition) -> Bool {
      switch condition {
      case .callers(let key, let count): machine.callerCount(for: key) >= count
      case .calls(let count): calls >= count
      case .idle: machine.runningCount == 0
      }
    }

    /// The tests' waiters whose condition holds now; none, at once, outside tests.
    @inlinable mutating func takeSatisfiedWatchers() -> Watchers {
      watchers.isEmpty ? [] : takeReadyWatchers()
    }

    @usableFromInline mutating func takeReadyWatchers() -> Watchers {
      var waiting = watchers
      defer { watchers = waiting }
      return waiting.takeReady(holds: holds)
    }
  }

  /// What to do once the lock is released.
  @usableFromInline
  struct Effects {
    /// Start this run with the caller's operation.
    @usableFromInline var start: UInt64?
    /// Resume these callers with this result.
    @usableFromInline var resume: Callers
    @usableFromInline var result: Result<Value, any Error>?
    /// How many of them a ``TestScheduler`` follows, and counted out while they waited: counted
    /// in before they are resumed.
    @usableFromInline var countIn: Int
    /// Cancel this run's task.
    @usableFromInline var cancel: Task<Void, Never>?
    @usableFromInline var watchers: Watchers

    @inlinable init(
      start: UInt64? = nil, resume: Callers = Callers(), result: Result<Value, any Error>? = nil, countIn: Int = 0,
      cancel: Task<Void, Never>? = nil, watchers: Watchers = []
    ) {
      self.start = start
      self.resume = resume
      self.result = result
      self.countIn = countIn
      self.cancel = cancel
      self.watchers = watchers
    }
  }

  @usableFromInline let clock: AsyncClock
  @usableFromInline let state: LockedState<State>

  init(reuse: Duration, clock: AsyncClock) {
    self.clock = clock
    state = LockedState(State(machine: SharedWorkMachine(reuseNanoseconds: reuse.paceNanoseconds)))
  }

  @inlinable
  func run(_ key: Key, isolation: isolated (any Actor)?, operation: @escaping Operation) async throws -> Value {
    let clock = self.clock
    // A result still fresh is answered here, without suspending; otherwise the caller's id. A
    // caller whose task is cancelled already is refused under the lock below, or here: one check
    // of the task's cancellation a call (a 16-byte atomic read in the runtime).
    let (caller, reused, watchers) = state.withLock { state -> (UInt64, Value?, Watchers) in
      if let run = state.machine.reusableRun(for: key, now: clock.now()), let value = state.kept[run] {
        state.calls += 1
        return (0, value, state.takeSatisfiedWatchers())
      }
      state.lastCaller &+= 1
      return (state.lastCaller, nil, [])
    }
    if let reused {
      for watcher in watchers { watcher.resume(returning: true) }
      try Task.checkCancellation()
      return reused
    }
    let tracked = clock.testScheduler != nil && followsCurrentTask()
    return try await withTaskCancellationHandler(
      operation: {
        try await withUnsafeThrowingContinuation(isolation: isolation) { (continuation: Continuation) in
          var waits = false
          let effects = state.withLock { state -> Effects in
            state.calls += 1
            guard !Task.isCancelled else {
              return Effects(
                resume: Callers(first: Caller(continuation, tracked: false)), result: .failure(CancellationError()),
                watchers: state.takeSatisfiedWatchers())
            }
            var effects = Effects()
            switch state.machine.call(key, caller: caller, now: clock.now()) {
            case .start(let run, let forget):
              for old in forget { state.kept[old] = nil }
              state.runs[run] = Run(first: caller, Caller(continuation, tracked: tracked))
              effects.start = run
              waits = true
            case .join(let run):
              state.runs[run]?.add(caller, Caller(continuation, tracked: tracked))
              waits = state.runs[run] != nil
            case .reuse(let run):
              effects.resume = Callers(first: Caller(continuation, tracked: false))
              // The machine reuses only a run whose result was kept; never leave a caller hanging.
              effects.result = state.kept[run].map { .success($0) } ?? .failure(CancellationError())
            case .refuse, .deliver, .none:
              break
            }
            effects.watchers = state.takeSatisfiedWatchers()
            return effects
          }
          if let run = effects.start { start(run, key: key, operation: operation) }
          carryOut(effects)
          // Counted out after the run it waits for was counted in: the count never reads zero
          // while something is on its way.
          if tracked, waits { countOutCaller() }
        }
      },
      onCancel: {
        let effects = state.withLock { state -> Effects in
          guard case .refuse(let caller, let run, let cancelsRun) = state.machine.cancel(key, caller: caller) else {
            return Effects()
          }
          var effects = Effects(result: .failure(CancellationError()))
          let leaving: Caller?
          if cancelsRun {
            let entry = state.runs.removeValue(forKey: run)
            leaving = entry?.caller(caller)
            effects.cancel = entry?.task
          } else {
            leaving = state.runs[run]?.remove(caller)
          }
          if let leaving {
            effects.resume = Callers(first: leaving)
            effects.countIn = leaving.tracked ? 1 : 0
          }
          effects.watchers = state.takeSatisfiedWatchers()
          return effects
        }
        carryOut(effects)
      },
      isolation: isolation
    )
  }

  /// Starts the run's task with the lock released, then installs its handle under the lock; if
  /// the run was cancelled in between, the task is cancelled instead.
  ///
  /// The task holds the storage until the operation returns (a run cancelled by its last caller
  /// included), so that it can deliver; the storage holds no caller's object, only results.
  @inlinable
  func start(_ run: UInt64, key: Key, operation: @escaping Operation) {
    let task: Task<Void, Never>
    if clock.testScheduler != nil {
      task = startFollowed { await self.perform(run, key: key, operation: operation) }
    } else {
      // One closure literal, of the type the task's initialiser takes: a closure value passed
      // instead would be wrapped in a thunk, one more allocation for each.
      #if canImport(Darwin)
      task = Task { await self.perform(run, key: key, operation: operation) }
      #else
      // Started on the caller's thread (the caller is about to wait for it anyway): an operation
      // that returns at once costs no thread switch, and its first suspension hands the thread
      // back as usual. On Apple platforms, where an SDK before the 26 releases has no
      // `Task.immediate` to compile against, it is enqueued as before.
      task = Task.immediate { await self.perform(run, key: key, operation: operation) }
      #endif
    }
    let installed = state.withLock { state in
      guard state.runs[run] != nil else { return false }
      state.runs[run]?.task = task
      return true
    }
    if !installed { task.cancel() }
  }

  /// A run's task: runs the operation and delivers its result.
  @inlinable
  func perform(_ run: UInt64, key: Key, operation: Operation) async {
    let result: Result<Value, any Error>
    do {
      result = .success(try await operation())
    } catch {
      result = .failure(error)
    }
    finished(run, key: key, result: result)
  }

  @inlinable
  func finished(_ run: UInt64, key: Key, result: Result<Value, any Error>) {
    let clock = self.clock
    let succeeded: Bool
    if case .success = result { succeeded = true } else { succeeded = false }
    let effects = state.withLock { state -> Effects in
      guard
        case .deliver(let run, _, let keep, let forget) =
          state.machine.finished(key, run: run, succeeded: succeeded, now: clock.now())
      else { return Effects() }
      for old in forget { state.kept[old] = nil }
      if keep, case .success(let value) = result { state.kept[run] = value }
      let callers = state.runs.removeValue(forKey: run)?.callers ?? Callers()
      return Effects(
        resume: callers, result: result, countIn: callers.trackedCount, watchers: state.takeSatisfiedWatchers())
    }
    carryOut(effects)
  }

  /// Performs the effects with the lock released.
  @inlinable
  func carryOut(_ effects: Effects) {
    effects.cancel?.cancel()
    if effects.countIn > 0 { countIn(effects.countIn) }
    if let result = effects.result { effects.resume.resumeAll(with: result) }
    for watcher in effects.watchers { watcher.resume(returning: true) }
  }

  // MARK: On a TestScheduler only

  /// Whether the ``TestScheduler`` follows the calling task.
  @usableFromInline func followsCurrentTask() -> Bool {
    clock.testScheduler?.followsCurrentTask ?? false
  }

  /// Counts a caller out while it waits for a run.
  @usableFromInline func countOutCaller() {
    clock.testScheduler?.activityStopped()
  }

  /// Counts `count` callers back in before they are resumed.
  @usableFromInline func countIn(_ count: Int) {
    guard let scheduler = clock.testScheduler else { return }
    for _ in 0..<count { scheduler.activityStarted() }
  }

  /// A run's task that the ``TestScheduler`` follows: counted in before it can run, out by itself
  /// once its callers have been counted in.
  @usableFromInline func startFollowed(_ perform: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
    guard let scheduler = clock.testScheduler else { return Task(operation: perform) }
    scheduler.activityStarted()
    return TrackedTask.start(on: scheduler) {
      Task {
        await perform()
        scheduler.activityStopped()
      }
    }
  }

  var runningCount: Int { state.withLock { $0.machine.runningCount } }

  func callerCount(for key: Key) -> Int { state.withLock { $0.machine.callerCount(for: key) } }

  /// Returns `true` once `condition` holds (at once if it does), resumed by the event that makes
  /// it hold, not by polling; or `false` after `timeout` of real time (`nil`: no limit).
  func waitUntil(_ condition: Condition, timeout: Duration?) async -> Bool {
    await state.waitUntil(condition, in: \.watchers, timeout: timeout) { $0.holds($1) }
  }
}
