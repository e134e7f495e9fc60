import CoreMetrics
public import Pace

extension PacedRequests {
  /// How many attempts of one key ``PacedRequests`` lets be in flight at once: a limit that
  /// protects an upstream which slows down before it says 429.
  ///
  /// ```swift
  /// let requests = PacedRequests(concurrency: .adaptive(.gradient2(initialLimit: 4)))
  /// ```
  public struct ConcurrencyLimit: Sendable, Hashable {
    /// The algorithm, floor, ceiling and initial limit each key starts from.
    public let adaptiveLimit: AdaptiveLimit

    /// A limit per key that moves with the key's measured round trips and drops (`AdaptiveLimit` (Pace)).
    ///
    /// Each attempt (a hedge too) holds a place for as long as it runs; its round trip is a
    /// sample, dropped when it timed out or was cut at the send's deadline, failed with a
    /// connection error, or was answered 429 or 5xx (503 included): the upstream saying it is
    /// overloaded. A key's limit is forgotten when no attempt of it runs or waits: its next
    /// request starts from `limit` again.
    ///
    /// - Parameter limit: The algorithm, its bounds and its initial limit: start below what the
    ///   upstream handles without queueing (Gradient2 learns its first window as the baseline).
    public static func adaptive(_ limit: AdaptiveLimit) -> ConcurrencyLimit {
      ConcurrencyLimit(adaptiveLimit: limit)
    }
  }
}

/// The adaptive concurrency limit of each key of a ``PacedRequests``, as it stands: for a
/// dashboard, and for tests.
///
/// A key is held while an attempt of it runs or waits for a place, and forgotten after, so that
/// memory follows the keys in use.
public final class UpstreamConcurrencyLimits: Sendable {
  private struct Entry {
    let limiter: AdaptiveConcurrencyLimiter
    /// Sends holding or waiting for a place of this key's.
    var users: Int
  }

  /// The algorithm each key starts from.
  public let initialLimit: AdaptiveLimit
  private let entries = LockedState<[String: Entry]>([:])
  private let clock: SendClock
  private let metrics: PacedRequestsMetrics
  /// A key's limiter, on the requests' clock.
  private let makeLimiter: @Sendable () -> AdaptiveConcurrencyLimiter

  init<C: Clock>(_ limit: AdaptiveLimit, clock: C, metrics: PacedRequestsMetrics) where C.Duration == Duration {
    initialLimit = limit
    self.clock = SendClock(clock)
    self.metrics = metrics
    makeLimiter = {
      AdaptiveConcurrencyLimiter(limit, maximumQueued: .max, clock: clock) { from, to in
        (to > from ? metrics.concurrencyLimitIncreases : metrics.concurrencyLimitDecreases).increment()
      }
    }
  }

  /// `key`'s adaptive limit now (its current `AdaptiveLimit.limit`); `nil` when no attempt of
  /// `key` runs or waits.
  public func limit(for key: String) -> AdaptiveLimit? {
    entries.withLock { $0[key]?.limiter }?.limit
  }

  /// How many attempts of `key` hold a place now.
  public func inFlightCount(for key: String) -> Int {
    entries.withLock { $0[key]?.limiter }?.limiter.inFlightCount ?? 0
  }

  /// How many attempts of `key` wait for a place now.
  public func waitingCount(for key: String) -> Int {
    entries.withLock { $0[key]?.limiter }?.limiter.waitingCount ?? 0
  }

  /// How many keys are held: those with an attempt running or waiting.
  public var keyCount: Int { entries.withLock { $0.count } }

  /// Takes a use of `key`'s limiter, making it if the key was idle.
  private func checkOut(_ key: String) -> AdaptiveConcurrencyLimiter {
    entries.withLock { entries in
      if let entry = entries[key] {
        entries[key]?.users += 1
        return entry.limiter
      }
      let limiter = makeLimiter()
      entries[key] = Entry(limiter: limiter, users: 1)
      return limiter
    }
  }

  /// Gives back a use of `key`'s limiter; the last one forgets the key.
  fileprivate func checkIn(_ key: String) {
    entries.withLock { entries in
      guard let users = entries[key]?.users else { return }
      if users <= 1 {
        entries[key] = nil
      } else {
        entries[key]?.users = users - 1
      }
    }
  }

  /// A place for an attempt of `key` if one is free now (a hedge's), else `nil`.
  func tryAcquire(_ key: String) -> UpstreamPermit? {
    let limiter = checkOut(key)
    guard let permit = limiter.tryAcquire() else {
      checkIn(key)
      return nil
    }
    return UpstreamPermit(owner: self, key: key, permit: permit)
  }

  /// Waits for a place for an attempt of `key`, no later than `deadline` (then throws
  /// `PacedRequestsError.deadlineExceeded`), or until the task is cancelled.
  func acquire(_ key: String, before deadline: PaceInstant?) async throws -> UpstreamPermit {
    let limiter = checkOut(key)
    do {
      if let permit = limiter.tryAcquire() { return UpstreamPermit(owner: self, key: key, permit: permit) }
      metrics.concurrencyWaits.increment()
      let permit: AdaptiveConcurrencyPermit
      if let deadline {
        guard clock.now() < deadline else { throw PacedRequestsError.deadlineExceeded(needed: nil, remaining: .zero) }
        // A task of its own, so that the deadline can cancel the wait alone.
        permit = try await clock.value(of: Task { try await limiter.acquire() }, cutAt: deadline)
      } else {
        permit = try await limiter.acquire()
      }
      return UpstreamPermit(owner: self, key: key, permit: permit)
    } catch {
      checkIn(key)
      throw error
    }
  }
}

/// An attempt's place in its key's ``UpstreamConcurrencyLimits``, released once with what became
/// of the attempt; one never released gives its place back when deallocated, without a sample.
final class UpstreamPermit: Sendable {
  private let owner: UpstreamConcurrencyLimits
  private let key: String
  private let permit: AdaptiveConcurrencyPermit
  private let released = LockedState(false)

  fileprivate init(owner: UpstreamConcurrencyLimits, key: String, permit: AdaptiveConcurrencyPermit) {
    self.owner = owner
    self.key = key
    self.permit = permit
  }

  /// Records the attempt's outcome (its round trip is measured now) and gives its place back.
  func release(_ outcome: AdaptiveConcurrencyLimiter.Outcome) {
    guard takeRelease() else { return }
    permit.release(outcome)
    owner.checkIn(key)
  }

  private func takeRelease() -> Bool {
    released.withLock { released in
      defer { released = true }
      return !released
    }
  }

  deinit {
    if takeRelease() {
      permit.release(.ignored)
      owner.checkIn(key)
    }
  }

  /// What an answer says of the upstream's load: 429 and 5xx are drops; a cache's answer says
  /// nothing of it.
  static func outcome(of head: ResponseHead) -> AdaptiveConcurrencyLimiter.Outcome {
    if head.isFromCache { return .ignored }
    return head.status == 429 || (500...599).contains(head.status) ? .dropped : .success
  }
}

/// Why a round cut its attempts: set before it cancels them, read by the attempts as they end.
final class RoundCut: Sendable {
  private let cut = LockedState(false)

  func mark() { cut.withLock { $0 = true } }

  var isMarked: Bool { cut.withLock { $0 } }
}
