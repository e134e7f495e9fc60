/// Keys refused until an instant of wall-clock time, set at run time: an abusive API key blocked
/// for an hour, say, whatever its limit.
///
/// ```swift
/// let blocks = RateLimitBlocks<String>()
/// blocks.block("abuser", for: .seconds(3600))
/// if let end = blocks.blockedUntil(for: apiKey) {
///   // refuse the request, and say until when
/// }
/// blocks.unblock("abuser")
/// ```
///
/// A block ends exactly at its instant: a key blocked until `t` is blocked at every instant
/// before `t` and free from `t` on. The ends are instants of wall-clock time (``UnixTime``), which
/// every instance of a server reads alike, so a block shared through a database
/// (`PostgresRateLimitPlans` in PacePostgres keeps this mirror of one) ends at the same instant
/// everywhere, within the instances' clocks' difference.
///
/// Memory: an ended block is forgotten when it is next read, and every write that finds twice as
/// many blocks as it kept after its last sweep sweeps away all the ended ones, so the blocks held
/// are never more than twice those in force, plus a few.
public final class RateLimitBlocks<Key: Hashable & Sendable>: Sendable {
  private struct State {
    var ends: [Key: UnixTime] = [:]
    /// How many blocks the last sweep kept: the next sweep is due at twice as many.
    var keptAtLastSweep = 0
    var version: UInt64 = 0

    /// Forgets every block ended at `now` once the table has doubled since the last sweep.
    mutating func sweepIfDue(now: UnixTime) {
      guard ends.count >= Swift.max(2 * keptAtLastSweep, RateLimitBlocks.sweepThreshold) else { return }
      ends = ends.filter { $0.value > now }
      keptAtLastSweep = ends.count
    }
  }

  /// Below this many blocks, a write does not sweep.
  static var sweepThreshold: Int { 16 }

  private let state = LockedState(State())
  private let unixTime: @Sendable () -> UnixTime

  /// No key blocked yet.
  ///
  /// - Parameter unixTime: The wall clock the calls without a `now:` read; the system's
  ///   (``UnixTime/now``) by default. A test passes one it moves itself.
  public init(unixTime: (@Sendable () -> UnixTime)? = nil) {
    self.unixTime = unixTime ?? { UnixTime.now }
  }

  /// Refuses `key` until `end`; replaces any block it had. A block whose end has passed blocks
  /// nothing.
  public func block(_ key: Key, until end: UnixTime) {
    let now = unixTime()
    state.withLock { state in
      if state.ends.updateValue(end, forKey: key) != end { state.version &+= 1 }
      state.sweepIfDue(now: now)
    }
  }

  /// Refuses `key` for `duration` from now on the wall clock; replaces any block it had.
  public func block(_ key: Key, for duration: Duration) {
    block(key, until: unixTime() + duration)
  }

  /// Lifts `key`'s block, if it has one.
  ///
  /// - Returns: When the block would have ended; `nil` if `key` was not blocked.
  @discardableResult
  public func unblock(_ key: Key) -> UnixTime? {
    let now = unixTime()
    return state.withLock { state in
      guard let end = state.ends.removeValue(forKey: key) else { return nil }
      state.version &+= 1
      return end > now ? end : nil
    }
  }

  /// When `key`'s block ends, if it is blocked now on the wall clock; `nil` if it is not.
  public func blockedUntil(for key: Key) -> UnixTime? {
    blockedUntil(for: key, now: unixTime())
  }

  /// When `key`'s block ends, if it is blocked at `now`; `nil` if it is not (a block ending at
  /// `now` has ended).
  public func blockedUntil(for key: Key, now: UnixTime) -> UnixTime? {
    state.withLock { state in
      guard let end = state.ends[key] else { return nil }
      if end > now { return end }
      // Ended: forgotten now (the version says what was set, not what is read, so stays).
      state.ends.removeValue(forKey: key)
      return nil
    }
  }

  /// Every block in force at `now` (the wall clock's by default): a copy, taken at once.
  public func blocks(now: UnixTime? = nil) -> [Key: UnixTime] {
    let now = now ?? unixTime()
    return state.withLock { state in state.ends.filter { $0.value > now } }
  }

  /// How many changes have been made: it grows by one at each call that sets or lifts a block,
  /// so a reader can tell whether anything changed since it last looked.
  public var version: UInt64 { state.withLock { $0.version } }

  /// How many blocks are held, ended ones not yet forgotten included: at most twice those in
  /// force, plus a few.
  public var heldCount: Int { state.withLock { $0.ends.count } }

  /// Replaces every block with `ends` at once (a mirror reloading its table); those already
  /// ended are left out.
  public func replaceBlocks(with ends: [Key: UnixTime]) {
    let now = unixTime()
    let live = ends.filter { $0.value > now }
    state.withLock { state in
      if state.ends != live {
        state.ends = live
        state.version &+= 1
      }
      state.keptAtLastSweep = live.count
    }
  }
}
