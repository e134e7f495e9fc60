import PaceTestSupport
import Testing

@testable import Pace

/// `RateLimiter` and one key of `KeyedRateLimiter` run the same machine, so they answer alike:
/// at the limits where the bucket's capacity saturates 64 bits, for intervals beyond
/// `Int64.max` seconds, and on random timelines.
@Suite(.timeLimit(.minutes(1))) struct RateLimitersAgreeTests {
  @Test(arguments: [
    (1, Duration.seconds(365 * 86_400), 300, 292),
    (2, Duration.nanoseconds(Int64.max), 2, 1),
    (Int.max, Duration.seconds(1), Int.max, 9_223_372_036),
  ])
  func bothReportAFullBucketsPermitsAtTheIssuesLimits(permits: Int, interval: Duration, burst: Int, full: Int) {
    let scheduler = TestScheduler()
    let single = RateLimiter(permits: permits, per: interval, burst: burst, clock: scheduler)
    let keyed = KeyedRateLimiter<Int>(permits: permits, per: interval, burst: burst, clock: scheduler)
    #expect(single.availablePermits == full)
    #expect(keyed.availablePermits(for: 1) == full)
    #expect(single.tryAcquire(cost: 0) == .allowed(remaining: full))
    #expect(keyed.tryAcquire(1, cost: 0) == .allowed(remaining: full))
    #expect(single.tryAcquire(cost: full) == .allowed(remaining: 0))
    #expect(keyed.tryAcquire(1, cost: full) == .allowed(remaining: 0))
    let refused = single.tryAcquire()
    #expect(!refused.isAllowed)
    #expect(keyed.tryAcquire(1) == refused)
  }

  @Test(arguments: [Duration.seconds(Int64.max) * 4, .seconds(Int64.max) + .seconds(1)])
  func bothSaturateAnIntervalBeyondInt64MaxSeconds(interval: Duration) {
    let scheduler = TestScheduler()
    let single = RateLimiter(permits: 1, per: interval, burst: 2, clock: scheduler)
    let keyed = KeyedRateLimiter<Int>(permits: 1, per: interval, burst: 2, clock: scheduler)
    // A burst of 2 saturated intervals is more than 64 bits count: a full bucket holds 1.
    #expect(single.availablePermits == 1)
    #expect(keyed.availablePermits(for: 7) == 1)
    #expect(single.tryAcquire() == .allowed(remaining: 0))
    #expect(keyed.tryAcquire(7) == .allowed(remaining: 0))
    // One permit a saturated interval, Int64.max ns: the end of the timeline.
    #expect(single.tryAcquire() == .limited(retryAfter: .nanoseconds(Int64.max)))
    #expect(keyed.tryAcquire(7) == .limited(retryAfter: .nanoseconds(Int64.max)))
    scheduler.advance(by: .seconds(Int64.max))
    #expect(single.tryAcquire() == .allowed(remaining: 0))
    #expect(keyed.tryAcquire(7) == .allowed(remaining: 0))
  }

  /// Random costs and pauses, decided by both limiters at the same instants.
  @Test(arguments: 0..<20)
  func bothDecideAlikeOnRandomTimelines(seed: UInt64) {
    var random = SeededGenerator(seed: seed)
    let permits = [1, 3, 7, Int.max].randomElement(using: &random)!
    let interval = [Duration.nanoseconds(1), .milliseconds(300), .seconds(1), .seconds(Int64.max)]
      .randomElement(using: &random)!
    let burst = [1, permits, 10].randomElement(using: &random)!
    let scheduler = TestScheduler()
    let single = RateLimiter(permits: permits, per: interval, burst: burst, clock: scheduler)
    let keyed = KeyedRateLimiter<Int>(permits: permits, per: interval, burst: burst, clock: scheduler)
    for _ in 0..<200 {
      let cost = [0, 1, 2, burst, 13].randomElement(using: &random)!
      #expect(keyed.tryAcquire(1, cost: cost) == single.tryAcquire(cost: cost))
      #expect(keyed.availablePermits(for: 1) == single.availablePermits)
      scheduler.advance(by: .milliseconds(Int64.random(in: 0...200, using: &random)))
    }
  }

  #if compiler(>=6.2)  // Task.immediate
  /// Waiting requests, cancellations, refusals and pauses, on both limiters at the same instants:
  /// the same requests wait, and the same permits remain, after every step.
  @Test(arguments: 0..<10)
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  func bothQueueAndGrantAlikeOnRandomTimelines(seed: UInt64) async {
    var random = SeededGenerator(seed: seed)
    let scheduler = TestScheduler()
    let single = RateLimiter(permits: 3, per: .milliseconds(100), burst: 5, clock: scheduler)
    let keyed = KeyedRateLimiter<Int>(permits: 3, per: .milliseconds(100), burst: 5, clock: scheduler)
    var requests: [(Task<Void, any Error>, Task<Void, any Error>)] = []
    for _ in 0..<200 {
      let cost = Int.random(in: 0...7, using: &random)
      switch Int.random(in: 0..<5, using: &random) {
      case 0, 1:
        requests.append(
          (
            Task.immediate { try await single.acquire(cost: cost) },
            Task.immediate { try await keyed.acquire(1, cost: cost) }
          ))
      case 2:
        guard let (first, second) = requests.randomElement(using: &random) else { break }
        first.cancel()
        second.cancel()
      case 3:
        #expect(keyed.tryAcquire(1, cost: cost) == single.tryAcquire(cost: cost))
      default:
        scheduler.advance(by: .milliseconds(Int64.random(in: 0...150, using: &random)))
      }
      #expect(keyed.waitingCount == single.waitingCount)
      #expect(keyed.availablePermits(for: 1) == single.availablePermits)
    }
    for (first, second) in requests {
      first.cancel()
      second.cancel()
    }
    for (first, second) in requests {
      _ = await first.result
      _ = await second.result
    }
    #expect(keyed.waitingCount == 0)
    #expect(single.waitingCount == 0)
  }
  #endif
}
