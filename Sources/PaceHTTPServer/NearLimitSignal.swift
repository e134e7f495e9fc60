#if Hummingbird || Vapor
import Metrics
import Pace

/// A key that has used a set share of its quota under one policy of a rate-limit middleware
/// (80 % by default): what the middleware's `onNearLimit` hook receives, before the key is refused.
///
/// ```swift
/// let middleware = RateLimitMiddleware(policies: [perKey]) { signal in
///   // Called outside every lock, on the request's thread: keep it quick (count, enqueue).
///   nearLimitLog.notice("\(signal.policy): a key used \(signal.shareUsed) of its quota")
/// }
/// ```
///
/// A policy signals a key when a request's decision takes the key's used share from below the
/// policy's threshold (``RateLimitPolicy/nearLimitThreshold``) to at or above it, and then not
/// again until a request finds the key's quota whole (nothing used: a new fixed window, a sliding
/// window every permit has left, a full bucket): at most once per key per window, never once per
/// request, even for a key that hovers around the threshold. The share is the permits used of the
/// key's burst (`RateLimit.burst`, a window's permits), read from the decision's `remaining`, so
/// it counts what every instance took from a shared store. Each instance signals on its own.
///
/// Each signal is counted in `pace_http_rate_limit_near_limit_total`, with the dimension `policy`
/// (never the key), whether a hook is set or not.
///
/// Memory: each policy remembers the keys it signalled and has not seen whole again, at most
/// ``maximumRememberedKeys`` (a 64-bit hash each, not the key); beyond, the oldest half is
/// forgotten, and a forgotten key may be signalled again at its next crossing.
public struct NearLimitSignal: Sendable, Hashable, CustomStringConvertible {
  /// The share of a quota used past which a policy signals a key, unless it says another
  /// (``RateLimitPolicy/signallingNearLimit(at:)``): 0.8.
  public static let defaultThreshold = 0.8
  /// How many signalled keys a policy remembers at most.
  public static let maximumRememberedKeys = 10_000

  /// The policy's name.
  public let policy: String
  /// The key the policy counted: as the request sent it, or its digest for a key over
  /// `InputRules.maximumKeyBytes` under ``LongKeyHandling/hash``.
  public let key: String
  /// The share of the key's quota used after the decision: `1 - remaining / burst`, in 0...1.
  public let shareUsed: Double
  /// The permits the key has left.
  public let remaining: Int
  /// The key's limit.
  public let limit: RateLimit

  package init(policy: String, key: String, shareUsed: Double, remaining: Int, limit: RateLimit) {
    self.policy = policy
    self.key = key
    self.shareUsed = shareUsed
    self.remaining = remaining
    self.limit = limit
  }

  public var description: String {
    "NearLimitSignal(policy: \(policy.debugDescription), shareUsed: \(shareUsed), remaining: \(remaining), limit: \(limit))"
  }
}

/// A near-limit threshold, held exactly: in millionths of a quota, so that 0.7 of 10 permits is 7
/// (in binary floating point, 0.7 × 10 is above 7).
package struct NearLimitThreshold: Sendable, Hashable {
  package let millionths: Int64

  package static let `default` = NearLimitThreshold(checked: NearLimitSignal.defaultThreshold)

  /// - Throws: ``RateLimitMiddlewareError/invalidSetting(name:value:rule:)`` for a share outside
  ///   `0 < share ≤ 1` (NaN included), or one below a millionth.
  package init(_ share: Double) throws(RateLimitMiddlewareError) {
    guard share.isFinite, share > 0, share <= 1, (share * 1_000_000).rounded() >= 1 else {
      throw .invalidSetting(
        name: "RateLimitPolicy.nearLimitThreshold", value: "\(share)",
        rule: "must be a share of the quota in 0 < threshold ≤ 1, to a millionth")
    }
    self.init(checked: share)
  }

  private init(checked share: Double) {
    millionths = Int64((share * 1_000_000).rounded())
  }

  package var share: Double { Double(millionths) / 1_000_000 }

  /// Whether `used` permits of `capacity` are at or past the threshold.
  package func isReached(_ used: Int, of capacity: Int) -> Bool {
    guard used > 0 else { return false }
    // In 128 bits: a capacity may be `Int.max`.
    let lhs = Int64(used).multipliedFullWidth(by: 1_000_000)
    let rhs = millionths.multipliedFullWidth(by: Int64(capacity))
    return lhs.high != rhs.high ? lhs.high > rhs.high : lhs.low >= rhs.low
  }
}

extension RateLimitPolicy {
  /// This policy signalling a key once it has used `threshold` of its quota (``NearLimitSignal``):
  /// the middleware counts it and calls its `onNearLimit` hook, once per key per window. Every
  /// policy signals at ``NearLimitSignal/defaultThreshold`` (80 %) unless told otherwise.
  ///
  /// - Parameter threshold: The share of the quota used, in `0 < threshold ≤ 1`: 0.9 signals a key
  ///   with 90 of its 100 permits taken.
  /// - Throws: ``RateLimitMiddlewareError/invalidSetting(name:value:rule:)`` for a threshold
  ///   outside that range.
  public func signallingNearLimit(at threshold: Double) throws(RateLimitMiddlewareError) -> Self {
    var policy = self
    policy.nearLimit = try NearLimitThreshold(threshold)
    return policy
  }

  /// The share of its quota a key has used when this policy signals it (``NearLimitSignal``).
  public var nearLimitThreshold: Double { nearLimit.share }
}

/// One policy's near-limit signals: which decisions signal, the keys it remembers, its counter.
package final class NearLimitTracker: Sendable {
  /// The keys signalled and not seen whole since, as hashes, in two generations: a key is in
  /// either; when the newer is full it becomes the older, and the older is dropped.
  private struct Memory {
    var newer: Set<Int> = []
    var older: Set<Int> = []

    /// Remembers `hash`; false if it was remembered already.
    mutating func remember(_ hash: Int, generation: Int) -> Bool {
      guard !newer.contains(hash), !older.contains(hash) else { return false }
      newer.insert(hash)
      if newer.count >= generation {
        older = newer
        newer = []
      }
      return true
    }

    mutating func forget(_ hash: Int) {
      newer.remove(hash)
      older.remove(hash)
    }
  }

  package let policy: String
  package let threshold: NearLimitThreshold
  private let counter: Counter
  private let memory = LockedState(Memory())
  private let generation: Int

  package init(
    policy: String, threshold: NearLimitThreshold, metricsFactory: any MetricsFactory,
    maximumRememberedKeys: Int = NearLimitSignal.maximumRememberedKeys
  ) {
    self.policy = policy
    self.threshold = threshold
    counter = Counter(
      label: "pace_http_rate_limit_near_limit_total", dimensions: [("policy", policy)], factory: metricsFactory)
    generation = max(1, maximumRememberedKeys / 2)
  }

  /// The signal, if any, of a decision that allowed `cost` permits for `key` under `limit` and
  /// left `remaining`: counted, for the caller to hand to the hook outside every lock.
  package func signal(key: String, limit: RateLimit, cost: Int, remaining: Int) -> NearLimitSignal? {
    let capacity = limit.burst
    // A store may answer anything: clamped to the quota.
    let left = min(max(remaining, 0), capacity)
    let usedAfter = capacity - left
    let usedBefore = max(0, usedAfter - max(cost, 0))
    let crosses = !threshold.isReached(usedBefore, of: capacity) && threshold.isReached(usedAfter, of: capacity)
    let whole = usedBefore == 0
    // Most decisions neither cross nor find the quota whole: no lock.
    guard crosses || whole else { return nil }
    let hash = key.hashValue
    let fires = memory.withLock { memory in
      if whole { memory.forget(hash) }
      return crosses && memory.remember(hash, generation: generation)
    }
    guard fires else { return nil }
    counter.increment()
    return NearLimitSignal(
      policy: policy, key: key, shareUsed: Double(usedAfter) / Double(capacity), remaining: left, limit: limit)
  }
}
#endif
