/// Each key's limit, changed at run time: a default limit, and the limits of the keys that have
/// a plan of their own, set and removed while the limiters that read it run.
///
/// ```swift
/// let plans = RateLimitPlans<String>(default: .fixedWindow(permits: 20, per: .seconds(60)))
/// let limiter = KeyedRateLimiter(plans: plans)
/// try plans.setLimit(.fixedWindow(permits: 200, per: .seconds(60)), for: "pro-customer")
/// plans.removeLimit(for: "pro-customer")   // back to the default at its next request
/// ```
///
/// A limiter made with plans (``KeyedRateLimiter/init(plans:clock:)``,
/// ``StoreBackedRateLimiter/init(plans:clock:store:)``) looks a key's limit up here at each
/// decision, so a change is in force from the key's next request. What a key keeps when its
/// limit changes is the limiter's rule.
///
/// A ``KeyedRateLimiter`` made with plans is told of each change as it is made, and applies it
/// at that instant, to every key it changes (a change of the default: to every key without a
/// limit of its own, and to the keys it sees later):
///
/// - The key keeps what it used that still counts, read under the new limit (see
///   ``KeyedRateLimiter/init(limits:clock:)``): a bucket's permits owed stay owed, a window's
///   grants count in the new window.
/// - Where the new limit looks further back and allows more at once than the old one (a longer
///   window with more permits, a slower token bucket with a larger burst), the part of its
///   look-back that the key's state no longer records (the limiter keeps only what the old limit
///   still counts, and forgets idle keys) is taken as used at the old limit's maximum, at the
///   latest instants that limit allows, whatever the two limits' algorithms: a sliding window of
///   `P` per `W` counts `P` at each of the instants `W`, `2 W`, … before the change; a fixed
///   window `P` at the last instant of each window before the current one; a token bucket one
///   permit each time it could have earned one, beyond what it owes. The new limit counts those
///   that fall in its look-back: a window the ones it covers (a sliding window may group them
///   into fewer, later grants, which counts them a little longer, never beyond the new window
///   after the change); a slower bucket with a larger burst, or a bucket slower than the old
///   window, starts empty and fills at its rate; a bucket as fast as the old window owes for the
///   window's latest grants what its rate has not repaid since. That assumed use stops counting
///   as time passes, as real grants do: a window is exactly the new limit's once the old
///   limit's interval and the new window have passed since the change.
/// - Where the key's limit changed before, the limits it had before the old one count too: each
///   is taken as having let through its maximum over its whole time in force, at the latest
///   instants it allows (a sliding window `P` at the last instant it was in force and every `W`
///   before; a fixed window `P` there and at the last instant of each window before; a token
///   bucket its burst there and one permit each time it could have earned one before), since the
///   key's state no longer records what they let through (a limit with a shorter look-back in
///   between dropped it). A new window counts those that fall in it; a new token bucket replays
///   them, empty after a limit faster than itself. So a key whose limit went up and back down
///   within one look-back is taken to have used the higher limit to its maximum while it had it.
///   The limiter keeps the latest four limits of the default and of each key whose own limit was
///   set or taken away (a key given back the default until the default has changed five times
///   since); the limit before the oldest kept is unknown, and taken as having let through the new
///   limit's maximum at the instant it ended.
/// - A decision, or a request about to wait (`acquire`), that read the key's old limit just
///   before the change, and reaches the key's state after it was applied, reads the limit again,
///   so it never undoes what was assumed. A request already waiting at the change waits from then
///   on under the new limit, with what the change assumed.
///
/// So no change, or series of changes, of limit, window or algorithm, lets a key through more
/// than some limit it had within the new limit's look-back would have allowed over its whole
/// history, with one bound: a bucket that starts empty assumes the key owed at most its whole new
/// burst at the change (a history faster than the new rate for long would owe more, which no
/// state of bounded size could record). A limiter
/// made with a `limits:` closure cannot know when a limit changed, and keeps only what the state
/// records.
///
/// Every limit held here is one ``RateLimit/validated(permits:per:burst:algorithm:)`` accepts, so
/// no limiter ever traps or saturates on a plan changed at run time: ``setLimit(_:for:)`` refuses
/// any other with a ``RateLimitError``. A server whose plans live in a database keeps this mirror
/// of them (`PostgresRateLimitPlans` in PacePostgres does).
public final class RateLimitPlans<Key: Hashable & Sendable>: Sendable {
  private struct State {
    var defaultLimit: RateLimit
    var limits: [Key: RateLimit]
    var version: UInt64 = 0
    /// The limiters made with these plans, told of each change; each answers `false` once it is
    /// gone, and is dropped then.
    var observers: [@Sendable (RateLimitPlanChange<Key>) -> Bool] = []

    /// Tells the observers of `change`, under the plans' lock: a decision that reads the new
    /// limit (under this lock too) comes after every limiter has applied the change.
    mutating func notify(_ change: RateLimitPlanChange<Key>) {
      if observers.isEmpty { return }
      observers.removeAll { !$0(change) }
    }

    /// Tells the observers that `key`'s limit went from `old` to its limit now, if it changed.
    mutating func notifyChange(of key: Key, from old: RateLimit, isDefault oldIsDefault: Bool) {
      let new = limits[key] ?? defaultLimit
      if new != old, !observers.isEmpty {
        notify(
          RateLimitPlanChange(
            key: key, old: old, oldIsDefault: oldIsDefault, new: new, newIsDefault: limits[key] == nil, ownLimits: [:],
            version: version))
      }
    }
  }

  private let state: LockedState<State>

  /// Plans where every key has `defaultLimit` until it is given a limit of its own.
  ///
  /// - Parameters:
  ///   - defaultLimit: The limit of a key with no limit of its own. One that
  ///     ``RateLimit/validated(permits:per:burst:algorithm:)`` accepts.
  ///   - limits: The keys' own limits to start with; each one `validated` accepts.
  public init(default defaultLimit: RateLimit, limits: [Key: RateLimit] = [:]) {
    Self.checkSetting(defaultLimit, "default")
    for limit in limits.values { Self.checkSetting(limit, "limits") }
    state = LockedState(State(defaultLimit: defaultLimit, limits: limits))
  }

  /// The limit of a key with no limit of its own.
  public var defaultLimit: RateLimit { state.withLock { $0.defaultLimit } }

  /// `key`'s limit now: its own, or the default.
  public func limit(for key: Key) -> RateLimit {
    state.withLock { $0.limits[key] ?? $0.defaultLimit }
  }

  /// `key`'s limit now, whether it is the default, and the ``version`` it was read at: one look
  /// under the lock.
  @usableFromInline
  func limitAndIsDefault(for key: Key) -> (limit: RateLimit, isDefault: Bool, version: UInt64) {
    state.withLock { state in
      if let own = state.limits[key] { return (own, false, state.version) }
      return (state.defaultLimit, true, state.version)
    }
  }

  /// Tells `observer` of every change from now on, under the plans' lock, until it answers
  /// `false`; it must not read these plans (their lock is held), and should be quick.
  func observe(_ observer: @escaping @Sendable (RateLimitPlanChange<Key>) -> Bool) {
    state.withLock { $0.observers.append(observer) }
  }

  /// `key`'s own limit; `nil` if it has the default.
  public func ownLimit(for key: Key) -> RateLimit? {
    state.withLock { $0.limits[key] }
  }

  /// Every key that has a limit of its own, with it: a copy, taken at once.
  public var ownLimits: [Key: RateLimit] { state.withLock { $0.limits } }

  /// How many changes have been made: it grows by one at each call that changes something, so a
  /// reader can tell whether anything changed since it last looked.
  public var version: UInt64 { state.withLock { $0.version } }

  /// Gives `key` a limit of its own, in force from its next request.
  ///
  /// - Throws: ``RateLimitError`` if `limit` is one that
  ///   ``RateLimit/validated(permits:per:burst:algorithm:)`` refuses (a token bucket whose
  ///   capacity would not fit 64 bits, an interval beyond ``RateLimit/maximumInterval``); nothing
  ///   changes then.
  public func setLimit(_ limit: RateLimit, for key: Key) throws(RateLimitError) {
    let limit = try Self.validate(limit)
    state.withLock { state in
      let old = state.limits[key]
      if state.limits.updateValue(limit, forKey: key) != limit {
        state.version &+= 1
        state.notifyChange(of: key, from: old ?? state.defaultLimit, isDefault: old == nil)
      }
    }
  }

  /// Takes `key`'s own limit away: it has the default from its next request.
  ///
  /// - Returns: The limit it had; `nil` if it had none.
  @discardableResult
  public func removeLimit(for key: Key) -> RateLimit? {
    state.withLock { state in
      let removed = state.limits.removeValue(forKey: key)
      if let removed {
        state.version &+= 1
        state.notifyChange(of: key, from: removed, isDefault: false)
      }
      return removed
    }
  }

  /// Changes the limit of every key with no limit of its own.
  ///
  /// - Throws: ``RateLimitError`` if ``RateLimit/validated(permits:per:burst:algorithm:)`` refuses
  ///   `limit`; nothing changes then.
  public func setDefaultLimit(_ limit: RateLimit) throws(RateLimitError) {
    let limit = try Self.validate(limit)
    state.withLock { state in
      if state.defaultLimit != limit {
        let old = state.defaultLimit
        state.defaultLimit = limit
        state.version &+= 1
        state.notify(
          RateLimitPlanChange(
            key: nil, old: old, oldIsDefault: true, new: limit, newIsDefault: true, ownLimits: state.limits,
            version: state.version))
      }
    }
  }

  /// Replaces every key's own limit with `limits` at once (a mirror reloading its table), so
  /// that no reader sees half of the old plans and half of the new ones.
  ///
  /// - Throws: ``RateLimitError`` for the first limit that
  ///   ``RateLimit/validated(permits:per:burst:algorithm:)`` refuses; nothing changes then.
  public func replaceLimits(with limits: [Key: RateLimit]) throws(RateLimitError) {
    var checked = [Key: RateLimit](minimumCapacity: limits.count)
    for (key, limit) in limits { checked[key] = try Self.validate(limit) }
    state.withLock { state in
      if state.limits != checked {
        let old = state.limits
        state.limits = checked
        state.version &+= 1
        if !state.observers.isEmpty {
          for key in Set(old.keys).union(checked.keys) {
            state.notifyChange(of: key, from: old[key] ?? state.defaultLimit, isDefault: old[key] == nil)
          }
        }
      }
    }
  }

  /// `limit` as ``RateLimit/validated(permits:per:burst:algorithm:)`` makes it, or its error.
  static func validate(_ limit: RateLimit) throws(RateLimitError) -> RateLimit {
    try RateLimit.validated(
      permits: limit.permits, per: limit.interval, burst: limit.burst, algorithm: limit.algorithm)
  }

  private static func checkSetting(_ limit: RateLimit, _ parameter: String) {
    do {
      _ = try validate(limit)
    } catch {
      preconditionFailure("RateLimitPlans: \(parameter) must be a limit RateLimit.validated accepts (\(error))")
    }
  }
}

/// A change of a ``RateLimitPlans``, as told to the limiters made with them.
struct RateLimitPlanChange<Key: Hashable & Sendable>: Sendable {
  /// The key whose limit changed; `nil` for the default.
  let key: Key?
  /// Its limit until now.
  let old: RateLimit
  /// Whether that limit was the default (always, for a change of the default).
  let oldIsDefault: Bool
  /// Its limit from now on.
  let new: RateLimit
  /// Whether that limit is the default (always, for a change of the default).
  let newIsDefault: Bool
  /// For a change of the default: the keys with limits of their own, which it does not change.
  let ownLimits: [Key: RateLimit]
  /// The plans' ``RateLimitPlans/version`` with the change made: a limit read at an earlier one
  /// was read before it.
  let version: UInt64
}
