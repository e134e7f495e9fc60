#if PostgreSQL && Hummingbird
import Foundation
import Pace
import PaceHTTPServer
@testable import PacePostgres
import PostgresNIO
import Testing

/// Every duration, rate and count a caller configures is checked with a thrown error, never a
/// trap, at the edges issue 31 names: 0, 1 ns, `Int64.max` s, `Int64.max` s × 4, `Int.max` permits.
/// No database: nothing here connects (the clients are never run).
@Suite("Settings are validated with thrown errors, never a trap")
struct SettingsValidationTests {
  static let edges: [Duration] = [.zero, .nanoseconds(1), .seconds(Int64.max), .seconds(Int64.max) * 4]

  static func client() -> PostgresClient {
    PostgresClient(
      configuration: .init(host: "127.0.0.1", username: "nobody", password: nil, database: nil, tls: .disable))
  }

  /// Whether `error` is `.invalidSetting` naming a setting whose path ends with `setting`.
  static func isInvalid(_ error: any Error, _ setting: String) -> Bool {
    guard case .invalidSetting(let name, _, _) = error as? PacePostgresError else { return false }
    return name.hasSuffix("." + setting)
  }

  /// The error names the setting, its value and its rule, in one line that reads as the rule.
  @Test func anInvalidSettingSaysWhichValueBreaksWhichRule() throws {
    let error = PacePostgresError.invalidSetting(
      name: "PostgresRateLimitStore.TableOptions.fillfactor", value: "5", rule: "must be in 10...100")
    #expect("\(error)" == "PostgresRateLimitStore: TableOptions.fillfactor must be in 10...100 (got 5)")
    let thrown = #expect(throws: PacePostgresError.self) {
      try PostgresRateLimitStore(client: Self.client(), timeout: .zero)
    }
    #expect(
      thrown.map { "\($0)" }
        == "PostgresRateLimitStore: timeout must be positive and below Int64.max nanoseconds (about 292 years) (got 0.0 seconds)"
    )
    let short = #expect(throws: PacePostgresError.self) {
      try PostgresDebouncer<Int>(client: Self.client(), quiet: .seconds(2), maximumWait: .seconds(1)) { _, _ in }
    }
    #expect(
      short
        == .invalidSetting(
          name: "PostgresDebouncer.maximumWait", value: "1.0 seconds",
          rule: "must not be shorter than quiet (2.0 seconds)"))
  }

  /// The GCRA arithmetic: a rate whose microseconds are 0 or overflow is `.invalidSetting` naming the limit.
  @Test func theArithmeticOfAnExtremeRateThrows() throws {
    for interval in Self.edges.dropFirst() {
      #expect(throws: PacePostgresError.self, "\(interval)") {
        try GCRA(cost: 1, limit: RateLimit(permits: 1, per: interval))
      }
    }
    #expect(throws: PacePostgresError.self) {
      try GCRA(cost: 1, limit: RateLimit(permits: 1, per: .seconds(Int64.max), burst: 20))
    }
    #expect(throws: PacePostgresError.self) { try GCRA(cost: 1, limit: RateLimit(permits: Int.max, per: .seconds(60))) }
    #expect(throws: PacePostgresError.self) {
      try GCRA(cost: 1, limit: RateLimit(permits: Int.max, per: .seconds(Int64.max) * 4))
    }
    #expect(throws: PacePostgresError.self) { try GCRA(cost: -1, limit: RateLimit(permits: 1, per: .seconds(1))) }
    #expect(throws: PacePostgresError.self) { try GCRA(cost: 2, limit: RateLimit(permits: 1, per: .seconds(1))) }
    // In range, the arithmetic is GCRA's: 1 per minute, the burst 20 emission intervals.
    let gcra = try GCRA(cost: 1, limit: RateLimit(permits: 1, per: .seconds(60), burst: 20))
    #expect(gcra.increment == 60_000_000 && gcra.tolerance == 1_200_000_000)
    #expect(try GCRA(cost: 0, limit: RateLimit(permits: 3, per: .seconds(1))).increment == 0)
  }

  /// A store's timeout and purge interval: thrown at 0 and beyond 292 years, accepted at 1 ns.
  @Test func aStoreChecksItsDurations() throws {
    let client = Self.client()
    for duration in Self.edges {
      let accepted = duration == .nanoseconds(1)
      for (name, make) in [
        ("timeout", { try PostgresRateLimitStore(client: client, timeout: duration) }),
        ("purgeInterval", { try PostgresRateLimitStore(client: client, purgeInterval: duration) }),
      ] as [(String, () throws -> PostgresRateLimitStore)] {
        do {
          _ = try make()
          #expect(accepted, "\(name) \(duration) was accepted")
        } catch {
          #expect(!accepted && Self.isInvalid(error, name), "\(name) \(duration): \(error)")
          #expect("\(error)".contains(name))
        }
      }
    }
  }

  /// A debouncer's durations and counts.
  @Test func aDebouncerChecksItsSettings() throws {
    let client = Self.client()
    typealias Make = (Duration) throws -> PostgresDebouncer<Int>
    let settings: [(name: String, zeroAllowed: Bool, make: Make)] = [
      ("quiet", true, { try PostgresDebouncer<Int>(client: client, quiet: $0) { _, _ in } }),
      (
        "maximumWait", true, { try PostgresDebouncer<Int>(client: client, quiet: .zero, maximumWait: $0) { _, _ in } }
      ),
      ("lease", false, { try PostgresDebouncer<Int>(client: client, quiet: .zero, lease: $0) { _, _ in } }),
      (
        "pollInterval", false,
        { try PostgresDebouncer<Int>(client: client, quiet: .zero, pollInterval: $0) { _, _ in } }
      ),
      ("timeout", false, { try PostgresDebouncer<Int>(client: client, quiet: .zero, timeout: $0) { _, _ in } }),
      (
        "retryBackoff", true, { try PostgresDebouncer<Int>(client: client, quiet: .zero, retryBackoff: $0) { _, _ in } }
      ),
      (
        "maximumRetryBackoff", true,
        { try PostgresDebouncer<Int>(client: client, quiet: .zero, maximumRetryBackoff: $0) { _, _ in } }
      ),
      (
        "shutdownGracePeriod", true,
        { try PostgresDebouncer<Int>(client: client, quiet: .zero, shutdownGracePeriod: $0) { _, _ in } }
      ),
    ]
    for setting in settings {
      for duration in Self.edges {
        let accepted = duration == .nanoseconds(1) || (duration == .zero && setting.zeroAllowed)
        do {
          _ = try setting.make(duration)
          #expect(accepted, "\(setting.name) \(duration) was accepted")
        } catch {
          #expect(!accepted && Self.isInvalid(error, setting.name), "\(setting.name) \(duration): \(error)")
          #expect("\(error)".contains(setting.name), "\(error)")
        }
      }
    }
    #expect(throws: PacePostgresError.self) {
      try PostgresDebouncer<Int>(client: client, quiet: .seconds(2), maximumWait: .seconds(1)) { _, _ in }
    }
    #expect(throws: PacePostgresError.self) {
      try PostgresDebouncer<Int>(client: client, quiet: .zero, maximumAttempts: 0) { _, _ in }
    }
    #expect(throws: PacePostgresError.self) {
      try PostgresDebouncer<Int>(client: client, quiet: .zero, maximumConcurrentExecutions: 0) { _, _ in }
    }
    #expect(throws: PacePostgresError.self) {
      try PostgresDebouncer<Int>(client: client, quiet: .zero, maximumPayloadBytes: 0) { _, _ in }
    }
    _ = try PostgresDebouncer<Int>(client: client, quiet: .zero, maximumAttempts: Int.max) { _, _ in }
  }

  /// The response headers of an extreme rate: saturated seconds, never a trap.
  @Test func theHeadersOfAnExtremeRateSaturate() {
    for limit in [
      RateLimit(permits: 1, per: .seconds(Int64.max), burst: 20),
      RateLimit(permits: 1, per: .seconds(Int64.max) * 4, burst: Int.max),
      RateLimit(permits: Int.max, per: .nanoseconds(1)),
      RateLimit(permits: Int.max, per: .seconds(Int64.max) * 4),
    ] {
      let fields = RateLimitFields(limit: limit, policyName: "p")
      for remaining in [0, 1, Int.max] {
        #expect(!fields.fields(remaining: remaining).isEmpty)
      }
      #expect(!fields.fields(retryAfter: .seconds(Int64.max) * 4).isEmpty)
    }
    let long = RateLimitFields(limit: RateLimit(permits: 1, per: .seconds(Int64.max), burst: 20), policyName: "p")
    #expect(long.fields(remaining: 0).map(\.value).contains("\"p\";r=0;t=\(Int64.max / 1_000_000_000 + 1)"))
    // An ordinary rate: 10 per minute, 4 left of 10: 6 emission intervals of 6 s.
    let ordinary = RateLimitFields(limit: RateLimit(permits: 10, per: .seconds(60)), policyName: "p")
    #expect(ordinary.fields(remaining: 4).map(\.value).contains("\"p\";r=4;t=36"))
  }

  /// A circuit breaker is checked by the store and the debouncer that use it: a threshold that is
  /// not positive, or a cool-down at the edges, throws naming `circuitBreaker`; 1 ns and 1 pass.
  @Test func aCircuitBreakerIsCheckedWhereItIsUsed() throws {
    let client = Self.client()
    let breakers =
      [Int.min, -1, 0, 1, Int.max].map { CircuitBreaker(failureThreshold: $0) }
      + Self.edges.map { CircuitBreaker(coolDown: $0) }
    for breaker in breakers {
      let accepted = breaker.failureThreshold > 0 && breaker.coolDown > .zero && breaker.coolDown < .seconds(Int64.max)
      for make in [
        { _ = try PostgresRateLimitStore(client: client, circuitBreaker: breaker) },
        { _ = try PostgresDebouncer<Int>(client: client, quiet: .zero, circuitBreaker: breaker) { _, _ in } },
      ] as [() throws -> Void] {
        do {
          try make()
          #expect(accepted, "\(breaker) was accepted")
        } catch {
          let setting = breaker.failureThreshold > 0 ? "circuitBreaker.coolDown" : "circuitBreaker.failureThreshold"
          #expect(!accepted && Self.isInvalid(error, setting), "\(breaker): \(error)")
          #expect("\(error)".contains("circuitBreaker"))
        }
      }
    }
  }

  /// Counts and timeouts passed to calls are thrown too, before anything connects.
  @Test func countsAndTimeoutsOfCallsThrow() async throws {
    let client = Self.client()
    let store = try PostgresRateLimitStore(client: client)
    let debouncer = try PostgresDebouncer<Int>(client: client, quiet: .zero) { _, _ in }
    for batchSize in [Int.min, -1, 0] {
      await #expect(throws: PacePostgresError.self) { try await store.purgeExpired(batchSize: batchSize) }
    }
    for limit in [Int.min, -1, 0] {
      await #expect(throws: PacePostgresError.self) { try await debouncer.runDue(limit: limit) }
    }
    for timeout in [Duration.zero, .seconds(-1), .seconds(Int64.max), .seconds(Int64.max) * 4] {
      await #expect(throws: PacePostgresError.self) { try await store.migrate(timeout: timeout) }
      await #expect(throws: PacePostgresError.self) { try await debouncer.migrate(timeout: timeout) }
    }
  }

  /// The synchronous `tryAcquire` on a limiter made with a store (deprecated) answers from
  /// memory, never a trap.
  @Test func tryAcquireOnAStoreBackedLimiterAnswersFromMemory() throws {
    let store = try PostgresRateLimitStore(client: Self.client())
    let limiter = KeyedRateLimiter(sharing: StoreBackedRateLimiter(permits: 2, per: .seconds(3600), store: store))
    #expect(limiter.tryAcquire("k") == .allowed(remaining: 1))
    #expect(limiter.tryAcquire("k") == .allowed(remaining: 0))
    #expect(!limiter.tryAcquire("k").isAllowed)
  }
}
#endif
