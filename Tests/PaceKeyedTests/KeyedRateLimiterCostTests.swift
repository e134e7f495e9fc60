import PaceTestSupport
import Testing

@testable import Pace

/// The cost rule at its edges, for `tryAcquire`, `decide` and `acquire`, in memory and with a
/// store: a cost of 0 gets cost 1's answer and takes nothing, a cost above the burst is never
/// granted and takes nothing, a negative cost is an error from the throwing calls.
@Suite(.timeLimit(.minutes(1))) struct KeyedRateLimiterCostTests {
  let scheduler = TestScheduler()

  /// A store that decides with an in-memory limiter, and counts what it is asked.
  final class FakeStore: RateLimitStore {
    let local: KeyedRateLimiter<String>
    let asked = LockedState(0)

    init(limit: RateLimit, clock: TestScheduler) {
      local = KeyedRateLimiter(limit: limit, clock: clock)
    }

    func tryAcquire(_ key: String, cost: Int, limit: RateLimit) async throws -> RateLimitDecision {
      asked.withLock { $0 += 1 }
      return try await local.decide(key, cost: cost)
    }
  }

  static let limit = RateLimit(permits: 2, per: .seconds(1), burst: 3)

  /// An in-memory limiter, and one over a fake store, each with "k" exhausted at 0.
  func limiters() async throws -> [(String, KeyedRateLimiter<String>, FakeStore?)] {
    let memory = KeyedRateLimiter<String>(limit: Self.limit, clock: scheduler)
    let store = FakeStore(limit: Self.limit, clock: scheduler)
    let backed: KeyedRateLimiter<String> = .legacy(limit: Self.limit, clock: scheduler, store: store)
    for limiter in [memory, backed] { #expect(try await limiter.decide("k", cost: 3) == .allowed(remaining: 0)) }
    return [("in memory", memory, nil), ("with a store", backed, store)]
  }

  @Test func aCostOfZeroOnAnExhaustedKeyIsLimited() async throws {
    for (name, limiter, _) in try await limiters() {
      #expect(try await limiter.decide("k", cost: 0) == .limited(retryAfter: .milliseconds(500)), "\(name)")
      #expect(try await limiter.decide("other", cost: 0) == .allowed(remaining: 3), "\(name)")
    }
    let memory = KeyedRateLimiter<String>(limit: Self.limit, clock: scheduler)
    #expect(memory.tryAcquire("k", cost: 3) == .allowed(remaining: 0))
    #expect(memory.tryAcquire("k", cost: 0) == .limited(retryAfter: .milliseconds(500)))
    scheduler.advance(by: .milliseconds(500))
    // Allowed as cost 1 would be, and nothing taken.
    #expect(memory.tryAcquire("k", cost: 0) == .allowed(remaining: 1))
    #expect(memory.tryAcquire("k", cost: 0) == .allowed(remaining: 1))
    #expect(memory.availablePermits(for: "k") == 1)
  }

  @Test(arguments: [4, Int.max])
  func aCostAboveTheBurstIsNeverGrantedAndTakesNothing(cost: Int) async throws {
    for (name, limiter, store) in try await limiters() {
      let asked = store?.asked.withLock { $0 }
      await #expect(throws: InvalidInput.costAboveBurst(cost: cost, burst: 3), "\(name)") {
        try await limiter.decide("fresh", cost: cost)
      }
      await #expect(throws: InvalidInput.costAboveBurst(cost: cost, burst: 3), "\(name)") {
        try await limiter.acquire("fresh", cost: cost)
      }
      // Refused before the store is asked.
      #expect(store?.asked.withLock { $0 } == asked, "\(name)")
      // The synchronous decision answers it, on a fresh key and on an exhausted one alike.
      #expect(limiter.tryAcquire("fresh", cost: cost) == .limited(retryAfter: RateLimitDecision.never), "\(name)")
      #expect(limiter.tryAcquire("k", cost: cost) == .limited(retryAfter: RateLimitDecision.never), "\(name)")
      #expect(try await limiter.decide("fresh", cost: 3) == .allowed(remaining: 0), "\(name)")
    }
  }

  @Test(arguments: [-1, Int.min])
  func aNegativeCostIsAnErrorFromTheThrowingCalls(cost: Int) async throws {
    for (name, limiter, store) in try await limiters() {
      let asked = store?.asked.withLock { $0 }
      await #expect(throws: InvalidInput.negativeCost(cost), "\(name)") { try await limiter.decide("k", cost: cost) }
      await #expect(throws: InvalidInput.negativeCost(cost), "\(name)") { try await limiter.acquire("k", cost: cost) }
      #expect(store?.asked.withLock { $0 } == asked, "\(name)")
    }
  }

  /// In memory, `acquire(cost: 0)` waits as `acquire(cost: 1)` would, in its turn, and takes
  /// nothing: the request behind it gets the permit.
  @Test func anAcquireOfZeroWaitsForOnePermitAndTakesNothing() async throws {
    let limiter = KeyedRateLimiter<String>(limit: Self.limit, clock: scheduler)
    #expect(limiter.tryAcquire("k", cost: 3) == .allowed(remaining: 0))
    let query = await startRequest(waitingCount: { limiter.waitingCount }) { try await limiter.acquire("k", cost: 0) }
    let request = await startRequest(waitingCount: { limiter.waitingCount }) { try await limiter.acquire("k", cost: 1) }
    #expect(limiter.waitingCount == 2)
    scheduler.advance(to: ms(499))
    #expect(limiter.waitingCount == 2)
    scheduler.advance(to: ms(500))
    try await query.value
    try await request.value
    #expect(limiter.waitingCount == 0)
    #expect(limiter.availablePermits(for: "k") == 0)
  }

  /// The same edges on every policy's reference model, for the synchronous and throwing calls.
  @Test func theInMemoryAnswersAreTheReferenceModels() async throws {
    var model = RateLimitReferenceModel(limit: Self.limit)
    let limiter = KeyedRateLimiter<String>(limit: Self.limit, clock: scheduler)
    for (time, cost) in [(0, 3), (0, 0), (0, 4), (200, 0), (500, 0), (500, 1), (500, Int.max), (900, 0), (1_000, 2)] {
      scheduler.advance(to: ms(Int64(time)))
      #expect(
        limiter.tryAcquire("k", cost: cost) == model.tryAcquire(cost: cost, at: ms(Int64(time))), "\(time) ms, \(cost)")
    }
  }
}
