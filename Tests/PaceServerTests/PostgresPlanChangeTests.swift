#if PostgreSQL && Hummingbird
import Foundation
import Pace
@testable import PacePostgres
import PaceTestSupport
import PostgresNIO
import Testing

/// A key's limit changed between two of the store's decisions, as `StoreBackedRateLimiter` passes
/// a plan's new limit: every permit granted is one the old limit or the new one, each applied to
/// the key's whole history, would have allowed.
@Suite("PostgresRateLimitStore carries a key's use over a change of its limit", .databaseTestTimeLimit)
struct PostgresPlanChangeTests {
  /// Whether `limit`, applied to the key's whole history `grants` (microseconds from ``TestDatabase/chosenInstant``),
  /// lets one more permit through at `t`.
  static func allows(_ limit: RateLimit, _ grants: [Int64], at t: Int64) -> Bool {
    RateLimitHistoryOracle.allows(limit, grants, at: t, unit: .microseconds(1))
  }

  /// One key's decisions on a store: `old` before `change`, `new` from it on; each grant checked
  /// against the oracle, and recorded.
  final class Timeline: @unchecked Sendable {
    let store: PostgresRateLimitStore
    let key: String
    let old: RateLimit
    let new: RateLimit
    let change: Int64
    var grants: [Int64] = []

    init(store: PostgresRateLimitStore, key: String = "k", old: RateLimit, new: RateLimit, change: Double) {
      (self.store, self.key, self.old, self.new, self.change) = (
        store, key, old, new, TestDatabase.microseconds(change)
      )
    }

    /// The store's decision for one permit at `time` seconds, checked against the oracle.
    @discardableResult
    func request(at time: Double, sourceLocation: SourceLocation = #_sourceLocation) async throws -> Bool {
      let t = TestDatabase.microseconds(time)
      let limit = t < change ? old : new
      let decision = try await store.tryAcquire(key, cost: 1, limit: limit, databaseNow: TestDatabase.chosenInstant + t)
      guard decision.isAllowed else { return false }
      #expect(
        allows(old, grants, at: t) || allows(new, grants, at: t),
        "granted at \(time) s, which neither \(old) nor \(new) allows over \(grants.map { Double($0) / 1e6 })",
        sourceLocation: sourceLocation)
      grants.append(t)
      return true
    }

    /// Requests one permit every `step` seconds over `[from, to)`; how many were granted.
    @discardableResult
    func requests(from: Double, to: Double, every step: Double, sourceLocation: SourceLocation = #_sourceLocation)
      async throws -> Int
    {
      var granted = 0
      var time = from
      while time < to {
        if try await request(at: time, sourceLocation: sourceLocation) { granted += 1 }
        time += step
      }
      return granted
    }
  }

  func withStore(_ body: @Sendable (PostgresRateLimitStore) async throws -> Void) async throws {
    try await TestDatabase.withClients { clients in
      let store = try PostgresRateLimitStore(client: clients[0], table: TestDatabase.uniqueTable("rl"))
      try await store.migrate()
      try await body(store)
    }
  }

  /// The first case: a sliding window's grants count in the fixed window that replaces
  /// it, so the key does not start afresh.
  @Test func aSlidingWindowChangedToAFixedWindowKeepsItsGrants() async throws {
    try await withStore { store async throws in
      let timeline = Timeline(
        store: store, old: .slidingWindow(permits: 3, per: .seconds(10)),
        new: .fixedWindow(permits: 3, per: .seconds(10)),
        change: 6)
      #expect(try await timeline.requests(from: 5, to: 5.3, every: 0.1) == 3)
      #expect(try await timeline.requests(from: 6, to: 10, every: 0.5) == 0)
      #expect(try await timeline.requests(from: 10, to: 20, every: 0.5) == 3)
      #expect(timeline.grants.count == 6)
    }
  }

  /// The second case: ten permits owed at one a second stay ten permits owed at one per
  /// ten seconds.
  @Test func aTokenBucketSlowedDownKeepsThePermitsOwed() async throws {
    try await withStore { store async throws in
      let timeline = Timeline(
        store: store, old: RateLimit(permits: 10, per: .seconds(10), burst: 10),
        new: RateLimit(permits: 1, per: .seconds(10), burst: 10), change: 0.5)
      #expect(try await timeline.requests(from: 0, to: 0.01, every: 0.001) == 10)
      #expect(try await timeline.request(at: 0.5) == false)
      try await timeline.requests(from: 1, to: 200, every: 0.5)
      // From an empty start, 10 now and one per 10 s: no more than the old limit's 1 s debt drained.
      #expect(timeline.grants.count <= 10 + 20 + 1)
    }
  }

  /// A fixed window's count is carried into a longer fixed window that overlaps it, with the old
  /// window before it in the new one assumed used to the full (3 + 3 of 4).
  @Test func aFixedWindowLengthenedCountsTheOverlappingWindow() async throws {
    try await withStore { store async throws in
      let timeline = Timeline(
        store: store, old: .fixedWindow(permits: 3, per: .seconds(10)),
        new: .fixedWindow(permits: 4, per: .seconds(60)),
        change: 12)
      #expect(try await timeline.requests(from: 11, to: 11.3, every: 0.1) == 3)
      #expect(try await timeline.requests(from: 12, to: 60, every: 1) == 0)
      #expect(try await timeline.requests(from: 60, to: 61, every: 0.1) == 4)
    }
  }

  /// Across algorithms both ways: a token bucket's permits owed count in a sliding window, and a
  /// fixed window's count is owed in a token bucket.
  @Test func aChangeOfAlgorithmCarriesTheUseOver() async throws {
    try await withStore { store async throws in
      let first = Timeline(
        store: store, key: "bucket", old: RateLimit(permits: 1, per: .seconds(1), burst: 5),
        new: .slidingWindow(permits: 5, per: .seconds(10)), change: 2)
      #expect(try await first.requests(from: 0, to: 0.5, every: 0.1) == 5)
      try await first.requests(from: 2, to: 30, every: 0.25)
      let second = Timeline(
        store: store, key: "fixed", old: .fixedWindow(permits: 5, per: .seconds(10)),
        new: RateLimit(permits: 1, per: .seconds(2), burst: 5), change: 3)
      #expect(try await second.requests(from: 1, to: 1.5, every: 0.1) == 5)
      try await second.requests(from: 3, to: 40, every: 0.25)
    }
  }

  /// Across algorithms, a new window that looks further back than the old state records: the
  /// old limit's use before it is assumed at its maximum (a sliding log keeps only its window, a
  /// bucket no grant times, a fixed window only its current count).
  @Test func aWindowOfAnotherAlgorithmThatLooksFurtherBackAssumesTheUseTheStateNoLongerRecords() async throws {
    try await withStore { store async throws in
      let sliding = Timeline(
        store: store, key: "sliding", old: .slidingWindow(permits: 2, per: .seconds(3)),
        new: .fixedWindow(permits: 5, per: .seconds(10)), change: 7)
      #expect(try await sliding.requests(from: 0, to: 7, every: 0.1) == 6)
      // [0, 10) had 6 already: nothing more until 10.
      #expect(try await sliding.requests(from: 7, to: 9.95, every: 0.1) == 0)
      #expect(try await sliding.requests(from: 10, to: 10.55, every: 0.1) == 5)
      let bucket = Timeline(
        store: store, key: "bucket", old: RateLimit(permits: 3, per: .seconds(9), burst: 2),
        new: .slidingWindow(permits: 3, per: .seconds(18)), change: 30)
      try await bucket.requests(from: 0, to: 30, every: 0.5)
      try await bucket.requests(from: 30, to: 80, every: 0.5)
      let fixed = Timeline(
        store: store, key: "fixed", old: .fixedWindow(permits: 2, per: .seconds(5)),
        new: RateLimit(permits: 1, per: .seconds(10), burst: 3), change: 21)
      try await fixed.requests(from: 0, to: 21, every: 0.5)
      #expect(try await fixed.requests(from: 21, to: 30, every: 0.5) == 0)
      try await fixed.requests(from: 30, to: 80, every: 0.5)
    }
  }

  /// The third case: 3 per 10 s used to the full for 30 s, then 10 per 60 s. The row
  /// records one old window; the two before it in the new window are assumed used to the full.
  @Test func aLongerFixedWindowWithMorePermitsAssumesTheUseTheRowNoLongerRecords() async throws {
    try await withStore { store async throws in
      let timeline = Timeline(
        store: store, old: .fixedWindow(permits: 3, per: .seconds(10)),
        new: .fixedWindow(permits: 10, per: .seconds(60)), change: 35)
      for start in [0.0, 10, 20] {
        #expect(try await timeline.requests(from: start, to: start + 0.3, every: 0.1) == 3)
      }
      #expect(try await timeline.requests(from: 35, to: 60, every: 0.5) == 0)
      #expect(try await timeline.requests(from: 60, to: 120, every: 0.5) == 10)
    }
  }

  /// A sliding window of 2 per 10 s used to the full, then 10 per 60 s: the log keeps the last
  /// 10 s only; the grants before are assumed at the old limit's maximum.
  @Test func aLongerSlidingWindowWithMorePermitsAssumesTheUseTheLogNoLongerRecords() async throws {
    try await withStore { store async throws in
      let timeline = Timeline(
        store: store, old: .slidingWindow(permits: 2, per: .seconds(10)),
        new: .slidingWindow(permits: 10, per: .seconds(60)), change: 35)
      #expect(try await timeline.requests(from: 0, to: 35, every: 0.5) == 8)
      try await timeline.requests(from: 35, to: 150, every: 0.5)
    }
  }

  /// A token bucket of 1 per second, burst 2, used to the full for 100 s, then 1 per 10 s with a
  /// burst of 5: the new bucket starts empty.
  @Test func aSlowerTokenBucketWithALargerBurstStartsEmpty() async throws {
    try await withStore { store async throws in
      let timeline = Timeline(
        store: store, old: RateLimit(permits: 1, per: .seconds(1), burst: 2),
        new: RateLimit(permits: 1, per: .seconds(10), burst: 5), change: 100.5)
      try await timeline.requests(from: 0, to: 100.5, every: 1)
      #expect(try await timeline.requests(from: 100.5, to: 110, every: 0.5) == 0)
      try await timeline.requests(from: 110, to: 200, every: 0.5)
    }
  }

  /// A key's row idle under its old limit (3 per 10 s, used 15 s ago) is not purged while a limit
  /// the store knows (10 per 60 s, another key's row) would still count its grants: changed to
  /// it, the key counts the old limit's maximum, not a fresh window of 10. In a store that knows
  /// no longer limit, the same row is purged once idle. (The purge reads the real clock, so the
  /// decisions are made just before it.)
  @Test func aRowIdleUnderItsOldLimitIsKeptWhileALimitTheStoreKnowsStillCountsIt() async throws {
    try await TestDatabase.withClients { clients in
      let old = RateLimit.slidingWindow(permits: 3, per: .seconds(10))
      let long = RateLimit.slidingWindow(permits: 10, per: .seconds(60))
      let stores = try [0, 1].map { _ in
        try PostgresRateLimitStore(client: clients[0], table: TestDatabase.uniqueTable("rl"))
      }
      for store in stores { try await store.migrate() }
      let usedAt = Int64(Date().timeIntervalSince1970 * 1_000_000) - 15_000_000
      for store in stores {
        #expect(try await store.tryAcquire("k", cost: 3, limit: old, databaseNow: usedAt).isAllowed)
      }
      #expect(try await stores[0].tryAcquire("other", cost: 1, limit: long, databaseNow: usedAt).isAllowed)
      #expect(try await stores[0].purgeAllExpired() == 0)
      #expect(try await stores[1].purgeAllExpired() == 1)
      var granted = 0
      while try await stores[0].tryAcquire("k", cost: 1, limit: long, databaseNow: usedAt + 15_000_000).isAllowed {
        granted += 1
      }
      // The old limit allows 3 then, the new one 7 over the key's history.
      #expect(granted <= 7)
    }
  }

  /// A plan in the plans table counts as a limit the store knows before any key is decided under
  /// it: a row idle under its old limit is kept while the plan (10 per 60 s) would count its
  /// grants, and purged once the plan is removed.
  @Test func aRowIsKeptWhileAPlanOfThePlansTableWouldStillCountIt() async throws {
    try await TestDatabase.withClients { clients in
      let table = TestDatabase.uniqueTable("rl")
      let store = try PostgresRateLimitStore(client: clients[0], table: table)
      let plans = try PostgresRateLimitPlans(
        client: clients[0], table: table, default: .slidingWindow(permits: 3, per: .seconds(10)))
      try await store.migrate()
      try await plans.migrate()
      try await plans.setLimit(.slidingWindow(permits: 10, per: .seconds(60)), for: "pro")
      let usedAt = Int64(Date().timeIntervalSince1970 * 1_000_000) - 15_000_000
      let old = RateLimit.slidingWindow(permits: 3, per: .seconds(10))
      #expect(try await store.tryAcquire("k", cost: 3, limit: old, databaseNow: usedAt).isAllowed)
      #expect(try await store.purgeAllExpired() == 0)
      #expect(try await plans.removeLimit(for: "pro"))
      #expect(try await store.purgeAllExpired() == 1)
    }
  }

  /// The article's case of several changes within one look-back: sliding 10 per 60 s with 10 taken
  /// at 0, 1 per 10 s from 1 s, 10 per 60 s again from 20 s. The row records only the limit it
  /// was written under (1 per 10 s), so the first limit's 10 at 0 are not in it; it records when
  /// its limit changed, and 10 per 60 s is taken as full then: nothing goes through until that
  /// change has left the window (5 did before).
  @Test func severalChangesWithinOneLookBackCountTheLimitAsFullAtTheEarlierChange() async throws {
    try await withStore { store async throws in
      let limits: [(from: Double, limit: RateLimit)] = [
        (0, .slidingWindow(permits: 10, per: .seconds(60))), (1, .slidingWindow(permits: 1, per: .seconds(10))),
        (20, .slidingWindow(permits: 10, per: .seconds(60))),
      ]
      var grants: [Int64] = []
      var firstUnderTheSecond: Double?
      var time = 0.0
      while time < 120 {
        let inForce = limits.filter { $0.from <= time }
        let t = TestDatabase.microseconds(time)
        if try await store.tryAcquire(
          "k", cost: 1, limit: inForce.last!.limit, databaseNow: TestDatabase.chosenInstant + t
        ).isAllowed {
          #expect(
            inForce.contains { Self.allows($0.limit, grants, at: t) },
            "granted at \(time) s, which no limit in force allows over \(grants.map { Double($0) / 1e6 })")
          if inForce.count == 2, firstUnderTheSecond == nil { firstUnderTheSecond = time }
          grants.append(t)
        }
        time = ((time + (time < 1 ? 0.1 : 0.5)) * 10).rounded() / 10
      }
      let changed = try #require(firstUnderTheSecond)
      #expect(grants.prefix(10).allSatisfy { $0 < TestDatabase.microseconds(1) })
      #expect(
        grants.filter { $0 >= TestDatabase.microseconds(20) && $0 < TestDatabase.microseconds(changed + 60) }.isEmpty)
      #expect(grants.contains { $0 >= TestDatabase.microseconds(changed + 60) })
    }
  }
}
#endif
