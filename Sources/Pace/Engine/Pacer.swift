/// The thin, locked driver shared by ``Debouncer``, ``Throttler`` and ``Coalescer``.
///
/// It takes the lock, asks the state machine what to do, releases the lock, then does it:
/// arms the scheduler's timer, or hands values to `perform`. Values go through an outbox that
/// one deliverer at a time drains on the scheduler, so invocations of one instance never
/// overlap and arrive in the order the machine produced them, even when `perform` calls the
/// instance again or several threads call at once.
///
/// `call` is the hot path, so it and what it touches are `@inlinable`: a client's
/// `Debouncer<Int>.call` then specialises in the client's module instead of looking up generic
/// metadata on every call. The timer path (arming, firing, delivering) is `@inlinable` too,
/// because every burst ends in it. `flush` and `cancel` stay out of line.
@usableFromInline
final class Pacer<Machine: PacerStateMachine>: Sendable where Machine.Value: Sendable {
  @usableFromInline typealias Value = Machine.Value

  @usableFromInline
  struct State {
    @usableFromInline var machine: Machine
    /// The scheduler's timer, armed as ``TimerSlot`` says.
    @usableFromInline var timer = TimerSlot()
    /// Values waiting for `perform`, oldest first. Its capacity is kept, so steady state does
    /// not allocate.
    @usableFromInline var outbox: [Value] = []
    /// Whether a deliverer is draining the outbox or has been dispatched to.
    @usableFromInline var isDelivering = false
  }

  /// What to do once the lock is released.
  @usableFromInline
  struct Effects {
    @usableFromInline var arm: TimerSlot.Ticket?
    /// The timer `arm` replaces, to cancel.
    @usableFromInline var superseded: (any PaceCancellable)?
    @usableFromInline var startDelivery = false

    @inlinable init() {}

    /// Whether there is nothing to do: the common case of a call inside a burst.
    @inlinable var isEmpty: Bool { arm == nil && !startDelivery }
  }

  @usableFromInline let scheduler: any PaceScheduler
  @usableFromInline let perform: @Sendable (Value) -> Void
  /// Whether the owner of an `owner:` pacer is gone; `nil` for a pacer without an owner.
  @usableFromInline let ownerIsGone: (@Sendable () -> Bool)?
  @usableFromInline let state: LockedState<State>

  init(machine: Machine, scheduler: any PaceScheduler, perform: PacerPerform<Value>) {
    self.scheduler = scheduler
    self.perform = perform.perform
    self.ownerIsGone = perform.ownerIsGone
    var initial = State(machine: machine)
    initial.outbox.reserveCapacity(2)
    self.state = LockedState(initial)
  }

  deinit {
    // Pending work is dropped with the instance; the timer holds it only weakly.
    state.withLock { $0.timer.disarm() }?.cancel()
  }

  @inlinable
  func call(_ value: Value) {
    // Once the owner is gone, its pacer drops what is pending and calls do nothing.
    if let ownerIsGone, ownerIsGone() { return cancel() }
    // The clock is read in place, under the lock and only if the machine asks. Copying the
    // `scheduler` existential out costs two retains and releases per call; capturing `self`
    // costs one on the slow path, since the timers' weak references give `self` a side table.
    // `self` is alive for the whole call, so a guaranteed reference needs neither.
    let this = Unmanaged.passUnretained(self)
    let effects = state.withLock { state in
      Self.apply(
        state.machine.call(value, now: this._withUnsafeGuaranteedRef { $0.scheduler.now }),
        to: &state
      )
    }
    carryOut(effects)
  }

  @usableFromInline func flush() {
    let now = scheduler.now
    let (effects, timer) = state.withLock { state -> (Effects, (any PaceCancellable)?) in
      let effects = Self.apply(state.machine.flush(now: now).map(PacerAction.invoke) ?? .none, to: &state)
      return (effects, Self.disarmIfUnneeded(&state))
    }
    timer?.cancel()
    carryOut(effects)
  }

  /// The timer to cancel once the machine no longer expects it.
  static func disarmIfUnneeded(_ state: inout State) -> (any PaceCancellable)? {
    guard !state.machine.hasTimer, state.timer.isArmed else { return nil }
    return state.timer.disarm()
  }

  @usableFromInline func cancel() {
    let timer = state.withLock { state -> (any PaceCancellable)? in
      _ = state.machine.cancel()
      // Any timer held goes, even one the machine no longer expects.
      return state.timer.disarm()
    }
    timer?.cancel()
  }

  @usableFromInline var isPending: Bool {
    state.withLock { $0.machine.isPending }
  }

  @usableFromInline var nextInvocation: PaceInstant? {
    state.withLock { $0.machine.nextInvocation }
  }

  /// Reads the machine under the lock; for tests and diagnostics.
  func withMachine<Result>(_ body: (Machine) -> Result) -> Result {
    state.withLock { body($0.machine) }
  }

  @inlinable
  func timerFired(generation: UInt64) {
    let now = scheduler.now
    let effects = state.withLock { state -> Effects in
      guard state.timer.fire(generation) else { return Effects() }
      return Self.apply(state.machine.timerFired(now: now), to: &state)
    }
    carryOut(effects)
  }

  /// Turns the machine's action into bookkeeping under the lock and effects for after it.
  @inlinable @inline(__always)
  static func apply(_ action: PacerAction<Value>, to state: inout State) -> Effects {
    var effects = Effects()
    if let value = action.invocation { effects.startDelivery = enqueue(value, in: &state) }
    if let deadline = action.deadline { (effects.arm, effects.superseded) = state.timer.reserve(at: deadline) }
    return effects
  }

  /// Returns `true` if the caller must start a deliverer.
  @inlinable
  static func enqueue(_ value: Value, in state: inout State) -> Bool {
    state.outbox.append(value)
    guard !state.isDelivering else { return false }
    state.isDelivering = true
    return true
  }

  @inlinable
  func carryOut(_ effects: Effects) {
    // Inside a burst there is nothing to do; only then is the out-of-line part skipped.
    if effects.isEmpty { return }
    carryOutSlowly(effects)
  }

  @inlinable
  func carryOutSlowly(_ effects: Effects) {
    effects.superseded?.cancel()
    if let ticket = effects.arm {
      arm(ticket)
    }
    if effects.startDelivery {
      if scheduler.isCurrent {
        deliver()
      } else {
        scheduler.enqueue { [weak self] in self?.deliver() }
      }
    }
  }

  @inlinable
  func arm(_ ticket: TimerSlot.Ticket) {
    let generation = ticket.generation
    let timer = scheduler.schedule(at: ticket.deadline) { [weak self] in
      self?.timerFired(generation: generation)
    }
    // A `cancel()`, a newer timer or the firing got in between: this one must never fire.
    if !state.withLock({ $0.timer.install(timer, for: ticket) }) { timer.cancel() }
  }

  /// Drains the outbox, one value at a time, never holding the lock while `perform` runs.
  @inlinable
  func deliver() {
    while let value = state.withLock({ state -> Value? in
      guard !state.outbox.isEmpty else {
        state.isDelivering = false
        return nil
      }
      return state.outbox.removeFirst()
    }) {
      perform(value)
    }
  }
}
