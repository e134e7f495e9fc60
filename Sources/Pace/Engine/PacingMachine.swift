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
    checkTiming(owner, interval: interval, maximumWait: maximumWait, edges: edges)
    let machine = DebounceStateMachine(interval: interval, edges: edges, maximumWait: maximumWait, merge: merge)
    return Self(kind: .debounce(machine), merge: merge)
  }

  /// ``Throttler``'s machine; checks the parameters as its initialiser does, naming `owner`.
  package static func throttle(_ owner: StaticString, interval: Duration, edges: Edges, merge: Merge<Value>) -> Self {
    checkTiming(owner, interval: interval, edges: edges)
    return Self(kind: .throttle(ThrottleStateMachine(interval: interval, edges: edges, merge: merge)), merge: merge)
  }

  /// ``Coalescer``'s machine; checks the parameters as its initialiser does, naming `owner`.
  package static func coalesce(_ owner: StaticString, window: Duration, merge: Merge<Value>) -> Self {
    checkTiming(owner, interval: window, parameter: "window")
    return Self(kind: .coalesce(CoalesceStateMachine(window: window, merge: merge)), merge: merge)
  }

  package mutating func call(_ value: Value, now: PaceInstant) -> PacerAction<Value> {
    switch kind {
    case .debounce(var machine):
      kind = .moved
      defer { kind = .debounce(machine) }
      return machine.call(value, now: now)
    case .throttle(var machine):
      kind = .moved
      defer { kind = .throttle(machine) }
      return machine.call(value, now: now)
    case .coalesce(var machine):
      kind = .moved
      defer { kind = .coalesce(machine) }
      return machine.call(value, now: now)
    case .moved:
      preconditionFailure("PacingMachine: reentrant use")
    }
  }

  /// The timer armed by the latest ``PacerAction/schedule(at:)`` fired.
  package mutating func timerFired(now: PaceInstant) -> PacerAction<Value> {
    switch kind {
    case .debounce(var machine):
      kind = .moved
      defer { kind = .debounce(machine) }
      return machine.timerFired(now: now)
    case .throttle(var machine):
      kind = .moved
      defer { kind = .throttle(machine) }
      return machine.timerFired(now: now)
    case .coalesce(var machine):
      kind = .moved
      defer { kind = .coalesce(machine) }
      return machine.timerFired(now: now)
    case .moved:
      preconditionFailure("PacingMachine: reentrant use")
    }
  }

  /// Takes the pending value for an invocation now, if there is one.
  package mutating func flush(now: PaceInstant) -> Value? {
    switch kind {
    case .debounce(var machine):
      kind = .moved
      defer { kind = .debounce(machine) }
      return machine.flush(now: now)
    case .throttle(var machine):
      kind = .moved
      defer { kind = .throttle(machine) }
      return machine.flush(now: now)
    case .coalesce(var machine):
      kind = .moved
      defer { kind = .coalesce(machine) }
      return machine.flush(now: now)
    case .moved:
      preconditionFailure("PacingMachine: reentrant use")
    }
  }

  /// Drops what is pending and resets. Returns `true` if the armed timer should be cancelled.
  package mutating func cancel() -> Bool {
    switch kind {
    case .debounce(var machine):
      kind = .moved
      defer { kind = .debounce(machine) }
      return machine.cancel()
    case .throttle(var machine):
      kind = .moved
      defer { kind = .throttle(machine) }
      return machine.cancel()
    case .coalesce(var machine):
      kind = .moved
      defer { kind = .coalesce(machine) }
      return machine.cancel()
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
