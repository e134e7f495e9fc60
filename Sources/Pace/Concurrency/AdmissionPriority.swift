/// How important a call is to a ``ConcurrencyLimiter`` or a ``KeyedConcurrencyLimiter``: the
/// higher classes are admitted first, may fill more of the limit (``PriorityShares``), and are
/// refused last.
///
/// Ordered from the lowest to the highest: `sheddable < default < critical`.
public enum AdmissionPriority: Int, Sendable, Hashable, Comparable, CaseIterable, CustomStringConvertible {
  /// Work that may be dropped first under overload: prefetches, analytics, retries of
  /// background jobs.
  case sheddable = 0
  /// Ordinary work: what a call is unless it says otherwise.
  case `default` = 1
  /// Work that must go through while anything does: health checks, payments, logins.
  case critical = 2

  /// Whether `lhs` is a lower class than `rhs`: `sheddable < default < critical`.
  public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

  /// The class's name, as written in code: `critical`, `default` or `sheddable`.
  public var description: String {
    switch self {
    case .sheddable: "sheddable"
    case .default: "default"
    case .critical: "critical"
    }
  }
}

/// How much of a concurrency limit each ``AdmissionPriority`` may fill, in percent of
/// `maximumInFlight`, so that the rest stays reserved for the higher classes.
///
/// A call of a class is admitted only while the calls in flight, of every class, are fewer than
/// its class's share of the limit, rounded down: with `maximumInFlight` 10 and
/// `PriorityShares(defaultPercent: 80, sheddablePercent: 50)`, a sheddable call is admitted while
/// fewer than 5 calls are in flight, a default one while fewer than 8 are, and a critical one while
/// fewer than 10 are. The critical class always has the whole limit.
///
/// A share rounds down, so a small limit may leave a class no room at all (50 % of 1 is 0): such a
/// class's calls wait, and are refused by the queue's bound or its maximum wait.
public struct PriorityShares: Sendable, Hashable {
  /// The share of the limit the `default` class may fill, in percent: 0 through 100.
  public let defaultPercent: Int
  /// The share of the limit the `sheddable` class may fill, in percent: 0 through `defaultPercent`.
  public let sheddablePercent: Int

  /// Every class may fill the whole limit: the classes only order the queue and its refusals.
  public static let unreserved = PriorityShares(defaultPercent: 100, sheddablePercent: 100)

  /// Shares of the limit for the two lower classes; the critical class has all of it.
  ///
  /// - Parameters:
  ///   - defaultPercent: The share the `default` class may fill: 0 through 100.
  ///   - sheddablePercent: The share the `sheddable` class may fill: 0 through `defaultPercent`.
  public init(defaultPercent: Int, sheddablePercent: Int) {
    precondition(
      (0...100).contains(defaultPercent),
      "PriorityShares: defaultPercent must be 0 through 100 (got \(defaultPercent))")
    precondition(
      (0...defaultPercent).contains(sheddablePercent),
      "PriorityShares: sheddablePercent must be 0 through defaultPercent, \(defaultPercent) (got \(sheddablePercent))")
    self.defaultPercent = defaultPercent
    self.sheddablePercent = sheddablePercent
  }

  /// How many calls may be in flight, of every class, when a call of `priority` is admitted:
  /// its share of `maximumInFlight`, rounded down.
  public func maximumInFlight(for priority: AdmissionPriority, of maximumInFlight: Int) -> Int {
    let percent: Int
    switch priority {
    case .critical: return maximumInFlight
    case .default: percent = defaultPercent
    case .sheddable: percent = sheddablePercent
    }
    // Split so that a limit near Int.max does not overflow.
    return maximumInFlight / 100 * percent + maximumInFlight % 100 * percent / 100
  }
}

/// Which waiting call a concurrency limiter admits first within one ``AdmissionPriority``, as
/// .NET's `QueueProcessingOrder`.
public enum ConcurrencyQueueOrder: Sendable, Hashable {
  /// First in, first out: the oldest waiting call goes first. Fair; under a long overload every
  /// call waits about as long as the queue is.
  case oldestFirst
  /// Last in, first out: the newest waiting call goes first. Under overload the calls admitted
  /// are fresh ones, whose callers are still there, and the old ones reach their maximum wait
  /// (or are pushed out of a full queue) instead.
  case newestFirst
}

/// Why a concurrency limiter refused a call. A cancelled waiting call throws `CancellationError`
/// instead.
public enum ConcurrencyLimiterError: Error, Sendable, Hashable {
  /// The queue was full: `maximumQueued` calls were waiting, each to be admitted before this one
  /// (see ``ConcurrencyLimiter``'s rule). `waited` is zero for a call refused as it arrived, and
  /// how long it had waited for one pushed out of the queue later by a call admitted before it (a
  /// higher class, or a newer call in ``ConcurrencyQueueOrder/newestFirst`` order).
  case queueFull(maximumQueued: Int, waited: Duration)
  /// The call waited its `maximumWait` without being admitted. `waited` is how long it waited:
  /// `maximumWait` on time, more if the clock's timer fired late.
  case maximumWaitReached(waited: Duration)
}

extension ConcurrencyLimiterError: CustomStringConvertible {
  /// What happened, for a log line: the bound and how long the call waited.
  public var description: String {
    switch self {
    case .queueFull(let maximumQueued, let waited):
      "refused: the queue was full (maximumQueued \(maximumQueued)) after a wait of \(waited)"
    case .maximumWaitReached(let waited):
      "refused: not admitted within the maximum wait (waited \(waited))"
    }
  }
}
