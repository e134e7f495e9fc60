#if PostgreSQL && Hummingbird
import Foundation
import MetricsTestKit
import Pace
@testable import PacePostgres
import PaceTestSupport
import PostgresNIO
import Testing

/// A busy key's leases, driven directly: exact decisions at exact instants (microseconds), no clock.
@Suite("HotKeyLeaseState")
struct HotKeyLeaseStateTests {
  let t0: Int64 = 1_800_000_000_000_000
  let ms: Int64 = 1000
  /// 100 per second, a burst of 100: leases of 10, a permit's slot every 10 ms.
  let limit = RateLimit(permits: 100, per: .seconds(1))

  func machine(busyAfter: Int = 3) throws -> HotKeyLeaseState {
    HotKeyLeaseState(settings: try HotKeyLeasing(busyAfter: busyAfter, within: .milliseconds(100), burstDivisor: 10))
  }

  @Test func aBusyKeyLeasesGrantsFromMemoryAndKeepsTheNextLeaseAhead() throws {
    var m = try machine()
    #expect(m.decide("hot", cost: 1, limit: limit, now: t0) == .ask(lease: nil))
    #expect(m.decide("hot", cost: 1, limit: limit, now: t0) == .ask(lease: nil))
    #expect(m.decide("hot", cost: 1, limit: limit, now: t0) == .ask(lease: 10))  // busy: 3 within 100 ms
    #expect(m.decide("hot", cost: 1, limit: limit, now: t0) == .ask(lease: nil))  // one lease asked at a time
    #expect(m.decide("cold", cost: 1, limit: limit, now: t0) == .ask(lease: nil))
    // The database charged 10 permits from a TAT at t0: their slots start at t0, t0 + 10 ms, …
    let lease = HotKeyLeaseState.Lease.tokenBucket(permits: 10, start: t0, limit: limit)
    #expect(m.leased("hot", limit: limit, lease: lease, requested: 1, now: t0 + ms) == 9)
    // The first grant asks for the next lease, kept ahead; one at a time.
    #expect(m.decide("hot", cost: 1, limit: limit, now: t0 + ms) == .grant(remaining: 8, refill: 10))
    #expect(m.decide("hot", cost: 0, limit: limit, now: t0 + ms) == .grant(remaining: 8, refill: nil))  // takes nothing
    #expect(m.decide("hot", cost: 2, limit: limit, now: t0 + ms) == .grant(remaining: 6, refill: nil))
    #expect(m.decide("hot", cost: 1, limit: limit, now: t0 + ms) == .grant(remaining: 5, refill: nil))
    #expect(m.decide("hot", cost: 11, limit: limit, now: t0 + ms) == .ask(lease: nil))  // more than a lease
  }

  @Test func aLeasedPermitExpiresOnceItsSlotHasStarted() throws {
    var m = try machine()
    for _ in 0..<3 { _ = m.decide("hot", cost: 1, limit: limit, now: t0) }
    let lease = HotKeyLeaseState.Lease.tokenBucket(permits: 10, start: t0, limit: limit)
    #expect(m.leased("hot", limit: limit, lease: lease, requested: 1, now: t0) == 9)
    // Permit 1's slot starts at t0 + 10 ms: granted then, not a microsecond later.
    #expect(m.decide("hot", cost: 1, limit: limit, now: t0 + 10 * ms) == .grant(remaining: 8, refill: 10))
    // At t0 + 35 ms, permits 2 and 3 have missed their slots: permit 4 (t0 + 40 ms) is the next.
    #expect(m.decide("hot", cost: 1, limit: limit, now: t0 + 35 * ms) == .grant(remaining: 5, refill: nil))
    #expect(m.decide("hot", cost: 1, limit: limit, now: t0 + 90 * ms) == .grant(remaining: 0, refill: nil))
    #expect(m.takeExpired() == 0)
    #expect(m.decide("hot", cost: 1, limit: limit, now: t0 + 90 * ms + 1) == .ask(lease: nil))
    #expect(m.takeExpired() == 6)  // 10 leased, 4 granted
    // The next lease, taken ahead: its slots follow the first's.
    let next = HotKeyLeaseState.Lease.tokenBucket(permits: 10, start: t0 + 100 * ms, limit: limit)
    #expect(m.leased("hot", limit: limit, lease: next, requested: 0, now: t0 + 91 * ms) == nil)
    #expect(m.decide("hot", cost: 1, limit: limit, now: t0 + 91 * ms) == .grant(remaining: 9, refill: 10))
  }

  @Test func aFixedWindowsLeaseExpiresAtTheWindowsEnd() throws {
    var m = try machine()
    let window = RateLimit.fixedWindow(permits: 100, per: .seconds(1))
    for _ in 0..<2 { _ = m.decide("hot", cost: 1, limit: window, now: t0) }
    #expect(m.decide("hot", cost: 1, limit: window, now: t0) == .ask(lease: 10))
    let lease = HotKeyLeaseState.Lease.fixedWindow(permits: 10, end: t0 + 1000 * ms)
    #expect(m.leased("hot", limit: window, lease: lease, requested: 1, now: t0) == 9)
    #expect(m.decide("hot", cost: 1, limit: window, now: t0 + 1000 * ms - 1) == .grant(remaining: 8, refill: 10))
    #expect(m.decide("hot", cost: 1, limit: window, now: t0 + 1000 * ms) == .ask(lease: nil))
    #expect(m.takeExpired() == 8)
  }

  @Test func aSlidingWindowNeverLeases() throws {
    var m = try machine(busyAfter: 1)
    let window = RateLimit.slidingWindow(permits: 100, per: .seconds(1))
    for _ in 0..<10 { #expect(m.decide("hot", cost: 1, limit: window, now: t0) == .ask(lease: nil)) }
    // A limit whose lease would be one permit does not lease either.
    for _ in 0..<10 {
      #expect(m.decide("small", cost: 1, limit: RateLimit(permits: 19, per: .seconds(1)), now: t0) == .ask(lease: nil))
    }
  }

  @Test func aChangeOfLimitDropsTheKeysLeases() throws {
    var m = try machine()
    for _ in 0..<3 { _ = m.decide("hot", cost: 1, limit: limit, now: t0) }
    let lease = HotKeyLeaseState.Lease.tokenBucket(permits: 10, start: t0, limit: limit)
    #expect(m.leased("hot", limit: limit, lease: lease, requested: 1, now: t0) == 9)
    let plan = RateLimit(permits: 50, per: .seconds(1))
    #expect(m.decide("hot", cost: 1, limit: plan, now: t0) == .ask(lease: nil))
    #expect(m.takeExpired() == 9)
    // A lease of the old limit answered after the change grants only its requester.
    #expect(m.leased("hot", limit: limit, lease: lease, requested: 1, now: t0) == 9)
    #expect(m.takeExpired() == 9)
    #expect(m.decide("hot", cost: 1, limit: plan, now: t0) == .ask(lease: nil))
  }

  @Test func aDeniedLeaseIsNotAskedAgainWithinTheSpan() throws {
    var m = try machine()
    for _ in 0..<2 { _ = m.decide("hot", cost: 1, limit: limit, now: t0) }
    #expect(m.decide("hot", cost: 1, limit: limit, now: t0) == .ask(lease: 10))
    m.notLeased("hot", limit: limit, now: t0)
    for _ in 0..<5 { #expect(m.decide("hot", cost: 1, limit: limit, now: t0 + 99 * ms) == .ask(lease: nil)) }
    for _ in 0..<2 { #expect(m.decide("hot", cost: 1, limit: limit, now: t0 + 100 * ms) == .ask(lease: nil)) }
    #expect(m.decide("hot", cost: 1, limit: limit, now: t0 + 100 * ms) == .ask(lease: 10))
  }

  @Test func hostileSettingsAreRefusedByName() {
    func refused(_ make: () throws -> HotKeyLeasing) -> String? {
      do {
        _ = try make()
        return nil
      } catch {
        guard case .invalidSetting(let name, _, _) = error as? PacePostgresError else { return nil }
        return name
      }
    }
    #expect(refused { try HotKeyLeasing(busyAfter: 0) } == "HotKeyLeasing.busyAfter")
    #expect(refused { try HotKeyLeasing(busyAfter: -1) } == "HotKeyLeasing.busyAfter")
    #expect(refused { try HotKeyLeasing(busyAfter: .max) } == "HotKeyLeasing.busyAfter")
    #expect(refused { try HotKeyLeasing(within: .zero) } == "HotKeyLeasing.within")
    #expect(refused { try HotKeyLeasing(within: .seconds(-1)) } == "HotKeyLeasing.within")
    #expect(refused { try HotKeyLeasing(within: .seconds(Int64.max)) } == "HotKeyLeasing.within")
    #expect(refused { try HotKeyLeasing(burstDivisor: 1) } == "HotKeyLeasing.burstDivisor")
    #expect(refused { try HotKeyLeasing(burstDivisor: 0) } == "HotKeyLeasing.burstDivisor")
    #expect(refused { try HotKeyLeasing(burstDivisor: .min) } == "HotKeyLeasing.burstDivisor")
    #expect(refused { try HotKeyLeasing(burstDivisor: .max) } == "HotKeyLeasing.burstDivisor")
    #expect(refused { try HotKeyLeasing() } == nil)
  }
}

/// Three instances leasing one hot key on one database, on a timeline the test chooses
/// (``PostgresRateLimitStore/tryAcquire(_:cost:limit:databaseNow:)``): the fleet grants no more
/// than the limit, over the run and over every span.
@Suite("PostgresRateLimitStore leases hot keys", .databaseTestTimeLimit)
struct HotKeyLeaseTests {
  /// An instant, in microseconds since the Unix epoch, that every window of these tests divides.
  static let base: Int64 = 1_800_000_000_000_000
  static let ms: Int64 = 1000

  /// Runs `body` with `count` stores, one per client, leasing, on one migrated table.
  func withStores(
    _ count: Int, leasing: HotKeyLeasing, metrics: TestMetrics,
    _ body: @escaping @Sendable ([PostgresRateLimitStore], String) async throws -> Void
  ) async throws {
    try await TestDatabase.withClients(count, connections: 4) { clients in
      let table = TestDatabase.uniqueTable("hot")
      let stores = try clients.map { client in
        try PostgresRateLimitStore(client: client, table: table, metricsFactory: metrics)
          .leasingHotKeys(leasing, metricsFactory: metrics)
      }
      try await stores[0].migrate()
      try await body(stores, table)
    }
  }

  func counter(_ metrics: TestMetrics, _ label: String, _ table: String) -> Int64 {
    (try? metrics.expectCounter(label, [("table", table)]).totalValue) ?? 0
  }

  @Test func threeInstancesOnOneKeyGrantNoMoreThanTheBucketOverAnySpan() async throws {
    // 400 per second with a burst of 80: a permit's slot is 2.5 ms, a lease 10 permits.
    let limit = RateLimit(permits: 400, per: .seconds(1), burst: 80)
    let metrics = TestMetrics()
    try await withStores(3, leasing: try HotKeyLeasing(busyAfter: 4, burstDivisor: 8), metrics: metrics) {
      stores, table in
      var grants: [Int64] = []
      var generator = SeededGenerator(seed: 44)
      // 2 s: each instance asks about once every 2 ms (1,500 a second in all, above the limit),
      // with quieter stretches in which the leases' permits miss their slots.
      var t: Int64 = 0
      while t < 2000 * Self.ms {
        // Busy stretches of 250 ms (1,500 a second in all) and quiet ones (300 a second).
        let odds = t / (250 * Self.ms) % 2 == 0 ? 50 : 10
        for store in stores where Int.random(in: 0..<100, using: &generator) < odds {
          let decision = try await store.tryAcquire("hot", cost: 1, limit: limit, databaseNow: Self.base + t)
          if decision.isAllowed { grants.append(t) }
        }
        t += Self.ms
      }
      // GCRA's bound: every span [s, e] grants at most 80 + ⌊(e - s) / 2.5 ms⌋.
      grants.sort()
      for i in grants.indices {
        for j in i..<grants.count {
          let bound = 80 + Int((grants[j] - grants[i]) / 2500)
          #expect(j - i + 1 <= bound, "\(j - i + 1) granted in [\(grants[i]), \(grants[j])] µs, bound \(bound)")
          if j - i + 1 > bound { return }
        }
      }
      #expect(grants.count <= 80 + 800)
      let leases = counter(metrics, "pace_rate_limit_leases_total", table)
      let leased = counter(metrics, "pace_rate_limit_leased_permits_total", table)
      let expired = counter(metrics, "pace_rate_limit_lease_expired_permits_total", table)
      print(
        "hot key: \(grants.count) granted, \(leases) leases, \(expired) expired, \(counter(metrics, "pace_rate_limit_round_trips_total", table)) statements"
      )
      #expect(leases > 10 && leased == 10 * leases)
      #expect(expired < leased)
      // Most of the limit is granted, and most of it from leases (a statement per lease).
      let statements = counter(metrics, "pace_rate_limit_round_trips_total", table)
      #expect(grants.count >= 400, "\(grants.count) granted, \(statements) statements, \(leases) leases")
    }
  }

  @Test func threeInstancesOnOneKeyGrantNoMoreThanAFixedWindowsPermitsPerWindow() async throws {
    let limit = RateLimit.fixedWindow(permits: 100, per: .milliseconds(200))
    let metrics = TestMetrics()
    try await withStores(3, leasing: try HotKeyLeasing(busyAfter: 4, burstDivisor: 10), metrics: metrics) {
      stores, table in
      var perWindow: [Int64: Int] = [:]
      var t: Int64 = 0
      while t < 1000 * Self.ms {
        for store in stores {
          let decision = try await store.tryAcquire("hot", cost: 1, limit: limit, databaseNow: Self.base + t)
          if decision.isAllowed { perWindow[t / (200 * Self.ms), default: 0] += 1 }
        }
        t += Self.ms
      }
      #expect(perWindow.count == 5)
      for (window, granted) in perWindow { #expect(granted <= 100, "window \(window): \(granted)") }
      #expect(counter(metrics, "pace_rate_limit_leases_total", table) >= 5)
    }
  }

  @Test func aLeaseThatIsNotUsedInTimeExpiresAndTheDatabaseDecidesAgain() async throws {
    // 100 per second: leases of 10, slots 10 ms apart.
    let limit = RateLimit(permits: 100, per: .seconds(1))
    let metrics = TestMetrics()
    try await withStores(1, leasing: try HotKeyLeasing(busyAfter: 2, burstDivisor: 10), metrics: metrics) {
      stores, table in
      let store = stores[0]
      func decide(at t: Int64) async throws -> RateLimitDecision {
        try await store.tryAcquire("hot", cost: 1, limit: limit, databaseNow: Self.base + t)
      }
      func statements() -> Int64 { counter(metrics, "pace_rate_limit_round_trips_total", table) }
      let answer1 = try await decide(at: 0)
      #expect(answer1 == .allowed(remaining: 99))
      let answer2 = try await decide(at: 0)
      #expect(answer2 == .allowed(remaining: 9))  // a lease of 10, the first its own
      let afterLease = statements()
      let answer3 = try await decide(at: 0)
      #expect(answer3 == .allowed(remaining: 8))  // from memory, and the next lease is taken ahead
      #expect(statements() == afterLease + 1)
      let answer4 = try await decide(at: 10 * Self.ms)
      #expect(answer4 == .allowed(remaining: 7))
      #expect(statements() == afterLease + 1)  // from memory
      // At 300 ms every slot of both leases has started (the second's last at 200 ms): their 17
      // left expire, and the database decides.
      let answer5 = try await decide(at: 300 * Self.ms)
      #expect(answer5 == .allowed(remaining: 99))  // the bucket refilled
      #expect(statements() == afterLease + 2)
      #expect(counter(metrics, "pace_rate_limit_lease_expired_permits_total", table) == 17)
    }
  }

  @Test func aPlanChangeDuringALeaseIsDecidedUnderTheNewLimit() async throws {
    let limit = RateLimit(permits: 100, per: .seconds(1))
    let plan = RateLimit(permits: 1, per: .seconds(1))
    let metrics = TestMetrics()
    try await withStores(1, leasing: try HotKeyLeasing(busyAfter: 2, burstDivisor: 10), metrics: metrics) {
      stores, table in
      let store = stores[0]
      _ = try await store.tryAcquire("hot", cost: 1, limit: limit, databaseNow: Self.base)
      let answer6 = try await store.tryAcquire("hot", cost: 1, limit: limit, databaseNow: Self.base)
      #expect(answer6 == .allowed(remaining: 9))
      // The new plan allows one a second, and the key has used 11: denied, though the lease has 9.
      let denied = try await store.tryAcquire("hot", cost: 1, limit: plan, databaseNow: Self.base + Self.ms)
      #expect(!denied.isAllowed)
      #expect(counter(metrics, "pace_rate_limit_lease_expired_permits_total", table) == 9)
      // Back to the old plan: its lease is gone, the database decides.
      let before = counter(metrics, "pace_rate_limit_round_trips_total", table)
      _ = try await store.tryAcquire("hot", cost: 1, limit: limit, databaseNow: Self.base + Self.ms)
      #expect(counter(metrics, "pace_rate_limit_round_trips_total", table) == before + 1)
    }
  }
}
#endif
