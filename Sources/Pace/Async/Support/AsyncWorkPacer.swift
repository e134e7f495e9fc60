/// What happens to work in flight when a newer call supersedes it.
///
/// Work is superseded when a call arrives while it runs and that call's value will reach a newer
/// invocation. Either way its callers throw `CancellationError` at once: a stale result never
/// reaches them.
public enum StaleWork: Sendable, Hashable {
  /// Cancel the stale work's task (the default): right for reads such as a search, where only the
  /// newest answer matters.
  case cancel
  /// Let the stale work run to its end and drop its result: right for work that must not be cut
  /// short, such as a write. Invocations may then overlap.
  case discardResult
}

/// The engine behind ``AsyncDebouncer`` and ``AsyncThrottler``: callers wait for the result of
/// the invocation that covers their call.
///
/// Each call goes through the same pacing state machine as ``Debouncer`` or ``Throttler``:
///
/// - a call whose value the machine invokes at once (a leading edge) is covered by that
///   invocation, together with the calls still waiting, if any;
/// - a call whose value the machine keeps pending waits: the next invocation covers every
///   waiting call, and they share its result;
/// - a call the machine drops (a leading-only edge inside a burst) is covered by no invocation
///   and throws `CancellationError` at once.
///
/// An invocation runs `operation` in a task of its own. A call that will reach a newer
/// invocation supersedes the work in flight (see ``StaleWork``). A caller whose task is
/// cancelled stops waiting with `CancellationError`; work nobody waits for any more is cancelled
/// (with ``StaleWork/cancel``), and an invocation that nobody waits for is skipped.
///
/// One lock guards the machine, the waiting callers and the runs; continuations are resumed and
/// tasks cancelled after it is released, and `operation` runs in its own task, never under it.
final class AsyncWorkPacer<Machine: PacerStateMachine, Output: Sendable>: Sendable {
  typealias Input = Machine.Value
  typealias Continuation = UnsafeContinuation<Output, any Error>

  private struct Caller {
    let id: UInt64
    let continuation: Continuation
  }

  /// An invocation in flight and the callers waiting for its result.
  private struct Run {
    var callers: [Caller]
    let task: Task<Void, Never>
  }

  private struct State {
    var machine: Machine
    var nextID: UInt64 = 0
    /// Callers whose values are pending in the machine, oldest first.
    var waiting: [Caller] = []
    /// Invocations in flight whose callers wait for them; at most one unless superseded work is
    /// left to finish.
    var runs: [UInt64: Run] = [:]
    /// Superseded invocations left to finish (``StaleWork/discardResult``), their results dropped.
    var discarded: [UInt64: Task<Void, Never>] = [:]
    var timer: (any PaceCancellable)?
    var timerGeneration: UInt64 = 0
    /// How many invocations have started, for tests.
    var invocationCount = 0

    mutating func makeID() -> UInt64 {
      nextID &+= 1
      return nextID
    }
  }

  /// What to do once the lock is released.
  private struct Effects {
    var resumptions: [(Continuation, Result<Output, any Error>)] = []
    var cancellations: [any PaceCancellable] = []

    mutating func fail(_ callers: [Caller]) {
      for caller in callers { resumptions.append((caller.continuation, .failure(CancellationError()))) }
    }

    func carryOut() {
      for cancellable in cancellations { cancellable.cancel() }
      for (continuation, result) in resumptions { continuation.resume(with: result) }
    }
  }

  private let operation: @Sendable (Input) async throws -> Output
  private let staleWork: StaleWork
  private let clock: AsyncClock
  private let state: LockedState<State>

  init(
    machine: Machine, staleWork: StaleWork, clock: AsyncClock,
    operation: @escaping @Sendable (Input) async throws -> Output
  ) {
    self.operation = operation
    self.staleWork = staleWork
    self.clock = clock
    self.state = LockedState(State(machine: machine))
  }

  deinit {
    // Callers hold the instance while they wait, so only timers and unawaited work are left.
    let effects = state.withLock { state in takeEverything(from: &state) }
    effects.carryOut()
  }

  // MARK: Calls

  func call(_ input: Input) async throws -> Output {
    let id = state.withLock { $0.makeID() }
    return try await withTaskCancellationHandler {
      try await withUnsafeThrowingContinuation { (continuation: Continuation) in
        let effects = state.withLock { state in
          register(Caller(id: id, continuation: continuation), input, in: &state)
        }
        effects.carryOut()
      }
    } onCancel: {
      callerCancelled(id)
    }
  }

  private func register(_ caller: Caller, _ input: Input, in state: inout State) -> Effects {
    var effects = Effects()
    // A task cancelled before this point ran its handler when nothing was registered yet.
    guard !Task.isCancelled else {
      effects.fail([caller])
      return effects
    }
    let clock = self.clock
    let action = state.machine.call(input, now: clock.now())
    let invoked = carryOut(action, in: &state)
    guard invoked != nil || state.machine.isPending else {
      // Dropped by the machine: no invocation will cover this call.
      effects.fail([caller])
      return effects
    }
    supersedeRuns(in: &state, effects: &effects)
    state.waiting.append(caller)
    if let invoked { start(invoked, in: &state) }
    return effects
  }

  private func callerCancelled(_ id: UInt64) {
    var effects = Effects()
    state.withLock { state in
      if let index = state.waiting.firstIndex(where: { $0.id == id }) {
        effects.fail([state.waiting.remove(at: index)])
        return
      }
      for (runID, var run) in state.runs {
        guard let index = run.callers.firstIndex(where: { $0.id == id }) else { continue }
        effects.fail([run.callers.remove(at: index)])
        if run.callers.isEmpty {
          // Nobody waits for this work any more.
          state.runs[runID] = nil
          retire(runID, run.task, in: &state, effects: &effects)
        } else {
          state.runs[runID] = run
        }
        return
      }
    }
    effects.carryOut()
  }

  // MARK: Control

  func flush() {
    let now = clock.now()
    state.withLock { state in
      guard let value = state.machine.flush(now: now) else { return }
      start(value, in: &state)
    }
  }

  func cancel() {
    let effects = state.withLock { state in takeEverything(from: &state) }
    effects.carryOut()
  }

  var isPending: Bool {
    state.withLock { $0.machine.isPending }
  }

  /// Resets the machine and ends every wait and every task.
  private func takeEverything(from state: inout State) -> Effects {
    var effects = Effects()
    if state.machine.cancel() || state.timer != nil {
      state.timerGeneration &+= 1
      if let timer = state.timer.take() { effects.cancellations.append(timer) }
    }
    effects.fail(state.waiting)
    state.waiting.removeAll()
    for run in state.runs.values {
      effects.fail(run.callers)
      effects.cancellations.append(run.task)
    }
    state.runs.removeAll()
    effects.cancellations.append(contentsOf: state.discarded.values.map { $0 as any PaceCancellable })
    state.discarded.removeAll()
    return effects
  }

  // MARK: Invocations

  /// Arms the timer the action asks for; returns the value to invoke, if any.
  private func carryOut(_ action: PacerAction<Input>, in state: inout State) -> Input? {
    switch action {
    case .none:
      return nil
    case .schedule(let deadline):
      arm(at: deadline, in: &state)
      return nil
    case .invoke(let value):
      return value
    case .invokeAndSchedule(let value, let deadline):
      arm(at: deadline, in: &state)
      return value
    }
  }

  /// Starts an invocation covering every waiting caller; skipped if none waits.
  private func start(_ value: Input, in state: inout State) {
    let callers = state.waiting
    state.waiting.removeAll()
    guard !callers.isEmpty else { return }
    state.invocationCount += 1
    let runID = state.makeID()
    let operation = self.operation
    // Creating a task runs none of its code here, so it is safe under the lock.
    let task = Task { [weak self] in
      let result: Result<Output, any Error>
      do {
        result = .success(try await operation(value))
      } catch {
        result = .failure(error)
      }
      self?.runFinished(runID, result)
    }
    state.runs[runID] = Run(callers: callers, task: task)
  }

  private func runFinished(_ runID: UInt64, _ result: Result<Output, any Error>) {
    let callers = state.withLock { state -> [Caller] in
      state.discarded[runID] = nil
      return state.runs.removeValue(forKey: runID)?.callers ?? []
    }
    for caller in callers { caller.continuation.resume(with: result) }
  }

  private func supersedeRuns(in state: inout State, effects: inout Effects) {
    for (runID, run) in state.runs {
      effects.fail(run.callers)
      retire(runID, run.task, in: &state, effects: &effects)
    }
    state.runs.removeAll()
  }

  /// Work whose result nobody will get: cancelled, or left to finish.
  private func retire(_ runID: UInt64, _ task: Task<Void, Never>, in state: inout State, effects: inout Effects) {
    switch staleWork {
    case .cancel: effects.cancellations.append(task)
    case .discardResult: state.discarded[runID] = task
    }
  }

  // MARK: Timer

  /// Arms the timer under the lock: `TestScheduler` only records the job and other clocks only
  /// create a task.
  private func arm(at deadline: PaceInstant, in state: inout State) {
    state.timerGeneration &+= 1
    let generation = state.timerGeneration
    state.timer = clock.schedule(deadline) { [weak self] in
      self?.timerFired(generation: generation)
    }
  }

  private func timerFired(generation: UInt64) {
    let clock = self.clock
    state.withLock { state in
      guard state.timerGeneration == generation else { return }
      state.timer = nil
      if let value = carryOut(state.machine.timerFired(now: clock.now()), in: &state) {
        start(value, in: &state)
      }
    }
  }

  // MARK: Testing

  /// How many invocations have started (their tasks created) so far.
  var invocationCountForTesting: Int {
    state.withLock { $0.invocationCount }
  }

  /// The tasks running work now, superseded or not, so a test can await their end.
  var tasksForTesting: [Task<Void, Never>] {
    state.withLock { state in state.runs.values.map(\.task) + state.discarded.values }
  }
}
