import PaceTestSupport
import Testing

@testable import Pace

/// `RateLimiter` and its machine against `RateLimitReferenceModel`, the definitions written the
/// slow and obvious way, on thousands of seeded random timelines for every policy: the same
/// decisions, the same `retryAfter`, the same permits left, the same grant instants.
@Suite(.offThePool) struct RateLimiterReferenceModelTests {
  static let policies: [RateLimit.Algorithm] = [.tokenBucket, .slidingWindow, .fixedWindow]

  /// A random limit of `policy`: small counts and intervals from 1 ns to a second, so that the
  /// timelines cross many windows and refills.
  static func limit(_ policy: RateLimit.Algorithm, _ random: inout SeededGenerator) -> RateLimit {
    let permits = Int.random(in: 1...5, using: &random)
    let interval = [
      Duration.nanoseconds(1), .nanoseconds(7), .milliseconds(7), .milliseconds(100), .milliseconds(300),
      .seconds(1),
    ].randomElement(using: &random)!
    switch policy {
    case .tokenBucket: return RateLimit(permits: permits, per: interval, burst: Int.random(in: 1...6, using: &random))
    case .slidingWindow: return .slidingWindow(permits: permits, per: interval)
    case .fixedWindow: return .fixedWindow(permits: permits, per: interval)
    }
  }

  /// A gap between two requests: often none, often a few nanoseconds or milliseconds.
  static func gap(_ random: inout SeededGenerator) -> Duration {
    [
      Duration.zero, .zero, .nanoseconds(1), .nanoseconds(3), .milliseconds(1), .milliseconds(10), .milliseconds(50),
      .milliseconds(100), .milliseconds(333), .seconds(1),
    ].randomElement(using: &random)!
  }

  /// Where the timeline starts: the origin, before it, or far from it.
  static func start(_ random: inout SeededGenerator) -> PaceInstant {
    PaceInstant(nanoseconds: [0, -1, -1_234_567_891, 86_400_000_000_123].randomElement(using: &random)!)
  }

  static func cost(burst: Int, _ random: inout SeededGenerator) -> Int {
    [0, 1, 1, 1, 2, burst, burst, burst + 1, .max].randomElement(using: &random)!
  }

  @Test(arguments: policies)
  func tryAcquireMatchesTheModel(policy: RateLimit.Algorithm) async {
    for seed in 0..<UInt64(fuzzRuns(1_000)) {
      if seed % 100 == 0 { await Task.yield() }
      var random = SeededGenerator(seed: seed)
      let limit = Self.limit(policy, &random)
      let start = Self.start(&random)
      let scheduler = TestScheduler(now: start)
      let limiter = RateLimiter(limit: limit, clock: scheduler)
      var model = RateLimitReferenceModel(limit: limit, start: start)
      for step in 0..<Int.random(in: 1...80, using: &random) {
        scheduler.advance(by: Self.gap(&random))
        let cost = Self.cost(burst: limit.burst, &random)
        let context = "seed \(seed), \(limit), step \(step), cost \(cost) at \(scheduler.now)"
        #expect(limiter.tryAcquire(cost: cost) == model.tryAcquire(cost: cost, at: scheduler.now), "\(context)")
        #expect(limiter.availablePermits == model.availablePermits(at: scheduler.now), "\(context)")
      }
    }
  }

  /// FIFO waiting with mixed costs, cancellation aside: each request of a random timeline is
  /// granted by the machine (its timer fired at exactly each `wakeAt`) at the instant the model
  /// says, and the throwing decision agrees with the rule for every cost.
  @Test(arguments: policies)
  func waitingRequestsAreGrantedWhenTheModelSays(policy: RateLimit.Algorithm) async {
    for seed in 0..<UInt64(fuzzRuns(1_000)) {
      if seed % 100 == 0 { await Task.yield() }
      var random = SeededGenerator(seed: seed &+ 1_000_003)
      let limit = Self.limit(policy, &random)
      var now = Self.start(&random)
      var machine = RateLimitMachine(counter: RateLimitCounter(limit: limit, now: now))
      var model = RateLimitReferenceModel(limit: limit, start: now)
      var wakeAt: PaceInstant?
      var granted: [UInt64: PaceInstant] = [:]
      var expected: [UInt64: PaceInstant] = [:]
      func record(_ action: RateLimitAction, at instant: PaceInstant) {
        for id in action.granted { granted[id] = instant }
        wakeAt = action.wakeAt
      }
      for id in UInt64(1)...UInt64.random(in: 1...40, using: &random) {
        now = now.advanced(by: Self.gap(&random))
        // The timer fires at each deadline up to now.
        while let deadline = wakeAt, deadline <= now { record(machine.timerFired(now: deadline), at: deadline) }
        let cost = Int.random(in: 0...limit.burst, using: &random)
        expected[id] = try? model.acquire(cost: cost, at: now)
        record(machine.enqueue(id: id, cost: cost, now: now), at: now)
      }
      while let deadline = wakeAt { record(machine.timerFired(now: deadline), at: deadline) }
      #expect(granted == expected, "seed \(seed), \(limit)")
      #expect(!machine.isWaiting, "seed \(seed)")
    }
  }

  @Test(arguments: policies)
  func decideThrowsForTheCostsNoWaitGrants(policy: RateLimit.Algorithm) {
    var random = SeededGenerator(seed: 7)
    let limit = Self.limit(policy, &random)
    var model = RateLimitReferenceModel(limit: limit)
    #expect(throws: InvalidInput.negativeCost(-1)) { try model.decide(cost: -1, at: .zero) }
    #expect(throws: InvalidInput.costAboveBurst(cost: limit.burst + 1, burst: limit.burst)) {
      try model.decide(cost: limit.burst + 1, at: .zero)
    }
    #expect(throws: InvalidInput.costAboveBurst(cost: .max, burst: limit.burst)) {
      try model.decide(cost: .max, at: .zero)
    }
    #expect((try? model.decide(cost: 0, at: .zero)) == .allowed(remaining: limit.burst))
  }

  /// The model itself, on the issue's example: 3 in any 10 s grants at 0, 0, 0, then 10 s.
  @Test func theModelGrantsTheIssuesExample() throws {
    var model = RateLimitReferenceModel(limit: .slidingWindow(permits: 3, per: .seconds(10)))
    let times = try (1...5).map { _ in try model.acquire(cost: 1, at: .zero) }
    #expect(times == [.zero, .zero, .zero, PaceInstant(.seconds(10)), PaceInstant(.seconds(10))])
    var bucket = RateLimitReferenceModel(limit: RateLimit(permits: 3, per: .seconds(10)))
    let bucketTimes = try (1...5).map { _ in try bucket.acquire(cost: 1, at: .zero) }
    #expect(bucketTimes.map(\.nanoseconds) == [0, 0, 0, 3_333_333_334, 6_666_666_667])
  }
}
