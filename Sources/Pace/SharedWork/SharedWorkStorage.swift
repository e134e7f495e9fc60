/// The driver of ``KeyedSharedWork`` and ``SharedWork``: takes the lock, asks the
/// ``SharedWorkMachine``, releases the lock, then starts or cancels a run's task and resumes the
/// callers. The user's operation runs in the run's task, never under the lock.
///
/// On a ``TestScheduler`` a run's task is one the scheduler follows (``TrackedTask``), as a
/// pacer's invocation is: counted in as it starts, out as it ends or waits on the scheduler. A
/// followed caller waiting for a run is counted out while it waits, and in by whatever resumes
/// it, so that PaceTesting's `settle` waits for the run rather than for its callers.
final class SharedWorkStorage<Key: Hashable & Sendable, Value: Sendable>: Sendable {
  typealias Continuation = UnsafeContinuation<Value, any Error>
  typealias Operation = @Sendable () async throws -> Value

  /// A caller waiting for a run: its continuation, and whether a ``TestScheduler`` follows its
  /// task (it is counted out while it waits).
  struct Caller {
    let continuation: Continuation
    let tracked: Bool
  }

  /// One run in flight: its task (once started) and its callers.
  struct Run {
    var task: Task<Void, Never>?
    var continuations: [UInt64: Caller]
  }

  /// What a test waits for.
  enum Condition {
    /// At least `count` callers wait for `key`'s run.
    case callers(Key, atLeast: Int)
    /// At least `count` calls have reached the machine.
    case calls(atLeast: Int)
    /// No run is in flight.
    case idle
  }

  struct State {
    var machine: SharedWorkMachine<Key>
    var runs: [UInt64: Run] = [:]
    /// The successful results kept for reuse, by run.
    var kept: [UInt64: Value] = [:]
    var lastCaller: UInt64 = 0
    /// How many calls have reached the machine (joined, started, reused or refused).
    var calls = 0
    /// Tests waiting for a condition; empty outside tests.
    var watchers = ConditionWaiters<Condition>()

    func holds(_ condition: Condition) -> Bool {
      switch condition {
      case .callers(let key, let count): machine.callerCount(for: key) >= count
      case .calls(let count): calls >= count
      case .idle: machine.runningCount == 0
      }
    }

    mutating func takeSatisfiedWatchers() -> [UnsafeContinuation<Bool, Never>] {
      var waiting = watchers
      defer { watchers = waiting }
      return waiting.takeReady(holds: holds)
    }
  }

  /// What to do once the lock is released.
  struct Effects {
    /// Start this run with the caller's operation.
    var start: UInt64?
    /// Resume these callers with this result.
    var resume: [Continuation] = []
    var result: Result<Value, any Error>?
    /// How many of them a ``TestScheduler`` follows, and counted out while they waited: counted
    /// in before they are resumed.
    var countIn = 0
    /// Cancel this run's task.
    var cancel: Task<Void, Never>?
    var watchers: [UnsafeContinuation<Bool, Never>] = []
  }

  let clock: AsyncClock
  let state: LockedState<State>

  init(reuse: Duration, clock: AsyncClock) {
    self.clock = clock
    state = LockedState(State(machine: SharedWorkMachine(reuseNanoseconds: reuse.paceNanoseconds)))
  }

  deinit {
    // Callers hold the storage while they wait, so no caller can be left; a run's task holds it
    // weakly, and is cancelled here in case one is still on its way out.
    let tasks = state.withLock { state in state.runs.values.compactMap(\.task) }
    for task in tasks { task.cancel() }
  }

  func run(_ key: Key, isolation: isolated (any Actor)?, operation: @escaping Operation) async throws -> Value {
    try Task.checkCancellation()
    let caller = state.withLock { state in
      state.lastCaller &+= 1
      return state.lastCaller
    }
    let clock = self.clock
    let tracked = clock.testScheduler?.followsCurrentTask ?? false
    return try await withTaskCancellationHandler(
      operation: {
        try await withUnsafeThrowingContinuation(isolation: isolation) { (continuation: Continuation) in
          var waits = false
          let effects = state.withLock { state -> Effects in
            state.calls += 1
            guard !Task.isCancelled else {
              return Effects(
                resume: [continuation], result: .failure(CancellationError()), watchers: state.takeSatisfiedWatchers())
            }
            var effects = Effects()
            switch state.machine.call(key, caller: caller, now: clock.now()) {
            case .start(let run, let forget):
              for old in forget { state.kept[old] = nil }
              state.runs[run] = Run(
                task: nil, continuations: [caller: Caller(continuation: continuation, tracked: tracked)])
              effects.start = run
              waits = true
            case .join(let run):
              state.runs[run]?.continuations[caller] = Caller(continuation: continuation, tracked: tracked)
              waits = state.runs[run] != nil
            case .reuse(let run):
              effects.resume = [continuation]
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
          if tracked, waits { clock.testScheduler?.activityStopped() }
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
            leaving = entry?.continuations[caller]
            effects.cancel = entry?.task
          } else {
            leaving = state.runs[run]?.continuations.removeValue(forKey: caller)
          }
          if let leaving {
            effects.resume = [leaving.continuation]
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
  private func start(_ run: UInt64, key: Key, operation: @escaping Operation) {
    let scheduler = clock.testScheduler
    let perform = { @Sendable [weak self] in
      let result: Result<Value, any Error>
      do {
        result = .success(try await operation())
      } catch {
        result = .failure(error)
      }
      self?.finished(run, key: key, result: result)
      scheduler?.activityStopped()
    }
    let task: Task<Void, Never>
    if let scheduler {
      // Counted in before it can run, out by itself once its callers have been counted in.
      scheduler.activityStarted()
      task = TrackedTask.start(on: scheduler) { Task(operation: perform) }
    } else {
      task = Task(operation: perform)
    }
    let installed = state.withLock { state in
      guard state.runs[run] != nil else { return false }
      state.runs[run]?.task = task
      return true
    }
    if !installed { task.cancel() }
  }

  private func finished(_ run: UInt64, key: Key, result: Result<Value, any Error>) {
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
      let callers = state.runs.removeValue(forKey: run)?.continuations.values.map { $0 } ?? []
      return Effects(
        resume: callers.map(\.continuation), result: result, countIn: callers.filter(\.tracked).count,
        watchers: state.takeSatisfiedWatchers())
    }
    carryOut(effects)
  }

  /// Performs the effects with the lock released.
  private func carryOut(_ effects: Effects) {
    effects.cancel?.cancel()
    if effects.countIn > 0, let scheduler = clock.testScheduler {
      for _ in 0..<effects.countIn { scheduler.activityStarted() }
    }
    if let result = effects.result {
      for continuation in effects.resume { continuation.resume(with: result) }
    }
    for watcher in effects.watchers { watcher.resume(returning: true) }
  }

  var runningCount: Int { state.withLock { $0.machine.runningCount } }

  func callerCount(for key: Key) -> Int { state.withLock { $0.machine.callerCount(for: key) } }

  /// Returns `true` once `condition` holds (at once if it does), resumed by the event that makes
  /// it hold, not by polling; or `false` after `timeout` of real time (`nil`: no limit).
  func waitUntil(_ condition: Condition, timeout: Duration?) async -> Bool {
    await state.waitUntil(condition, in: \.watchers, timeout: timeout) { $0.holds($1) }
  }
}
