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
/// limit changes is the limiter's rule: a ``KeyedRateLimiter`` keeps what the key used that still
/// counts, read under the new limit (see ``KeyedRateLimiter/init(limits:clock:)``).
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
      if state.limits.updateValue(limit, forKey: key) != limit { state.version &+= 1 }
    }
  }

  /// Takes `key`'s own limit away: it has the default from its next request.
  ///
  /// - Returns: The limit it had; `nil` if it had none.
  @discardableResult
  public func removeLimit(for key: Key) -> RateLimit? {
    state.withLock { state in
      let removed = state.limits.removeValue(forKey: key)
      if removed != nil { state.version &+= 1 }
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
        state.defaultLimit = limit
        state.version &+= 1
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
        state.limits = checked
        state.version &+= 1
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
