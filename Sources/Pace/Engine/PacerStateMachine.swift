/// What a pacing state machine asks its driver to do after an event.
///
/// The machines behind ``Debouncer``, ``Throttler`` and ``Coalescer`` hold no lock, clock,
/// task or callback: time comes in as a parameter and one of these comes out, so tests can
/// drive a machine directly and compare actions with `==`. The one action shape of the package's
/// pacing machines, for the drivers in other modules too (PaceCombine's subscription).
@usableFromInline
package enum PacerAction<Value> {
  /// Nothing to do.
  case none
  /// Arm the timer for `deadline`; the machine expects ``PacerStateMachine/timerFired(now:)``
  /// then. The machine asks only when no timer is armed, so a burst arms it once, not per call.
  case schedule(at: PaceInstant)
  /// Invoke `perform` with the value now.
  case invoke(Value)
  /// Invoke `perform` with the value now and arm the timer for `deadline`.
  case invokeAndSchedule(Value, at: PaceInstant)
}

extension PacerAction {
  /// The value to invoke `perform` with now, if the action invokes.
  @inlinable package var invocation: Value? {
    switch self {
    case .invoke(let value), .invokeAndSchedule(let value, _): value
    case .none, .schedule: nil
    }
  }

  /// The deadline to arm the timer for, if the action schedules.
  @inlinable package var deadline: PaceInstant? {
    switch self {
    case .schedule(let deadline), .invokeAndSchedule(_, let deadline): deadline
    case .none, .invoke: nil
    }
  }
}

extension PacerAction: Equatable where Value: Equatable {}
extension PacerAction: Sendable where Value: Sendable {}

extension PacerAction: CustomStringConvertible {
  @usableFromInline package var description: String {
    switch self {
    case .none: "none"
    case .schedule(let deadline): "schedule(at: \(deadline))"
    case .invoke(let value): "invoke(\(value))"
    case .invokeAndSchedule(let value, let deadline): "invokeAndSchedule(\(value), at: \(deadline))"
    }
  }
}

/// The pure logic of a pacing primitive, driven by ``Pacer``.
///
/// The driver calls ``timerFired(now:)`` once per ``PacerAction/schedule(at:)`` it was asked
/// for, unless ``cancel()`` said to cancel that timer.
@usableFromInline
protocol PacerStateMachine: Sendable {
  associatedtype Value: Sendable

  /// A call with `value`. `now` is evaluated only if the machine needs the time, so a
  /// throttle in an open window never reads the clock.
  mutating func call(_ value: Value, now: @autoclosure () -> PaceInstant) -> PacerAction<Value>

  /// The armed timer fired at `now`.
  mutating func timerFired(now: PaceInstant) -> PacerAction<Value>

  /// Takes the pending value for an invocation now, if there is one. A machine left with
  /// nothing to invoke drops its timer too (see ``hasTimer``), unless an edge still needs it.
  mutating func flush(now: PaceInstant) -> Value?

  /// Whether the machine expects its armed timer to fire; once `false`, the driver cancels the
  /// timer it holds. A pacer with nothing left to invoke holds no timer, except a throttle's
  /// window after a leading edge, which stops the next call from leading.
  var hasTimer: Bool { get }

  /// Drops what is pending and resets. Returns `true` if the armed timer should be cancelled.
  mutating func cancel() -> Bool

  /// Whether an invocation is waiting.
  var isPending: Bool { get }

  /// When the pending invocation comes if no call arrives meanwhile; `nil` when nothing is
  /// pending. During a burst this is later than the armed timer, which is re-armed only when
  /// it fires, so that a call costs no timer.
  var nextInvocation: PaceInstant? { get }
}

extension Optional {
  /// Returns the wrapped value and leaves `nil` behind.
  @inlinable
  mutating func take() -> Wrapped? {
    defer { self = nil }
    return self
  }
}
