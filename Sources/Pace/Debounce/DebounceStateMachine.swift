/// The logic of ``Debouncer``: lodash's `debounce`, with merged values, as a value type.
///
/// A burst of calls lasts until `interval` has passed since its last call. The first call after a
/// quiet period is the burst's leading edge. A timer is armed only while a value waits for the
/// trailing edge: a leading invocation, a flush or a cancelled call leaves nothing to invoke and
/// no timer, and the time of the last call alone tells whether the next call leads. The burst's trailing edge comes
/// once `interval` has passed with no call; with `maximumWait`, an invocation also comes once
/// `maximumWait` has passed since the previous invocation (or the start of the burst).
///
/// Deadlines are processed when their timer fires. ``TestScheduler/advance(to:)`` fires due
/// timers before the test's next call, so in virtual time a call made exactly at a deadline
/// belongs to what follows the deadline.
///
/// Every deadline is `instant.advanced(byNanoseconds:)`, which saturates at ``PaceInstant/max``, and is
/// tested as `now >= deadline`, never as a duration: so a timer that fires at its deadline always
/// finds it reached. A saturated deadline is final: at the end of the timeline the burst's
/// trailing edge comes and nothing is re-armed at that instant.
///
/// Its storage is `@usableFromInline` and ``call(_:now:)`` `@inlinable` so that ``Pacer``'s hot
/// path specialises in the caller's module; only the machine itself writes the state.
///
/// The machine is its ``DebounceConfiguration`` (shared by every key of a ``KeyedDebouncer``)
/// and its ``DebounceKeyState`` (one per key); the methods below read and write both through
/// the forwarding properties, so their logic is written once for ``Debouncer`` and the keyed one.
@usableFromInline
struct DebounceStateMachine<Value: Sendable>: PacerStateMachine {
  @usableFromInline let configuration: DebounceConfiguration<Value>
  @usableFromInline var state: DebounceKeyState<Value>

  /// In whole nanoseconds.
  @inlinable var interval: Int64 { configuration.interval }
  /// In nanoseconds; `nil` when calls may wait forever; otherwise at least `interval`.
  @inlinable var maximumWait: Int64? { configuration.maximumWait }
  @inlinable var leading: Bool { configuration.leading }
  @inlinable var trailing: Bool { configuration.trailing }
  @inlinable var merge: Merge<Value> { configuration.merge }

  /// The time of the latest call; `nil` before the first call and after ``cancel()``.
  @inlinable var lastCall: PaceInstant? {
    get { state.lastCall }
    set { state.lastCall = newValue }
  }
  /// The time of the latest invocation, or of the start of the burst (lodash's `lastInvokeTime`).
  @inlinable var lastInvoke: PaceInstant {
    get { state.lastInvoke }
    set { state.lastInvoke = newValue }
  }
  /// The merge of the calls since the latest invocation; kept only for the trailing edge.
  @inlinable var pending: Value? {
    get { state.pending }
    set { state.pending = newValue }
    _modify { yield &state.pending }
  }
  /// The deadline of the armed timer; `nil` when no burst is active.
  @inlinable var armedDeadline: PaceInstant? {
    get { state.armedDeadline }
    set { state.armedDeadline = newValue }
  }

  init(interval: Duration, edges: Edges, maximumWait: Duration?, merge: Merge<Value>) {
    self.init(
      configuration: DebounceConfiguration(interval: interval, edges: edges, maximumWait: maximumWait, merge: merge),
      state: DebounceKeyState()
    )
  }

  @inlinable
  init(configuration: DebounceConfiguration<Value>, state: DebounceKeyState<Value>) {
    self.configuration = configuration
    self.state = state
  }

  /// A fresh machine for an initialiser of `type`, whose parameters it checks first.
  static func checked(
    _ type: StaticString, interval: Duration, edges: Edges, maximumWait: Duration?, merge: Merge<Value>
  ) -> Self {
    Self(
      configuration: .checked(type, interval: interval, edges: edges, maximumWait: maximumWait, merge: merge),
      state: DebounceKeyState()
    )
  }

  @inlinable
  var isPending: Bool { pending != nil }

  @inlinable
  mutating func call(_ value: Value, now readNow: @autoclosure () -> PaceInstant) -> PacerAction<Value> {
    // Clocks read outside the driver's lock may arrive slightly out of order: never go back.
    let read = readNow()
    let now = lastCall.map { Swift.max(read, $0) } ?? read
    let isQuietOrOverdue = shouldInvoke(at: now)
    lastCall = now

    if armedDeadline != nil {
      if trailing { pending.merge(value, using: merge) }
      // The timer is late and maximumWait has already passed: invoke now, as lodash does in a
      // tight loop, rather than let the call wait longer than maximumWait.
      if isQuietOrOverdue, maximumWait != nil {
        lastInvoke = now
        if let merged = pending.take() { return .invoke(merged) }
        return .invoke(value)
      }
      return .none
    }

    if isQuietOrOverdue {
      // Leading edge of a new burst. The burst is `lastCall`, not a timer: a timer is armed only
      // for a value the trailing edge will invoke.
      lastInvoke = now
      if leading { return .invoke(value) }
      let deadline = now.advanced(byNanoseconds: interval)
      armedDeadline = deadline
      pending = value
      return .schedule(at: deadline)
    }

    // The burst goes on after a leading invocation, a flush or a maximumWait invocation.
    guard trailing else { return .none }
    pending.merge(value, using: merge)
    let deadline = nextDeadline(lastCall: now)
    armedDeadline = deadline
    return .schedule(at: deadline)
  }

  @inlinable
  mutating func timerFired(now: PaceInstant) -> PacerAction<Value> {
    guard armedDeadline != nil, let lastCall else { return .none }
    armedDeadline = nil
    let now = Swift.max(now, lastCall)
    // Nothing left to invoke (a late timer's call took it): no timer either.
    guard pending != nil else { return .none }
    if shouldInvoke(at: now) {
      // Trailing edge: quiet for `interval`, or `maximumWait` reached.
      guard let merged = pending.take() else { return .none }
      lastInvoke = now
      return .invoke(merged)
    }
    let deadline = nextDeadline(lastCall: lastCall)
    armedDeadline = deadline
    return .schedule(at: deadline)
  }

  /// Takes the pending value and disarms: with nothing left to invoke, the burst needs no
  /// timer (``hasTimer`` turns `false`, and the driver cancels it).
  @inlinable
  mutating func flush(now: PaceInstant) -> Value? {
    guard let merged = pending.take() else { return nil }
    armedDeadline = nil
    lastInvoke = Swift.max(now, lastCall ?? now)
    return merged
  }

  @inlinable
  var nextInvocation: PaceInstant? {
    guard pending != nil, let lastCall else { return nil }
    return nextDeadline(lastCall: lastCall)
  }

  /// Armed exactly while a value waits for the trailing edge.
  @inlinable
  var hasTimer: Bool { armedDeadline != nil }

  @usableFromInline
  mutating func cancel() -> Bool {
    let hadTimer = armedDeadline != nil
    lastCall = nil
    lastInvoke = .zero
    pending = nil
    armedDeadline = nil
    return hadTimer
  }

  /// lodash's `shouldInvoke`: the first call, a call after a quiet `interval`, or `maximumWait`
  /// since the latest invocation.
  ///
  /// Tested against the same saturating deadlines that ``nextDeadline(lastCall:)`` arms, not as
  /// durations: a duration test would never pass at a saturated deadline (or below a
  /// nanosecond), and the timer would be re-armed at the same instant forever.
  @inlinable @inline(__always)  // out of line, it copies the whole machine on every call
  func shouldInvoke(at now: PaceInstant) -> Bool {
    guard let lastCall else { return true }
    if now >= lastCall.advanced(byNanoseconds: interval) { return true }
    if let maximumWait, now >= lastInvoke.advanced(byNanoseconds: maximumWait) { return true }
    return false
  }

  /// When the burst next needs attention: its trailing edge, or `maximumWait` if that comes first.
  @inlinable
  func nextDeadline(lastCall: PaceInstant) -> PaceInstant {
    let quiet = lastCall.advanced(byNanoseconds: interval)
    guard let maximumWait else { return quiet }
    return Swift.min(quiet, lastInvoke.advanced(byNanoseconds: maximumWait))
  }
}

/// What every key of a debouncer shares: its timing, edges and merge.
@usableFromInline
struct DebounceConfiguration<Value: Sendable>: Sendable {
  /// The interval in whole nanoseconds, converted once: `Duration.paceNanoseconds` divides
  /// 128-bit integers, too slow for every call.
  @usableFromInline let interval: Int64
  /// In nanoseconds; `nil` when calls may wait forever; otherwise at least `interval`.
  @usableFromInline let maximumWait: Int64?
  @usableFromInline let leading: Bool
  @usableFromInline let trailing: Bool
  @usableFromInline let merge: Merge<Value>

  init(interval: Duration, edges: Edges, maximumWait: Duration?, merge: Merge<Value>) {
    let interval = interval.paceNanoseconds
    self.interval = interval
    self.maximumWait = maximumWait.map { Swift.max($0.paceNanoseconds, interval) }
    self.leading = edges.contains(.leading)
    self.trailing = edges.contains(.trailing)
    self.merge = merge
  }

  /// The configuration for an initialiser of `type`, whose parameters it checks first.
  static func checked(
    _ type: StaticString, interval: Duration, edges: Edges, maximumWait: Duration?, merge: Merge<Value>
  ) -> Self {
    checkTiming(type, interval: interval, maximumWait: maximumWait, edges: edges)
    return Self(interval: interval, edges: edges, maximumWait: maximumWait, merge: merge)
  }
}

/// What one key of a debouncer remembers between events; fresh, it is the state of a debouncer
/// that was never called.
///
/// Packed: the two optional instants are stored as nanoseconds plus one byte of flags, so that
/// the slot of a `KeyedDebouncer<Int, Int>` key, key included, fits one cache line.
@usableFromInline
struct DebounceKeyState<Value: Sendable>: Sendable {
  @usableFromInline var lastCallNanoseconds: Int64 = 0
  @usableFromInline var armedDeadlineNanoseconds: Int64 = 0
  /// The time of the latest invocation, or of the start of the burst (lodash's `lastInvokeTime`).
  @usableFromInline var lastInvoke = PaceInstant.zero
  /// The merge of the calls since the latest invocation; kept only for the trailing edge.
  @usableFromInline var pending: Value?
  /// Which of `lastCallNanoseconds` and `armedDeadlineNanoseconds` hold a value.
  @usableFromInline var flags: UInt8 = 0

  @inlinable static var hasLastCall: UInt8 { 1 }
  @inlinable static var hasArmedDeadline: UInt8 { 2 }

  @inlinable init() {}

  /// The time of the latest call; `nil` before the first call and after a cancel.
  @inlinable var lastCall: PaceInstant? {
    get { Self.unpack(lastCallNanoseconds, present: flags & Self.hasLastCall != 0) }
    set { Self.pack(newValue, into: &lastCallNanoseconds, flags: &flags, flag: Self.hasLastCall) }
  }

  /// The deadline of the armed timer; `nil` when no burst is active.
  @inlinable var armedDeadline: PaceInstant? {
    get { Self.unpack(armedDeadlineNanoseconds, present: flags & Self.hasArmedDeadline != 0) }
    set { Self.pack(newValue, into: &armedDeadlineNanoseconds, flags: &flags, flag: Self.hasArmedDeadline) }
  }

  @inlinable static func unpack(_ nanoseconds: Int64, present: Bool) -> PaceInstant? {
    present ? PaceInstant(nanoseconds: nanoseconds) : nil
  }

  @inlinable static func pack(_ instant: PaceInstant?, into nanoseconds: inout Int64, flags: inout UInt8, flag: UInt8) {
    if let instant {
      nanoseconds = instant.nanoseconds
      flags |= flag
    } else {
      flags &= ~flag
    }
  }
}
