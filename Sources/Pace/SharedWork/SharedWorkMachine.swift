/// The logic of ``KeyedSharedWork`` and ``SharedWork`` as a value type: which key has a run in
/// flight, which callers share it, and which finished run's result may still be reused.
///
/// The machine holds no task, continuation, lock or clock: runs and callers are ids, `now` comes
/// in, and a ``SharedWorkAction`` comes out. The driver (``SharedWorkStorage``) keeps the runs'
/// tasks, the callers' continuations and the reusable results by those ids.
///
/// - A call for a key with a run in flight joins it; a call for a key whose last run succeeded
///   less than `reuse` ago reuses its result; any other call starts a new run.
/// - A caller that cancels leaves alone; the run is cancelled when its last caller leaves, and
///   the key is free at once: the next call starts a new run, and the cancelled run's end is
///   ignored.
/// - A result is reusable from the instant the run ends until `reuse` later, exclusive: a call at
///   `end + reuse` starts a new run. Failures are never reused.
@usableFromInline
struct SharedWorkMachine<Key: Hashable> {
  /// What the machine knows of one key.
  @usableFromInline
  enum Entry: Equatable {
    /// A run in flight, and the callers waiting for it.
    case running(run: UInt64, callers: SharedWorkCallers)
    /// A run that succeeded; its result is reusable until `until`, exclusive.
    case finished(run: UInt64, until: PaceInstant)
  }

  /// The keys with a run in flight or a reusable result.
  @usableFromInline var entries: [Key: Entry] = [:]
  /// How long a successful result is reused, in nanoseconds; 0 for never.
  @usableFromInline let reuseNanoseconds: Int64
  @usableFromInline var lastRun: UInt64 = 0
  /// How many entries are `.finished`, and when to sweep the expired ones: once their count has
  /// doubled since the last sweep, so that keys called once leave nothing behind for long and a
  /// sweep costs O(1) per finished run, amortised.
  @usableFromInline var finishedCount = 0
  @usableFromInline var sweepAt = 16

  /// A machine that reuses a successful result for `reuseNanoseconds` (0: never).
  init(reuseNanoseconds: Int64) {
    self.reuseNanoseconds = max(0, reuseNanoseconds)
  }

  /// How many callers wait for `key`'s run.
  @inlinable
  func callerCount(for key: Key) -> Int {
    if case .running(_, let callers) = entries[key] { return callers.count }
    return 0
  }

  /// How many runs are in flight.
  @usableFromInline var runningCount = 0

  /// The run whose result `key`'s caller reuses at `now`, if one is still fresh; nothing changes.
  /// The driver asks this first, so that a reuse costs no suspension.
  @inlinable
  func reusableRun(for key: Key, now: @autoclosure () -> PaceInstant) -> UInt64? {
    guard case .finished(let run, let until) = entries[key], now() < until else { return nil }
    return run
  }

  /// The caller `caller` asks for `key` at `now`: it joins the run in flight, reuses a result
  /// still fresh, or starts a new run.
  @inlinable
  mutating func call(_ key: Key, caller: UInt64, now: @autoclosure () -> PaceInstant) -> SharedWorkAction {
    var forget: [UInt64] = []
    switch entries[key] {
    case .running(let run, var callers):
      entries[key] = nil  // so that the set is uniquely referenced while it grows
      callers.insert(caller)
      entries[key] = .running(run: run, callers: callers)
      return .join(run: run)
    case .finished(let run, let until):
      if now() < until { return .reuse(run: run) }
      finishedCount -= 1
      forget.append(run)
    case nil:
      break
    }
    lastRun &+= 1
    runningCount += 1
    entries[key] = .running(run: lastRun, callers: SharedWorkCallers(caller))
    return .start(run: lastRun, forget: forget)
  }

  /// The caller `caller` of `key` is cancelled: it is refused, and if it was the run's last
  /// caller the run is cancelled and the key freed. Nothing if the caller no longer waits.
  @inlinable
  mutating func cancel(_ key: Key, caller: UInt64) -> SharedWorkAction {
    guard case .running(let run, var callers) = entries[key], callers.contains(caller) else { return .none }
    entries[key] = nil
    callers.remove(caller)
    if callers.isEmpty {
      runningCount -= 1
      return .refuse(caller: caller, run: run, cancelsRun: true)
    }
    entries[key] = .running(run: run, callers: callers)
    return .refuse(caller: caller, run: run, cancelsRun: false)
  }

  /// The run `run` of `key` ended at `now`: its callers get its result, which is kept for reuse
  /// if it succeeded and reuse is on. Nothing if the run was cancelled (it is no longer `key`'s).
  @inlinable
  mutating func finished(
    _ key: Key, run: UInt64, succeeded: Bool, now readNow: @autoclosure () -> PaceInstant
  ) -> SharedWorkAction {
    guard case .running(run, let callers) = entries[key] else { return .none }
    runningCount -= 1
    // The clock is read only where reuse is on: without it, a run needs no time at all.
    let now = reuseNanoseconds > 0 && succeeded ? readNow() : .zero
    let until = now.advanced(byNanoseconds: reuseNanoseconds)
    let keep = succeeded && reuseNanoseconds > 0 && now < until
    var forget: [UInt64] = []
    if keep {
      entries[key] = .finished(run: run, until: until)
      finishedCount += 1
      if finishedCount >= sweepAt { forget = sweep(now: now) }
    } else {
      entries[key] = nil
    }
    return .deliver(run: run, to: callers, keep: keep, forget: forget)
  }

  /// Removes the finished entries no longer reusable at `now`; returns their runs.
  @usableFromInline
  mutating func sweep(now: PaceInstant) -> [UInt64] {
    var expired: [UInt64] = []
    entries = entries.filter { _, entry in
      guard case .finished(let run, let until) = entry, until <= now else { return true }
      expired.append(run)
      return false
    }
    finishedCount -= expired.count
    sweepAt = max(16, finishedCount * 2)
    return expired.sorted()
  }
}

/// What a ``SharedWorkMachine`` asks its driver to do.
@usableFromInline
enum SharedWorkAction: Equatable {
  /// Start the run `run` for the caller, and drop the kept results of the runs in `forget`.
  case start(run: UInt64, forget: [UInt64])
  /// The caller waits for the run `run` in flight.
  case join(run: UInt64)
  /// The caller gets the kept result of the run `run` at once.
  case reuse(run: UInt64)
  /// Resume `caller`, who waited for `run`, with `CancellationError`; cancel `run` if
  /// `cancelsRun` (the caller was its last).
  case refuse(caller: UInt64, run: UInt64, cancelsRun: Bool)
  /// Resume the callers `to` with the result of `run`; keep that result for reuse if `keep`;
  /// drop the kept results of the runs in `forget`.
  case deliver(run: UInt64, to: SharedWorkCallers, keep: Bool, forget: [UInt64])
  /// Nothing to do.
  case none
}

/// The callers of one run: the first kept inline and the others in a set, which exists only once
/// a second caller joins, so that a run with one caller (the common case) allocates nothing for
/// its callers. Equal when they hold the same callers.
@usableFromInline
struct SharedWorkCallers: Equatable, ExpressibleByArrayLiteral {
  /// The first caller still waiting; `nil` once it left (the others may still wait).
  @usableFromInline var first: UInt64?
  @usableFromInline var others: Set<UInt64> = []

  @inlinable
  init(_ caller: UInt64) {
    first = caller
  }

  @usableFromInline init(arrayLiteral callers: UInt64...) {
    for caller in callers { insert(caller) }
  }

  @inlinable
  var count: Int { (first == nil ? 0 : 1) + others.count }

  @inlinable
  var isEmpty: Bool { first == nil && others.isEmpty }

  @inlinable
  func contains(_ caller: UInt64) -> Bool { first == caller || others.contains(caller) }

  @inlinable
  mutating func insert(_ caller: UInt64) {
    if first == nil, others.isEmpty {
      first = caller
    } else if first != caller {
      others.insert(caller)
    }
  }

  @inlinable
  mutating func remove(_ caller: UInt64) {
    if first == caller { first = nil } else { others.remove(caller) }
  }

  /// The callers in the order they came (their ids rise).
  @inlinable
  var sorted: [UInt64] { ((first.map { [$0] } ?? []) + others).sorted() }

  @inlinable
  static func == (left: Self, right: Self) -> Bool { left.sorted == right.sorted }
}
