import Foundation
import Pace

#if canImport(Combine)
import Combine
#else
import OpenCombine
#endif

/// The driver behind `Publishers.Paced`: upstream's subscriber and downstream's
/// subscription at once, in the shape of Pace's `Pacer`.
///
/// It takes the lock, asks the machine what to do, releases the lock, then does it: arms the
/// scheduler's timer, or hands values to downstream. On top of `Pacer` it keeps Combine's demand:
/// - Each invocation that meets demand takes one unit of it and joins the outbox; one deliverer at
///   a time drains the outbox, so downstream's calls never overlap, even when a timer fires while
///   upstream sends.
/// - An invocation that meets no demand is held, and later invocations merge into it with the
///   machine's merge until demand arrives: never more than requested, and `.append` loses nothing.
/// - Upstream's completion flushes the machine first; the completion follows the last value.
final class PacedSubscription<Upstream: Publisher, Downstream: Subscriber>: Subscriber, Subscription,
  TimerTarget, @unchecked Sendable
where Upstream.Output == Downstream.Input, Upstream.Failure == Downstream.Failure, Upstream.Output: Sendable {
  // @unchecked Sendable: every stored property but the immutable `scheduler` is in `state`,
  // read and written only while `lock` is held; downstream is called only by the one deliverer.
  typealias Input = Upstream.Output
  typealias Failure = Upstream.Failure

  private struct State {
    var machine: PacingMachine<Input>
    /// `nil` once cancelled or completed: nothing more reaches downstream.
    var downstream: Downstream?
    var upstream: (any Subscription)?
    /// Demand not yet taken by an invocation.
    var demand = Subscribers.Demand.none
    /// Invocations that have their unit of demand, oldest first.
    var outbox: [Input] = []
    /// The merge of the invocations that met no demand.
    var held: Input?
    /// Upstream's end, delivered once `outbox` and `held` are empty.
    var completion: Subscribers.Completion<Failure>?
    /// Whether a deliverer is draining the outbox.
    var isDelivering = false
    /// The scheduler's timer, armed as Pace's `TimerSlot` says.
    var timer = TimerSlot()
  }

  /// What to do once the lock is released.
  private struct Effects {
    var arm: TimerSlot.Ticket?
    var cancelTimer: (any PaceCancellable)?
    var startDelivery = false
  }

  private let scheduler: any PaceScheduler
  private let lock = NSLock()
  private var state: State

  init(downstream: Downstream, machine: PacingMachine<Input>, scheduler: any PaceScheduler) {
    self.scheduler = scheduler
    self.state = State(machine: machine, downstream: downstream)
  }

  deinit {
    // Released while pending (downstream went away without cancelling): leave nothing scheduled.
    state.timer.disarm()?.cancel()
  }

  private func withLock<Result>(_ body: (inout State) -> Result) -> Result {
    lock.lock()
    defer { lock.unlock() }
    return body(&state)
  }

  // MARK: Upstream

  func receive(subscription: any Subscription) {
    let downstream = withLock { state -> Downstream? in
      guard state.downstream != nil, state.upstream == nil else { return nil }
      state.upstream = subscription
      return state.downstream
    }
    guard let downstream else {
      subscription.cancel()
      return
    }
    downstream.receive(subscription: self)
    // Upstream is read as fast as it produces, so the machine sees upstream's own timing.
    subscription.request(.unlimited)
  }

  func receive(_ input: Input) -> Subscribers.Demand {
    let effects = withLock { state -> Effects in
      guard state.downstream != nil, state.completion == nil else { return Effects() }
      return Self.apply(state.machine.call(input, now: scheduler.now), to: &state)
    }
    carryOut(effects)
    return .none
  }

  func receive(completion: Subscribers.Completion<Failure>) {
    let now = scheduler.now
    let effects = withLock { state -> Effects in
      guard state.downstream != nil, state.completion == nil else { return Effects() }
      var effects = Effects()
      if let pending = state.machine.flush(now: now) {
        effects.startDelivery = Self.invoke(pending, in: &state)
      }
      _ = state.machine.cancel()
      effects.cancelTimer = state.timer.disarm()
      state.upstream = nil
      state.completion = completion
      effects.startDelivery = Self.startDelivery(in: &state) || effects.startDelivery
      return effects
    }
    carryOut(effects)
  }

  // MARK: Downstream

  func request(_ demand: Subscribers.Demand) {
    let effects = withLock { state -> Effects in
      guard state.downstream != nil else { return Effects() }
      var effects = Effects()
      effects.startDelivery = Self.add(demand, to: &state)
      return effects
    }
    carryOut(effects)
  }

  func cancel() {
    let (timer, upstream) = withLock { state -> ((any PaceCancellable)?, (any Subscription)?) in
      state.downstream = nil
      _ = state.machine.cancel()
      state.outbox.removeAll()
      state.held = nil
      return (state.timer.disarm(), state.upstream.take())
    }
    timer?.cancel()
    upstream?.cancel()
  }

  // MARK: Bookkeeping under the lock

  private static func apply(_ action: PacerAction<Input>, to state: inout State) -> Effects {
    var effects = Effects()
    if let value = action.invocation { effects.startDelivery = invoke(value, in: &state) }
    if let deadline = action.deadline { (effects.arm, effects.cancelTimer) = state.timer.reserve(at: deadline) }
    return effects
  }

  /// Returns `true` if the caller must start a deliverer.
  private static func invoke(_ value: Input, in state: inout State) -> Bool {
    if state.held != nil || state.demand == .none {
      state.machine.fold(value, into: &state.held)
      return false
    }
    state.demand -= 1
    state.outbox.append(value)
    return startDelivery(in: &state)
  }

  /// Returns `true` if the caller must start a deliverer.
  private static func add(_ demand: Subscribers.Demand, to state: inout State) -> Bool {
    state.demand += demand
    if state.demand > .none, let held = state.held.take() {
      state.demand -= 1
      state.outbox.append(held)
    }
    return startDelivery(in: &state)
  }

  private static func startDelivery(in state: inout State) -> Bool {
    let hasWork = !state.outbox.isEmpty || (state.completion != nil && state.held == nil)
    guard hasWork, !state.isDelivering else { return false }
    state.isDelivering = true
    return true
  }

  // MARK: Effects, outside the lock

  private func carryOut(_ effects: Effects) {
    effects.cancelTimer?.cancel()
    if let ticket = effects.arm {
      arm(ticket)
    }
    if effects.startDelivery { deliver() }
  }

  private func arm(_ ticket: TimerSlot.Ticket) {
    // Captured as an existential: a closure that captured the generic `self` would capture its
    // metatypes too, which are not `Sendable`.
    let target: any TimerTarget = self
    let generation = ticket.generation
    let timer = scheduler.schedule(at: ticket.deadline) { [weak target] in
      target?.timerFired(generation: generation)
    }
    // A cancel, a completion or a newer timer got in between: this one must never fire.
    if !withLock({ $0.timer.install(timer, for: ticket) }) { timer.cancel() }
  }

  func timerFired(generation: UInt64) {
    let now = scheduler.now
    let effects = withLock { state -> Effects in
      guard state.downstream != nil, state.timer.fire(generation) else { return Effects() }
      return Self.apply(state.machine.timerFired(now: now), to: &state)
    }
    carryOut(effects)
  }

  private enum Delivery {
    case value(Input, Downstream)
    case completion(Subscribers.Completion<Failure>, Downstream)
  }

  /// Drains the outbox, then the completion, one at a time, never holding the lock while
  /// downstream runs; downstream may request more, or cancel, from inside `receive`.
  private func deliver() {
    while let delivery = withLock({ state -> Delivery? in
      if let downstream = state.downstream {
        if !state.outbox.isEmpty {
          return .value(state.outbox.removeFirst(), downstream)
        }
        if state.held == nil, let completion = state.completion {
          state.downstream = nil
          return .completion(completion, downstream)
        }
      }
      state.isDelivering = false
      return nil
    }) {
      switch delivery {
      case .value(let value, let downstream):
        let more = downstream.receive(value)
        if more > .none {
          let effects = withLock { state -> Effects in
            _ = Self.add(more, to: &state)
            return Effects()
          }
          carryOut(effects)
        }
      case .completion(let completion, let downstream):
        downstream.receive(completion: completion)
      }
    }
  }
}

/// What a timer fires into; see `PacedSubscription.arm(at:generation:)`.
protocol TimerTarget: AnyObject, Sendable {
  func timerFired(generation: UInt64)
}

extension Optional {
  /// Returns the wrapped value and leaves `nil` behind.
  fileprivate mutating func take() -> Wrapped? {
    defer { self = nil }
    return self
  }
}
