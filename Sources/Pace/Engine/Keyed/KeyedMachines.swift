extension DebounceStateMachine: KeyedPacerMachine {
  @inlinable
  static var idleState: DebounceKeyState<Value> { DebounceKeyState() }

  /// Once no timer is armed and nothing is pending, the state still matters until `interval`
  /// after the latest call: a call before then continues the burst (after a `maximumWait`
  /// invocation, say); a call after it leads a new one, exactly as on a fresh debouncer.
  /// Without a leading edge or `maximumWait` it does not: either way the next call waits `interval`
  /// (after a flush, say), so the key is forgotten at once and holds no timer.
  @inlinable
  var idleFrom: PaceInstant? {
    guard armedDeadline == nil, pending == nil else { return nil }
    guard let lastCall, leading || maximumWait != nil else { return PaceInstant(nanoseconds: .min) }
    return lastCall.advanced(byNanoseconds: interval)
  }
}

extension ThrottleStateMachine: KeyedPacerMachine {
  @inlinable
  static var idleState: ThrottleKeyState<Value> { ThrottleKeyState() }

  /// The timer is armed exactly while a window is open.
  @inlinable
  var armedDeadline: PaceInstant? { windowEnd }

  /// A closed window with nothing pending is the state of a fresh throttler.
  @inlinable
  var idleFrom: PaceInstant? {
    windowEnd == nil && pending == nil ? PaceInstant(nanoseconds: .min) : nil
  }
}
