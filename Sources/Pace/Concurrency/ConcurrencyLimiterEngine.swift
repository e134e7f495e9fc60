/// The driver of ``ConcurrencyLimiter`` and ``KeyedConcurrencyLimiter``: a
/// ``ConcurrencyLimiterStateMachine`` per key under one lock, the waiting calls' continuations,
/// and a timer per key with waiting calls, for their maximum wait. It takes the lock, asks the
/// machine, releases the lock, then resumes continuations and arms timers.
final class ConcurrencyLimiterEngine<Key: Hashable & Sendable>: Sendable {
  typealias Machine = ConcurrencyLimiterStateMachine
  private typealias Continuation = UnsafeContinuation<Void, any Error>

  private struct Waiter {
    var continuation: Continuation
    /// Whether a ``TestScheduler`` follows the waiting task (PaceTesting's `settle`).
    var tracked: Bool
  }

  private struct Entry {
    var machine: Machine
    /// The timer for the key's earliest maximum wait, armed as ``TimerSlot`` says.
    var timer = TimerSlot()
    /// Tells this entry's timers from those of an entry the key had before it was forgotten.
    let epoch: UInt64
  }

  private struct State {
    var configuration: Machine.Configuration
    var entries: [Key: Entry] = [:]
    /// The waiting calls' continuations, by the ids the machines queue.
    var continuations: [UInt64: Waiter] = [:]
    var nextID: UInt64 = 0
    var nextEpoch: UInt64 = 0
    var forgottenPermits = 0
    let forgetsIdleKeys: Bool

    /// Runs `event` on `key`'s machine (made if `create`, else skipped when there is none), takes
    /// the continuations it resumes, reserves or disarms the key's timer, and forgets the key
    /// once it is idle.
    mutating func event(_ key: Key, create: Bool, _ event: (inout Machine) -> Machine.Action) -> Effects {
      var effects = Effects()
      // Taken out of the table while it changes, so that the machine's storage is not shared
      // with the table's copy, which would copy it at every change.
      guard var entry = entries.removeValue(forKey: key) ?? makeEntry(create) else { return effects }
      let waitingBefore = entry.machine.waitingCount
      let action = event(&entry.machine)
      effects.waitingChange = entry.machine.waitingCount - waitingBefore
      apply(action, to: &entry, key: key, into: &effects)
      store(entry, for: key)
      return effects
    }

    mutating func makeEntry(_ create: Bool) -> Entry? {
      guard create else { return nil }
      nextEpoch &+= 1
      return Entry(machine: Machine(configuration), epoch: nextEpoch)
    }

    mutating func store(_ entry: Entry, for key: Key) {
      guard forgetsIdleKeys, entry.machine.isIdle else {
        entries[key] = entry
        return
      }
      // Gives back the storage of a table mostly emptied, without reallocating for one key
      // that comes and goes.
      if entries.capacity > 64, entries.count < entries.capacity / 4 {
        var smaller = [Key: Entry](minimumCapacity: entries.count * 2)
        for (key, value) in entries { smaller[key] = value }
        entries = smaller
      }
    }

    mutating func apply(_ action: Machine.Action, to entry: inout Entry, key: Key, into effects: inout Effects) {
      for id in action.admitted {
        if let waiter = continuations.removeValue(forKey: id) { effects.admitted.append(waiter) }
      }
      for refused in action.refused {
        guard let waiter = continuations.removeValue(forKey: refused.id) else { continue }
        switch refused.refusal {
        case .error(let error): effects.refused.append((waiter, error))
        case .cancelled: effects.refused.append((waiter, CancellationError()))
        }
      }
      if let deadline = action.wakeAt {
        guard entry.timer.deadline != deadline else { return }
        let (ticket, superseded) = entry.timer.reserve(at: deadline)
        effects.arms.append((key, entry.epoch, ticket))
        if let superseded { effects.superseded.append(superseded) }
      } else if entry.timer.isArmed, let superseded = entry.timer.disarm() {
        effects.superseded.append(superseded)
      }
    }
  }

  /// What to do once the lock is released.
  private struct Effects {
    var admitted: [Waiter] = []
    var refused: [(waiter: Waiter, error: any Error)] = []
    /// A call refused before it waited: its task was cancelled first.
    var refusedAtOnce: Continuation?
    var arms: [(key: Key, epoch: UInt64, ticket: TimerSlot.Ticket)] = []
    /// Timers replaced or no longer needed, to cancel.
    var superseded: [any PaceCancellable] = []
    /// How many calls started (`+`) or stopped (`-`) waiting: told to a ``TestScheduler``.
    var waitingChange = 0

    mutating func merge(_ other: Effects) {
      admitted += other.admitted
      refused += other.refused
      arms += other.arms
      superseded += other.superseded
      waitingChange += other.waitingChange
    }
  }

  private let state: LockedState<State>
  private let clock: AsyncClock

  /// - Parameter forgetsIdleKeys: Whether a key with nothing in flight and nothing waiting is
  ///   dropped (the keyed limiter), or kept (the single limit, whose one key comes back at once).
  init(configuration: Machine.Configuration, clock: AsyncClock, forgetsIdleKeys: Bool) {
    self.clock = clock
    state = LockedState(State(configuration: configuration, forgetsIdleKeys: forgetsIdleKeys))
  }

  deinit {
    // Waiting calls and permits hold the engine, so only timers can be left.
    let timers = state.withLock { state in state.entries.values.compactMap { $0.timer.installedHandle } }
    for timer in timers { timer.cancel() }
  }

  // MARK: Admission

  /// Admits a call of `priority` for `key` if its class has room now; never waits.
  func tryAcquire(_ key: Key, priority: AdmissionPriority) -> Bool {
    state.withLock { state in
      if state.entries[key] != nil { return state.entries[key]!.machine.tryAcquire(priority: priority) }
      guard var entry = state.makeEntry(true) else { return false }
      guard entry.machine.tryAcquire(priority: priority) else { return false }
      state.entries[key] = entry
      return true
    }
  }

  /// Waits until a call of `priority` for `key` is admitted; queued on the caller's actor before
  /// the first suspension. A call whose task is cancelled is refused, also when the permit came at
  /// the same time: the permit then goes to the next waiting call.
  func acquire(_ key: Key, priority: AdmissionPriority, isolation: isolated (any Actor)?) async throws {
    try Task.checkCancellation()
    if tryAcquire(key, priority: priority) { return }
    let clock = self.clock
    let state = self.state
    let id = state.withLock { state in
      state.nextID &+= 1
      return state.nextID
    }
    // A task that a TestScheduler counts as running (PaceTesting's `settle`) waits here: counted
    // out once queued, and in again by whatever admits or refuses it, before it can run.
    let tracked = clock.testScheduler?.followsCurrentTask ?? false
    try await withTaskCancellationHandler(
      operation: {
        try await withUnsafeThrowingContinuation(isolation: isolation) { (continuation: Continuation) in
          var queued = false
          let effects = state.withLock { state -> Effects in
            guard !Task.isCancelled else { return Effects(refusedAtOnce: continuation) }
            state.continuations[id] = Waiter(continuation: continuation, tracked: tracked)
            let now = clock.now()
            var effects = state.event(key, create: true) { $0.enqueue(id: id, priority: priority, now: now) }
            queued = state.continuations[id] != nil
            // Answered at once: its task was never counted out.
            if !queued {
              for index in effects.admitted.indices { effects.admitted[index].tracked = false }
              for index in effects.refused.indices { effects.refused[index].waiter.tracked = false }
            }
            return effects
          }
          carryOut(effects)
          if tracked, queued { clock.testScheduler?.activityStopped() }
        }
      },
      onCancel: {
        let now = clock.now()
        carryOut(state.withLock { $0.event(key, create: false) { $0.cancel(id: id, now: now) } })
      },
      isolation: isolation
    )
    if Task.isCancelled {
      // Admitted as the task was cancelled: the place goes to the next call, not to the cancelled one.
      releaseSlot(key)
      throw CancellationError()
    }
  }

  /// Gives back a place of `key` taken by `acquire` or `tryAcquire`.
  func releaseSlot(_ key: Key) {
    let now = clock.now()
    carryOut(state.withLock { $0.event(key, create: false) { $0.release(now: now) } })
  }

  /// Releases `permit`'s place, once; `forgotten` when its deinit does it.
  func release(_ permit: LimiterPermit<Key>, forgotten: Bool) {
    let now = clock.now()
    let effects = state.withLock { state -> Effects? in
      guard !permit.isReleased else { return nil }
      permit.isReleased = true
      if forgotten { state.forgottenPermits += 1 }
      return state.event(permit.key, create: false) { $0.release(now: now) }
    }
    if let effects { carryOut(effects) }
  }

  // MARK: Settings and counts

  var maximumInFlight: Int {
    state.withLock { $0.configuration.maximumInFlight }
  }

  /// Sets the limit of every key: a higher one admits waiting calls at once, a lower one admits
  /// none until the calls in flight are below it.
  func setMaximumInFlight(_ maximumInFlight: Int) {
    let now = clock.now()
    let effects = state.withLock { state -> Effects in
      state.configuration.maximumInFlight = maximumInFlight
      var effects = Effects()
      for key in Array(state.entries.keys) {
        effects.merge(state.event(key, create: false) { $0.setMaximumInFlight(maximumInFlight, now: now) })
      }
      return effects
    }
    carryOut(effects)
  }

  var inFlightCount: Int {
    state.withLock { $0.entries.values.reduce(0) { $0 + $1.machine.inFlight } }
  }

  var waitingCount: Int {
    state.withLock { $0.continuations.count }
  }

  func inFlightCount(for key: Key) -> Int {
    state.withLock { $0.entries[key]?.machine.inFlight ?? 0 }
  }

  func waitingCount(for key: Key) -> Int {
    state.withLock { $0.entries[key]?.machine.waitingCount ?? 0 }
  }

  /// The keys held: those with calls in flight or waiting (and, for the single limit, its key).
  var keyCount: Int {
    state.withLock { $0.entries.count }
  }

  /// How many keys the table has room for: for tests that its storage is given back.
  var tableCapacity: Int {
    state.withLock { $0.entries.capacity }
  }

  var forgottenPermitCount: Int {
    state.withLock { $0.forgottenPermits }
  }

  // MARK: Effects

  /// Arms the reserved timer with the lock released, as ``TimerSlot`` says: a scheduler may run
  /// the timer in line.
  private func arm(_ key: Key, epoch: UInt64, _ ticket: TimerSlot.Ticket) {
    TimerSlot.arm(
      ticket, schedule: clock.schedule,
      fire: { [weak self] generation in self?.timerFired(key, epoch: epoch, generation: generation) }
    ) { timer in
      state.withLock { state in
        guard state.entries[key]?.epoch == epoch else { return false }
        return state.entries[key]!.timer.install(timer, for: ticket)
      }
    }
  }

  private func timerFired(_ key: Key, epoch: UInt64, generation: UInt64) {
    let now = clock.now()
    carryOut(
      state.withLock { state -> Effects in
        guard state.entries[key]?.epoch == epoch, state.entries[key]!.timer.fire(generation) else { return Effects() }
        return state.event(key, create: false) { $0.timerFired(now: now) }
      }
    )
  }

  /// Performs the effects with the lock released.
  private func carryOut(_ effects: Effects) {
    for timer in effects.superseded { timer.cancel() }
    for arm in effects.arms { self.arm(arm.key, epoch: arm.epoch, arm.ticket) }
    if let scheduler = clock.testScheduler {
      scheduler.suspendedCallersChanged(by: effects.waitingChange)
      // Each tracked call is counted in before it can run.
      for waiter in effects.admitted where waiter.tracked { scheduler.activityStarted() }
      for refused in effects.refused where refused.waiter.tracked { scheduler.activityStarted() }
    }
    effects.refusedAtOnce?.resume(throwing: CancellationError())
    for refused in effects.refused { refused.waiter.continuation.resume(throwing: refused.error) }
    for waiter in effects.admitted { waiter.continuation.resume() }
  }
}
