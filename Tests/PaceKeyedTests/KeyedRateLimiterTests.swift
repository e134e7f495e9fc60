import PaceTestSupport
import Testing

@testable import Pace

/// `KeyedRateLimiter` on virtual time, in memory and over a fake store.
@Suite(.timeLimit(.minutes(3))) struct KeyedRateLimiterTests {
  let scheduler = TestScheduler()

  @Test func decisionsSayWhatRemainsAndWhenToRetry() {
    let limiter = KeyedRateLimiter<String>(permits: 100, per: .seconds(60), burst: 20, clock: scheduler)
    for remaining in (0..<20).reversed() {
      #expect(limiter.tryAcquire("api-key-42") == .allowed(remaining: remaining))
    }
    // One permit comes back every 600 ms.
    #expect(limiter.tryAcquire("api-key-42") == .limited(retryAfter: .milliseconds(600)))
    #expect(limiter.tryAcquire("other") == .allowed(remaining: 19))
    scheduler.advance(by: .milliseconds(599))
    #expect(limiter.tryAcquire("api-key-42") == .limited(retryAfter: .milliseconds(1)))
    scheduler.advance(by: .milliseconds(1))
    #expect(limiter.tryAcquire("api-key-42") == .allowed(remaining: 0))
    // A query on an exhausted key gets the answer a cost of 1 would get.
    #expect(limiter.tryAcquire("api-key-42", cost: 0) == .limited(retryAfter: .milliseconds(600)))
    // "other" took one permit at 0 ms; its bucket was full again at 600 ms, so it was forgotten.
    #expect(limiter.trackedKeyCount == 1)
    // A full bucket is forgotten.
    scheduler.advance(by: .seconds(12))
    #expect(limiter.trackedKeyCount == 0)
    #expect(scheduler.pendingDeadlines.isEmpty)
    #expect(limiter.heldStorageBytes == 0)
    #expect(limiter.availablePermits(for: "api-key-42") == 20)
  }

  @Test func theAsyncOverloadGivesTheSameDecisionInMemory() async throws {
    let limiter = KeyedRateLimiter<Int>(permits: 1, per: .seconds(1), clock: scheduler)
    #expect(try await limiter.decide(1) == .allowed(remaining: 0))
    #expect(try await limiter.decide(1) == .limited(retryAfter: .seconds(1)))
  }

  /// `tryAcquire` on a limiter made with a store (deprecated) cannot wait for the store: it decides in this
  /// process's memory under the same limit (as the `.fallback` policy does), never asks the store,
  /// and never traps; `decide` asks the store.
  @Test func theSynchronousDecisionOfAStoreBackedLimiterIsTheProcesssOwn() async throws {
    final class Store: RateLimitStore {
      let asked = LockedState(0)
      func tryAcquire(_ key: Int, cost: Int, limit: RateLimit) async throws -> RateLimitDecision {
        asked.withLock { $0 += 1 }
        return .limited(retryAfter: .seconds(7))
      }
    }
    let store = Store()
    let limiter: KeyedRateLimiter<Int> = .legacy(permits: 2, per: .seconds(1), clock: scheduler, store: store)
    #expect(limiter.tryAcquire(1) == .allowed(remaining: 1))
    #expect(limiter.tryAcquire(1) == .allowed(remaining: 0))
    #expect(limiter.tryAcquire(1) == .limited(retryAfter: .milliseconds(500)))
    #expect(store.asked.withLock { $0 } == 0)
    #expect(try await limiter.decide(1) == .limited(retryAfter: .seconds(7)))
    #expect(store.asked.withLock { $0 } == 1)
  }

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func acquireWaitsItsTurnInOrderPerKey() async throws {
    let limiter = KeyedRateLimiter<Int>(permits: 10, per: .seconds(1), clock: scheduler)
    #expect(try await limiter.decide(1, cost: 10).isAllowed)
    let large = Task.immediate { try await limiter.acquire(1, cost: 5) }
    let small = Task.immediate { try await limiter.acquire(1, cost: 1) }
    try await limiter.acquire(2)  // another key is not held up
    scheduler.advance(to: ms(100))
    #expect(limiter.waitingCount == 2)
    #expect(limiter.waitingCount(for: 1) == 2 && limiter.waitingCount(for: 2) == 0)
    #expect(try await !limiter.decide(1).isAllowed)  // nor does tryAcquire overtake
    scheduler.advance(to: ms(500))
    try await large.value
    #expect(limiter.waitingCount == 1 && limiter.waitingCount(for: 1) == 1)
    scheduler.advance(to: ms(599))
    #expect(limiter.waitingCount == 1)
    scheduler.advance(to: ms(600))
    try await small.value
    #expect(limiter.waitingCount == 0 && limiter.waitingCount(for: 1) == 0)
    scheduler.advance(by: .seconds(2))
    #expect(limiter.trackedKeyCount == 0)
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func aKeyBesideAnotherKeysWaiterInItsShardIsDecidedByItsOwnBucket() async throws {
    // A decision looks the queues up only in a shard that holds one: `neighbour` shares key 1's
    // shard, so its decisions take that branch while key 1 waits, and find no queue of their own.
    let shard = KeyedRateLimiter<Int>.shardIndex(hash: 1.hashValue)
    let neighbour = (2...).first { KeyedRateLimiter<Int>.shardIndex(hash: $0.hashValue) == shard }!
    let limiter = KeyedRateLimiter<Int>(permits: 10, per: .seconds(1), clock: scheduler)
    #expect(limiter.tryAcquire(1, cost: 10) == .allowed(remaining: 0))
    let waiter = Task.immediate { try await limiter.acquire(1) }
    #expect(limiter.waitingCount(for: 1) == 1)
    #expect(limiter.tryAcquire(neighbour, cost: 9) == .allowed(remaining: 1))  // a new key
    #expect(limiter.tryAcquire(neighbour) == .allowed(remaining: 0))  // an existing one
    #expect(limiter.tryAcquire(neighbour) == .limited(retryAfter: .milliseconds(100)))
    #expect(limiter.tryAcquire(neighbour, cost: 0) == .limited(retryAfter: .milliseconds(100)))
    // Key 1's own decisions wait behind its request: its permit at 100 ms, theirs at 200.
    #expect(limiter.tryAcquire(1) == .limited(retryAfter: .milliseconds(200)))
    scheduler.advance(to: ms(100))
    try await waiter.value
    #expect(limiter.waitingCount == 0)
    #expect(limiter.tryAcquire(neighbour) == .allowed(remaining: 0))
    #expect(limiter.tryAcquire(1) == .limited(retryAfter: .milliseconds(100)))
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func aCancelledAcquireThrowsAndTakesNothing() async throws {
    let limiter = KeyedRateLimiter<Int>(permits: 10, per: .seconds(1), clock: scheduler)
    #expect(try await limiter.decide(1, cost: 10).isAllowed)
    let large = Task.immediate { try await limiter.acquire(1, cost: 5) }
    let small = Task.immediate { try await limiter.acquire(1, cost: 1) }
    scheduler.advance(to: ms(100))
    large.cancel()
    await #expect(throws: CancellationError.self) { try await large.value }
    try await small.value  // its permit was already there
    #expect(limiter.waitingCount == 0)
    #expect(limiter.availablePermits(for: 1) == 0)
  }
  #endif

  /// A store that decides with one in-memory limiter per key, and counts what it is asked.
  final class FakeStore: RateLimitStore {
    let local: KeyedRateLimiter<String>
    let asked = LockedState<[RateLimit]>([])

    init(clock: TestScheduler) {
      local = KeyedRateLimiter(permits: 2, per: .seconds(1), clock: clock)
    }

    func tryAcquire(_ key: String, cost: Int, limit: RateLimit) async throws -> RateLimitDecision {
      asked.withLock { $0.append(limit) }
      return decide(key, cost: cost)
    }

    /// Synchronous, so that it calls the in-memory limiter's synchronous decision.
    private func decide(_ key: String, cost: Int) -> RateLimitDecision {
      local.tryAcquire(key, cost: cost)
    }
  }

  @Test func aStoreBackedLimiterAsksTheStore() async throws {
    let store = FakeStore(clock: scheduler)
    let limiter: KeyedRateLimiter<String> = .legacy(permits: 2, per: .seconds(1), clock: scheduler, store: store)
    #expect(try await limiter.decide("k") == .allowed(remaining: 1))
    #expect(try await limiter.decide("k") == .allowed(remaining: 0))
    #expect(try await limiter.decide("k") == .limited(retryAfter: .milliseconds(500)))
    #expect(store.asked.withLock { $0 } == Array(repeating: RateLimit(permits: 2, per: .seconds(1)), count: 3))
    #expect(limiter.trackedKeyCount == 0)  // the state is the store's
  }
}
