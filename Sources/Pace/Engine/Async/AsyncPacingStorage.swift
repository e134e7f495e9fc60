/// The engine behind ``AsyncDebouncedSequence`` and ``AsyncThrottledSequence``.
///
/// One task reads the base sequence and feeds each element to the same pacing state machine that
/// drives ``Debouncer`` or ``Throttler``, with the time read from the clock. The machine's
/// invocations become outputs: handed to the consumer if it waits in `next()`, queued otherwise.
/// Timers are armed on the clock and fire into the same machine.
///
/// Upstream is read as fast as it produces, whatever the consumer's pace, so the machine sees the
/// base sequence's own timing. The output queue cannot grow faster than two elements per
/// `interval` (a leading and a trailing invocation); with a zero interval it can hold as many
/// elements as a slow consumer leaves behind.
///
/// Everything happens under one lock: machine, queue, consumer, timer. Continuations are resumed,
/// timers armed and tasks cancelled only after the lock is released.
///
/// The path each element takes (`readUpstream`, `receive`, `perform`, `deliver`) and the
/// consumer's `next()` that starts it are `@inlinable`, so a client's operator is specialised for
/// its element type and machine: no generic metadata lookups per element.
@usableFromInline
final class AsyncPacingStorage<Base: AsyncSequence & Sendable, Machine: PacerStateMachine>: Sendable
where Base.Element == Machine.Value {
  @usableFromInline typealias Element = Base.Element
  @usableFromInline typealias Consumer = UnsafeContinuation<Result<Element?, any Error>, Never>

  @usableFromInline
  enum Phase {
    /// No `next()` yet: upstream is not read.
    case idle
    /// The upstream task reads the base sequence.
    case running
    /// The base sequence ended, finished (`nil`) or failed; queued outputs come first.
    case upstreamEnded((any Error)?)
    /// Nothing more: the end was delivered, or the consumer was cancelled or went away.
    case done
  }

  @usableFromInline
  struct State: ~Copyable {
    @usableFromInline var phase = Phase.idle
    @usableFromInline var machine: Machine
    @usableFromInline var outputs = RingBuffer<Element>()
    /// The consumer suspended in `next()`; only while `outputs` is empty.
    @usableFromInline var consumer: Consumer?
    @usableFromInline var upstreamTask: Task<Void, Never>?
    /// The clock's timer, armed as ``TimerSlot`` says.
    @usableFromInline var timer = TimerSlot()

    @usableFromInline
    init(machine: Machine) {
      self.machine = machine
    }
  }

  /// What to do once the lock is released.
  @usableFromInline
  struct Effects {
    @usableFromInline var handOff: (Consumer, Element)?
    @usableFromInline var arm: TimerSlot.Ticket?
    @usableFromInline var superseded: (any PaceCancellable)?

    @inlinable init() {}
  }

  /// What a poll of the queue found.
  @usableFromInline
  enum Poll {
    case element(Element)
    /// The sequence ended: `nil` when it finished, or the base sequence's error.
    case end((any Error)?)
    /// Nothing yet.
    case empty
  }

  @usableFromInline let base: Base
  @usableFromInline let clock: AsyncClock
  @usableFromInline let state: LockedState<State>

  @usableFromInline
  init(base: Base, machine: Machine, clock: AsyncClock) {
    self.base = base
    self.clock = clock
    self.state = LockedState(State(machine: machine))
  }

  // MARK: Consumer

  @inlinable
  func next() async -> Result<Element?, any Error> {
    if !Task.isCancelled {
      switch poll() {
      case .element(let element): return .success(element)
      case .end(let error): return error.map { .failure($0) } ?? .success(nil)
      case .empty: break
      }
    }
    return await withTaskCancellationHandler {
      await withUnsafeContinuation { (consumer: Consumer) in
        let immediate = state.withLock { state -> Result<Element?, any Error>? in
          switch take(from: &state) {
          case .element(let element): return .success(element)
          case .end(let error): return error.map { .failure($0) } ?? .success(nil)
          case .empty:
            state.consumer = consumer
            return nil
          }
        }
        if let immediate { consumer.resume(returning: immediate) }
      }
    } onCancel: {
      cancel()
    }
  }

  /// Takes the next output if there is one, without suspending; starts reading upstream on the
  /// first call. `next()` is this, then a suspension when the queue is empty.
  @inlinable
  func poll() -> Poll {
    state.withLock { take(from: &$0) }
  }

  @inlinable
  func take(from state: inout State) -> Poll {
    if let element = state.outputs.popFirst() { return .element(element) }
    switch state.phase {
    case .idle:
      state.phase = .running
      // Creating a task runs none of its code here, so it is safe under the lock.
      state.upstreamTask = Task { await self.readUpstream() }
      return .empty
    case .running:
      return .empty
    case .upstreamEnded(let error):
      state.phase = .done
      return .end(error)
    case .done:
      return .end(nil)
    }
  }

  /// Ends everything: the consumer gets `nil`, queued outputs are dropped, the upstream task and
  /// the timer are cancelled. Called when the consumer's task is cancelled or the iterator is
  /// released.
  @usableFromInline
  func cancel() {
    let (consumer, timer, upstream) = state.withLock { state in
      state.phase = .done
      state.outputs.removeAll()
      _ = state.machine.cancel()
      return (state.consumer.take(), state.timer.disarm(), state.upstreamTask.take())
    }
    timer?.cancel()
    upstream?.cancel()
    consumer?.resume(returning: .success(nil))
  }

  // MARK: Upstream

  @inlinable
  func readUpstream() async {
    var iterator = base.makeAsyncIterator()
    do {
      while let element = try await iterator.next() {
        guard receive(element) else { return }
      }
      upstreamEnded(nil)
    } catch {
      upstreamEnded(error)
    }
  }

  /// Feeds `element` to the machine; returns `false` once nothing more is wanted.
  @inlinable
  func receive(_ element: Element) -> Bool {
    var wanted = true
    let effects = state.withLock { state -> Effects in
      guard case .running = state.phase else {
        wanted = false
        return Effects()
      }
      let clock = self.clock
      return perform(state.machine.call(element, now: clock.now()), in: &state)
    }
    carryOut(effects)
    return wanted
  }

  /// A pending value is delivered, then the end: finished or failed alike, no value that the
  /// base sequence produced is lost.
  @usableFromInline
  func upstreamEnded(_ error: (any Error)?) {
    let (handOff, end, timer) = state.withLock { state -> ((Consumer, Element)?, Consumer?, (any PaceCancellable)?) in
      guard case .running = state.phase else { return (nil, nil, nil) }
      state.upstreamTask = nil
      var handOff: (Consumer, Element)?
      if let pending = state.machine.flush(now: clock.now()) {
        handOff = deliver(pending, in: &state)
      }
      _ = state.machine.cancel()
      let timer = state.timer.disarm()
      if let consumer = state.consumer.take() {
        state.phase = .done
        return (handOff, consumer, timer)
      }
      state.phase = .upstreamEnded(error)
      return (handOff, nil, timer)
    }
    timer?.cancel()
    if let (consumer, output) = handOff { consumer.resume(returning: .success(output)) }
    end?.resume(returning: error.map { .failure($0) } ?? .success(nil))
  }

  // MARK: Timer

  @usableFromInline
  func timerFired(generation: UInt64) {
    let effects = state.withLock { state -> Effects in
      guard case .running = state.phase, state.timer.fire(generation) else { return Effects() }
      return perform(state.machine.timerFired(now: clock.now()), in: &state)
    }
    carryOut(effects)
  }

  // MARK: Actions

  /// Applies the machine's action under the lock; returns what to do once it is released.
  @inlinable
  func perform(_ action: PacerAction<Element>, in state: inout State) -> Effects {
    var effects = Effects()
    if let value = action.invocation { effects.handOff = deliver(value, in: &state) }
    if let deadline = action.deadline { (effects.arm, effects.superseded) = state.timer.reserve(at: deadline) }
    return effects
  }

  /// Once the lock is released: arms the timer, then resumes the consumer.
  @inlinable
  func carryOut(_ effects: Effects) {
    effects.superseded?.cancel()
    if let ticket = effects.arm { arm(ticket) }
    if let (consumer, output) = effects.handOff { consumer.resume(returning: .success(output)) }
  }

  @inlinable
  func deliver(_ value: Element, in state: inout State) -> (Consumer, Element)? {
    if let consumer = state.consumer.take() { return (consumer, value) }
    state.outputs.append(value)
    return nil
  }

  @usableFromInline
  func arm(_ ticket: TimerSlot.Ticket) {
    TimerSlot.arm(ticket, schedule: clock.schedule, fire: { [weak self] in self?.timerFired(generation: $0) }) {
      timer in state.withLock { $0.timer.install(timer, for: ticket) }
    }
  }

  // MARK: Testing

  /// The tasks this storage has running now (reading upstream, timers that are tasks), so a test
  /// can await their end.
  var tasksForTesting: [Task<Void, Never>] {
    state.withLock { state in
      [state.upstreamTask, state.timer.installedHandle as? Task<Void, Never>].compactMap { $0 }
    }
  }
}

/// Ends the storage's work when the iterator that owns it is released.
///
/// The upstream task holds the storage, so the storage's own `deinit` cannot tell when the
/// consumer is gone; this object is owned by the iterator alone.
@usableFromInline
final class AsyncPacingIteratorHandle<Base: AsyncSequence & Sendable, Machine: PacerStateMachine>: Sendable
where Base.Element == Machine.Value {
  @usableFromInline let storage: AsyncPacingStorage<Base, Machine>

  @usableFromInline
  init(_ storage: AsyncPacingStorage<Base, Machine>) {
    self.storage = storage
  }

  deinit {
    storage.cancel()
  }
}
