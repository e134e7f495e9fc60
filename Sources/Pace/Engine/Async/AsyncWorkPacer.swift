/// What happens when a call arrives while work is in flight.
///
/// With ``cancel`` and ``discardResult``, the call supersedes the work: its value will reach a
/// newer invocation, and the work's callers throw `CancellationError` at once, so a stale result
/// never reaches them. With ``dropCallsWhileRunning`` the work goes on and the new call is dropped.
public enum StaleWork: Sendable, Hashable {
  /// Cancel the stale work's task (the default): right for reads such as a search, where only the
  /// newest answer matters.
  case cancel
  /// Let the stale work run to its end and drop its result: right for work that must not be cut
  /// short, such as a write. Invocations may then overlap.
  case discardResult
  /// Keep the work in flight and drop the calls that arrive while it runs: the double-submit
  /// guard (RxSwift's and CombineExt's `flatMapFirst`), right for a payment or a form post. A
  /// dropped call throws `CancellationError` at once, as a call covered by no invocation does, and
  /// leaves the timing untouched: it does not reach the pacing machine, so it starts no burst and
  /// no window. Calls made once the work has ended are paced as usual.
  case dropCallsWhileRunning
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

  /// Where a caller's result goes: the continuation of a suspended ``call(_:isolation:)``, or
  /// the promise that a ``submit(_:)`` task awaits.
  private enum Waiter: Sendable {
    case continuation(Continuation)
    case promise(ResultPromise<Output>)

    func resume(with result: Result<Output, any Error>) {
      switch self {
      case .continuation(let continuation): continuation.resume(with: result)
      case .promise(let promise): promise.fulfil(with: result)
      }
    }
  }

  private struct Caller {
    let id: UInt64
    let waiter: Waiter
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
    /// The clock's timer, armed as ``TimerSlot`` says.
    var timer = TimerSlot()
    /// How many invocations have started, for tests.
    var invocationCount = 0

    mutating func makeID() -> UInt64 {
      nextID &+= 1
      return nextID
    }
  }

  /// What to do once the lock is released.
  private struct Effects {
    var resumptions: [(Waiter, Result<Output, any Error>)] = []
    var cancellations: [any PaceCancellable] = []
    var arm: TimerSlot.Ticket?

    mutating func fail(_ callers: [Caller]) {
      for caller in callers { resumptions.append((caller.waiter, .failure(CancellationError()))) }
    }

    mutating func append(_ other: Effects) {
      resumptions.append(contentsOf: other.resumptions)
      cancellations.append(contentsOf: other.cancellations)
      if let ticket = other.arm { arm = ticket }
    }
  }

  private let operation: @Sendable (Input) async throws -> Output
  private let staleWork: StaleWork
  private let clock: AsyncClock
  /// Whether the owner of an `owner:` pacer is gone; `nil` without an owner.
  private let ownerIsGone: (@Sendable () -> Bool)?
  private let state: LockedState<State>

  init(
    machine: Machine, staleWork: StaleWork, clock: AsyncClock, ownerIsGone: (@Sendable () -> Bool)? = nil,
    operation: @escaping @Sendable (Input) async throws -> Output
  ) {
    self.operation = operation
    self.staleWork = staleWork
    self.clock = clock
    self.ownerIsGone = ownerIsGone
    self.state = LockedState(State(machine: machine))
  }

  deinit {
    // Callers of `call` hold the instance while they wait; `submit`'s tasks do not, and their
    // callers fail here, with the timers and any work still running.
    let effects = state.withLock { state in takeEverything(from: &state) }
    carryOut(effects)
  }

  // MARK: Calls

  /// Registers the call on the caller's actor, before the first suspension: with `isolation`,
  /// neither the cancellation handler nor the continuation hops to another executor.
  func call(_ input: Input, isolation: isolated (any Actor)?) async throws -> Output {
    let id = state.withLock { $0.makeID() }
    return try await withTaskCancellationHandler(
      operation: {
        try await withUnsafeThrowingContinuation(isolation: isolation) { (continuation: Continuation) in
          let effects = state.withLock { state in
            // A task cancelled before this point ran its handler when nothing was registered yet.
            let caller = Caller(id: id, waiter: .continuation(continuation))
            return register(caller, input, cancelled: Task.isCancelled, in: &state)
          }
          carryOut(effects)
        }
      },
      onCancel: {
        callerCancelled(id)
      },
      isolation: isolation
    )
  }

  /// Registers the call now, synchronously, and returns a task that waits for its result;
  /// cancelling the task cancels the call.
  func submit(_ input: Input) -> Task<Output, any Error> {
    let promise = ResultPromise<Output>()
    let id = state.withLock { $0.makeID() }
    let effects = state.withLock { state in
      register(Caller(id: id, waiter: .promise(promise)), input, cancelled: false, in: &state)
    }
    carryOut(effects)
    // The task does not keep the pacer alive, not even while it waits (a strong local here kept a
    // released debouncer's timer armed and let its work run): releasing the pacer fails the promise.
    return Task { [weak self] in
      try await withTaskCancellationHandler {
        try await promise.value
      } onCancel: { [weak self] in
        self?.callerCancelled(id)
      }
    }
  }

  private func register(_ caller: Caller, _ input: Input, cancelled: Bool, in state: inout State) -> Effects {
    var effects = Effects()
    guard !cancelled, !(ownerIsGone?() ?? false) else {
      effects.fail([caller])
      return effects
    }
    if staleWork == .dropCallsWhileRunning && !state.runs.isEmpty {
      // The work in flight goes on; this call is covered by no invocation.
      effects.fail([caller])
      return effects
    }
    let clock = self.clock
    let action = state.machine.call(input, now: clock.now())
    let invoked = apply(action, in: &state, effects: &effects)
    guard invoked != nil || state.machine.isPending else {
      // Dropped by the machine: no invocation will cover this call.
      effects.fail([caller])
      return effects
    }
    supersedeRuns(in: &state, effects: &effects)
    state.waiting.append(caller)
    if let invoked { effects.append(start(invoked, in: &state)) }
    return effects
  }

  private func callerCancelled(_ id: UInt64) {
    var effects = Effects()
    state.withLock { state in
      if let index = state.waiting.firstIndex(where: { $0.id == id }) {
        effects.fail([state.waiting.remove(at: index)])
        if state.waiting.isEmpty {
          // Nobody waits for the pending invocation: it will not happen, and needs no timer.
          _ = state.machine.flush(now: clock.now())
          disarmIfUnneeded(in: &state, effects: &effects)
        }
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
    carryOut(effects)
  }

  // MARK: Control

  func flush() {
    let now = clock.now()
    let effects = state.withLock { state -> Effects in
      guard let value = state.machine.flush(now: now) else { return Effects() }
      var effects = start(value, in: &state)
      disarmIfUnneeded(in: &state, effects: &effects)
      return effects
    }
    carryOut(effects)
  }

  func cancel() {
    let effects = state.withLock { state in takeEverything(from: &state) }
    carryOut(effects)
  }

  /// Whether an invocation will start: a value is pending and a caller waits for it.
  var isPending: Bool {
    state.withLock { $0.machine.isPending && !$0.waiting.isEmpty }
  }

  /// When the pending invocation starts if no call arrives meanwhile; `nil` if none will.
  var nextInvocation: PaceInstant? {
    state.withLock { $0.waiting.isEmpty ? nil : $0.machine.nextInvocation }
  }

  /// Cancels the timer once the machine no longer expects it.
  private func disarmIfUnneeded(in state: inout State, effects: inout Effects) {
    guard !state.machine.hasTimer, state.timer.isArmed else { return }
    effects.arm = nil
    if let timer = state.timer.disarm() { effects.cancellations.append(timer) }
  }

  /// Resets the machine and ends every wait and every task.
  private func takeEverything(from state: inout State) -> Effects {
    var effects = Effects()
    _ = state.machine.cancel()
    if let timer = state.timer.disarm() { effects.cancellations.append(timer) }
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

  /// Reserves the timer the action asks for; returns the value to invoke, if any.
  private func apply(_ action: PacerAction<Input>, in state: inout State, effects: inout Effects) -> Input? {
    if let deadline = action.deadline {
      let (ticket, superseded) = state.timer.reserve(at: deadline)
      effects.arm = ticket
      if let superseded { effects.cancellations.append(superseded) }
    }
    return action.invocation
  }

  /// Once the lock is released: cancels, arms the timer, then resumes the callers.
  private func carryOut(_ effects: Effects) {
    for cancellable in effects.cancellations { cancellable.cancel() }
    if let ticket = effects.arm { arm(ticket) }
    for (waiter, result) in effects.resumptions { waiter.resume(with: result) }
  }

  /// Starts an invocation covering every waiting caller; skipped if none waits.
  private func start(_ value: Input, in state: inout State) -> Effects {
    var effects = Effects()
    let callers = state.waiting
    state.waiting.removeAll()
    guard !callers.isEmpty else { return effects }
    if let ownerIsGone, ownerIsGone() {
      // The owner went away while the calls waited: the invocation is dropped.
      effects.fail(callers)
      return effects
    }
    state.invocationCount += 1
    let runID = state.makeID()
    let operation = self.operation
    // Creating a task runs none of its code here, so it is safe under the lock.
    let invoke = { @Sendable [weak self] in
      let result: Result<Output, any Error>
      do {
        result = .success(try await operation(value))
      } catch {
        result = .failure(error)
      }
      self?.runFinished(runID, result)
    }
    let task: Task<Void, Never>
    if let scheduler = clock.testScheduler {
      // On virtual time the scheduler counts the invocation as running until it ends, or while
      // it sleeps on the scheduler, so that PaceTesting's `settle` knows when to move time.
      scheduler.activityStarted()
      task = TrackedTask.start(on: scheduler) {
        Task {
          await invoke()
          scheduler.activityStopped()
        }
      }
    } else {
      task = Task(operation: invoke)
    }
    state.runs[runID] = Run(callers: callers, task: task)
    return effects
  }

  private func runFinished(_ runID: UInt64, _ result: Result<Output, any Error>) {
    let callers = state.withLock { state -> [Caller] in
      state.discarded[runID] = nil
      return state.runs.removeValue(forKey: runID)?.callers ?? []
    }
    for caller in callers { caller.waiter.resume(with: result) }
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
    case .cancel, .dropCallsWhileRunning: effects.cancellations.append(task)
    case .discardResult: state.discarded[runID] = task
    }
  }

  // MARK: Timer

  private func arm(_ ticket: TimerSlot.Ticket) {
    TimerSlot.arm(ticket, schedule: clock.schedule, fire: { [weak self] in self?.timerFired(generation: $0) }) {
      timer in state.withLock { $0.timer.install(timer, for: ticket) }
    }
  }

  private func timerFired(generation: UInt64) {
    let clock = self.clock
    let effects = state.withLock { state -> Effects in
      guard state.timer.fire(generation) else { return Effects() }
      var effects = Effects()
      guard let value = apply(state.machine.timerFired(now: clock.now()), in: &state, effects: &effects) else {
        return effects
      }
      effects.append(start(value, in: &state))
      return effects
    }
    carryOut(effects)
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

/// The result of a ``AsyncWorkPacer/submit(_:)`` call, fulfilled once by the pacer and awaited by
/// the task that `submit` returns.
final class ResultPromise<Output: Sendable>: Sendable {
  private enum State {
    case waiting(UnsafeContinuation<Output, any Error>?)
    case fulfilled(Result<Output, any Error>)
  }

  private let state = LockedState(State.waiting(nil))

  /// Stores `result` and resumes the waiting task, if any; later calls do nothing.
  func fulfil(with result: Result<Output, any Error>) {
    let continuation = state.withLock { state -> UnsafeContinuation<Output, any Error>? in
      guard case .waiting(let continuation) = state else { return nil }
      state = .fulfilled(result)
      return continuation
    }
    continuation?.resume(with: result)
  }

  /// The result, once fulfilled. Awaited by one task only.
  var value: Output {
    get async throws {
      try await withUnsafeThrowingContinuation { continuation in
        let result = state.withLock { state -> Result<Output, any Error>? in
          switch state {
          case .fulfilled(let result): return result
          case .waiting:
            state = .waiting(continuation)
            return nil
          }
        }
        if let result { continuation.resume(with: result) }
      }
    }
  }
}

/// An operation that gets an owner held weakly, for the `owner:` initialisers of
/// ``AsyncDebouncer`` and ``AsyncThrottler``.
@usableFromInline
struct OwnedOperation<Owner: AnyObject & Sendable, Input: Sendable, Output: Sendable>: Sendable {
  @usableFromInline weak var owner: Owner?
  @usableFromInline let operation: @Sendable (Owner, Input) async throws -> Output

  @inlinable
  init(owner: Owner, operation: @escaping @Sendable (Owner, Input) async throws -> Output) {
    self.owner = owner
    self.operation = operation
  }

  /// Whether the owner is gone: calls then fail at once and pending invocations are dropped.
  @inlinable
  var isOwnerGone: @Sendable () -> Bool {
    { [self] in owner == nil }
  }

  /// The operation with the owner, held strongly while it runs; `CancellationError` once it is gone.
  @inlinable
  var run: @Sendable (Input) async throws -> Output {
    { [self] input in
      guard let owner else { throw CancellationError() }
      return try await operation(owner, input)
    }
  }
}
