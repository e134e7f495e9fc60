/// A concurrency limit counted outside this process, so that every instance of a server shares it:
/// at most `maximumInFlight` calls of a key in flight at once across the fleet. PacePostgres's
/// `PostgresConcurrencyLimiter` keeps the count in PostgreSQL, one lease per permit.
///
/// ```swift
/// let report = try await shared.withPermit("reports", priority: .sheddable) { try await buildReport() }
/// ```
///
/// A conforming type decides on its own where it waits and what it answers while its store is
/// away; the middlewares' `RequestConcurrencyLimit` takes any of them.
public protocol SharedConcurrencyLimiter: Sendable {
  /// A place held by this instance.
  associatedtype Permit: SharedConcurrencyPermit

  /// How many calls of one key may be in flight at once across every instance.
  var maximumInFlight: Int { get }

  /// How many of this instance's permits are held now, over every key.
  var inFlightCount: Int { get }

  /// Takes one of `key`'s places, waiting for one as the limiter's rules say.
  ///
  /// - Parameters:
  ///   - key: The key the call counts for.
  ///   - priority: The call's class.
  /// - Returns: The permit; release it on every path.
  /// - Throws: ``ConcurrencyLimiterError`` when refused, `CancellationError` when the task is
  ///   cancelled while it waits, `InvalidInput` for a key outside `InputRules`, or what the
  ///   limiter's store reports.
  func acquire(_ key: String, priority: AdmissionPriority) async throws -> Permit
}

/// A place among a ``SharedConcurrencyLimiter``'s calls in flight, held until ``release()``.
public protocol SharedConcurrencyPermit: AnyObject, Sendable {
  /// The class the permit was admitted as.
  var priority: AdmissionPriority { get }

  /// Gives the place back, without waiting for the store; a second release does nothing.
  func release()
}

extension SharedConcurrencyLimiter {
  /// Runs `body` holding one of `key`'s places, across every instance; the place is given back
  /// when `body` returns or throws.
  ///
  /// - Parameters:
  ///   - key: The key the call counts for.
  ///   - priority: The call's class; `.default` by default.
  ///   - isolation: The caller's actor; leave the default.
  ///   - body: The work.
  /// - Returns: What `body` returns.
  /// - Throws: What ``acquire(_:priority:)`` throws, without running `body`; else what `body` throws.
  public func withPermit<Result>(
    _ key: String,
    priority: AdmissionPriority = .default,
    isolation: isolated (any Actor)? = #isolation,
    _ body: () async throws -> Result
  ) async throws -> Result {
    let permit = try await acquire(key, priority: priority)
    defer { permit.release() }
    return try await body()
  }
}
