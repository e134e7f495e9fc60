/// The logic of ``Throttler``: a steady cadence of windows, as a value type.
///
/// The first call after a quiet period opens a window of `interval` (and invokes at once with
/// the leading edge). When the window ends, if calls came in during it and the trailing edge is
/// set, it invokes with their merge and the next window opens at once; otherwise the throttle
/// goes quiet. While calls keep coming, invocations are exactly `interval` apart.
///
/// A call during an open window needs no time, so the driver does not read the clock for it.
/// The window ends when its timer fires. Window ends saturate at ``PaceInstant/max``; a window
/// that could only end at an instant that has already come is not opened, so a throttle at the
/// end of the timeline invokes and goes quiet.
///
/// Its storage is `@usableFromInline` and ``call(_:now:)`` `@inlinable` so that ``Pacer``'s hot
/// path specialises in the caller's module; only the machine itself writes the state.
///
/// The machine is its ``ThrottleConfiguration`` (shared by every key of a ``KeyedThrottler``)
/// and its ``ThrottleKeyState`` (one per key), read and written through forwarding properties.
@usableFromInline
struct ThrottleStateMachine<Value: Sendable>: PacerStateMachine {
  @usableFromInline let configuration: ThrottleConfiguration<Value>
  @usableFromInline var state: ThrottleKeyState<Value>

  @inlinable var interval: Duration { configuration.interval }
  @inlinable var leading: Bool { configuration.leading }
  @inlinable var trailing: Bool { configuration.trailing }
  @inlinable var merge: Merge<Value> { configuration.merge }

  /// The end of the open window; `nil` when quiet. The timer is armed exactly while a window
  /// is open, for this instant.
  @inlinable var windowEnd: PaceInstant? {
    get { state.windowEnd }
    set { state.windowEnd = newValue }
  }
  /// The merge of the calls made in the open window since its last invocation.
  @inlinable var pending: Value? {
    get { state.pending }
    set { state.pending = newValue }
    _modify { yield &state.pending }
  }

  init(interval: Duration, edges: Edges, merge: Merge<Value>) {
    self.init(
      configuration: ThrottleConfiguration(interval: interval, edges: edges, merge: merge),
      state: ThrottleKeyState()
    )
  }

  @inlinable
  init(configuration: ThrottleConfiguration<Value>, state: ThrottleKeyState<Value>) {
    self.configuration = configuration
    self.state = state
  }

  /// A fresh machine for an initialiser of `type`, whose parameters it checks first.
  static func checked(_ type: StaticString, interval: Duration, edges: Edges, merge: Merge<Value>) -> Self {
    Self(configuration: .checked(type, interval: interval, edges: edges, merge: merge), state: ThrottleKeyState())
  }

  @inlinable
  var isPending: Bool { pending != nil }

  @inlinable
  mutating func call(_ value: Value, now: @autoclosure () -> PaceInstant) -> PacerAction<Value> {
    if windowEnd != nil {
      if trailing { pending.merge(value, using: merge) }
      return .none
    }
    let end = now().advanced(by: interval)
    windowEnd = end
    if leading { return .invokeAndSchedule(value, at: end) }
    pending = value
    return .schedule(at: end)
  }

  @inlinable
  mutating func timerFired(now: PaceInstant) -> PacerAction<Value> {
    guard let end = windowEnd else { return .none }
    guard let merged = pending.take() else {
      windowEnd = nil
      return .none
    }
    // The next window starts where this one ended, so the cadence does not drift with timer
    // latency; a timer late by a whole window or more restarts the cadence from now.
    var next = end.advanced(by: interval)
    if next <= now { next = now.advanced(by: interval) }
    // A window that would end no later than now (a zero interval, or saturated at the end of
    // the timeline) holds no call: invoke and go quiet rather than re-arm at an instant that has
    // already come.
    guard next > now else {
      windowEnd = nil
      return .invoke(merged)
    }
    windowEnd = next
    return .invokeAndSchedule(merged, at: next)
  }

  /// Takes the pending value. With the leading edge the window stays open, and its timer with
  /// it: a call before the window ends must not lead. Without it, nothing is left to invoke, and
  /// the window closes: the next call opens a new one.
  @inlinable
  mutating func flush(now: PaceInstant) -> Value? {
    guard let merged = pending.take() else { return nil }
    if !leading { windowEnd = nil }
    return merged
  }

  @inlinable
  var nextInvocation: PaceInstant? { pending == nil ? nil : windowEnd }

  /// Armed exactly while a window is open.
  @inlinable
  var hasTimer: Bool { windowEnd != nil }

  @usableFromInline
  mutating func cancel() -> Bool {
    let hadWindow = windowEnd != nil
    windowEnd = nil
    pending = nil
    return hadWindow
  }
}

/// What every key of a throttler shares: its window, edges and merge.
@usableFromInline
struct ThrottleConfiguration<Value: Sendable>: Sendable {
  @usableFromInline let interval: Duration
  @usableFromInline let leading: Bool
  @usableFromInline let trailing: Bool
  @usableFromInline let merge: Merge<Value>

  init(interval: Duration, edges: Edges, merge: Merge<Value>) {
    self.interval = interval
    self.leading = edges.contains(.leading)
    self.trailing = edges.contains(.trailing)
    self.merge = merge
  }

  /// The configuration for an initialiser of `type`, whose parameters it checks first.
  static func checked(_ type: StaticString, interval: Duration, edges: Edges, merge: Merge<Value>) -> Self {
    checkTiming(type, interval: interval, edges: edges)
    return Self(interval: interval, edges: edges, merge: merge)
  }
}

/// What one key of a throttler remembers between events; fresh, it is a quiet throttler.
@usableFromInline
struct ThrottleKeyState<Value: Sendable>: Sendable {
  /// The end of the open window; `nil` when quiet.
  @usableFromInline var windowEnd: PaceInstant?
  /// The merge of the calls made in the open window since its last invocation.
  @usableFromInline var pending: Value?

  @inlinable init() {}
}
