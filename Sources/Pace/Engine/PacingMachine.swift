/// The debounce, throttle and coalesce state machines, for the integration modules of this package
/// (`PaceCombine`, `PaceSwiftUI`), which drive them with their own effects: a Combine
/// subscription has demand to respect, which ``Pacer`` does not know about.
///
/// `package`, not `public`: it is the seam between Pace's machines and its own glue, not API.
/// The machines stay internal; this only forwards to them and returns their ``PacerAction``.
package struct PacingMachine<Value: Sendable>: Sendable {
  private enum Kind: Sendable {
    case debounce(DebounceStateMachine<Value>)
    case throttle(ThrottleStateMachine<Value>)
    case coalesce(CoalesceStateMachine<Value>)
    /// Only while a machine is out for mutation, so that its pending value is uniquely
    /// referenced and a `.append` merge grows it in place rather than copying it.
    case moved
  }

  private var kind: Kind
  /// How invocations that a consumer could not take yet fold together (see ``fold(_:into:)``).
  package let merge: Merge<Value>

  private init(kind: Kind, merge: Merge<Value>) {
    self.kind = kind
    self.merge = merge
  }

  /// ``Debouncer``'s machine; checks the parameters as its initialiser does, naming `owner`.
  package static func debounce(
    _ owner: StaticString, interval: Duration, edges: Edges, maximumWait: Duration?, merge: Merge<Value>
  ) -> Self {
    let machine = DebounceStateMachine.checked(
      owner, interval: interval, edges: edges, maximumWait: maximumWait, merge: merge)
    return Self(kind: .debounce(machine), merge: merge)
  }

  /// ``Throttler``'s machine; checks the parameters as its initialiser does, naming `owner`.
  package static func throttle(_ owner: StaticString, interval: Duration, edges: Edges, merge: Merge<Value>) -> Self {
    Self(kind: .throttle(.checked(owner, interval: interval, edges: edges, merge: merge)), merge: merge)
  }

  /// ``Coalescer``'s machine; checks the parameters as its initialiser does, naming `owner`.
  package static func coalesce(_ owner: StaticString, window: Duration, merge: Merge<Value>) -> Self {
    Self(kind: .coalesce(.checked(owner, window: window, merge: merge)), merge: merge)
  }

  package mutating func call(_ value: Value, now: PaceInstant) -> PacerAction<Value> {
    send(Call(value: value, now: now))
  }

  /// The timer armed by the latest ``PacerAction/schedule(at:)`` fired.
  package mutating func timerFired(now: PaceInstant) -> PacerAction<Value> {
    send(TimerFired(now: now))
  }

  /// Takes the pending value for an invocation now, if there is one.
  package mutating func flush(now: PaceInstant) -> Value? {
    send(Flush(now: now))
  }

  /// Drops what is pending and resets. Returns `true` if the armed timer should be cancelled.
  package mutating func cancel() -> Bool {
    send(Cancel())
  }

  /// Applies `event` to the machine, taken out of `kind` meanwhile (see `Kind.moved`).
  private mutating func send<Event: PacingEvent<Value>>(_ event: Event) -> Event.Result {
    switch kind {
    case .debounce(var machine):
      kind = .moved
      defer { kind = .debounce(machine) }
      return event.apply(to: &machine)
    case .throttle(var machine):
      kind = .moved
      defer { kind = .throttle(machine) }
      return event.apply(to: &machine)
    case .coalesce(var machine):
      kind = .moved
      defer { kind = .coalesce(machine) }
      return event.apply(to: &machine)
    case .moved:
      preconditionFailure("PacingMachine: reentrant use")
    }
  }

  /// Whether an invocation is waiting.
  package var isPending: Bool {
    switch kind {
    case .debounce(let machine): machine.isPending
    case .throttle(let machine): machine.isPending
    case .coalesce(let machine): machine.isPending
    case .moved: false
    }
  }

  /// Folds `value` into `accumulated` with the machine's merge, as the machine folds calls.
  package func fold(_ value: Value, into accumulated: inout Value?) {
    accumulated.merge(value, using: merge)
  }
}

/// An event of ``PacingMachine``, applied to whichever machine it holds: one generic method, so
/// that the machine is taken out and put back in one place.
private protocol PacingEvent<Value> {
  associatedtype Value: Sendable
  associatedtype Result
  func apply<Machine: PacerStateMachine>(to machine: inout Machine) -> Result where Machine.Value == Value
}

private struct Call<Value: Sendable>: PacingEvent {
  let value: Value
  let now: PaceInstant
  func apply<Machine: PacerStateMachine>(to machine: inout Machine) -> PacerAction<Value>
  where Machine.Value == Value {
    machine.call(value, now: now)
  }
}

private struct TimerFired<Value: Sendable>: PacingEvent {
  let now: PaceInstant
  func apply<Machine: PacerStateMachine>(to machine: inout Machine) -> PacerAction<Value>
  where Machine.Value == Value {
    machine.timerFired(now: now)
  }
}

private struct Flush<Value: Sendable>: PacingEvent {
  let now: PaceInstant
  func apply<Machine: PacerStateMachine>(to machine: inout Machine) -> Value? where Machine.Value == Value {
    machine.flush(now: now)
  }
}

private struct Cancel<Value: Sendable>: PacingEvent {
  func apply<Machine: PacerStateMachine>(to machine: inout Machine) -> Bool where Machine.Value == Value {
    machine.cancel()
  }
}
