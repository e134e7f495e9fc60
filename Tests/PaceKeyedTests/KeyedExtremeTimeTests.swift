import Foundation
import PaceTestSupport
import Testing

@testable import Pace

/// Durations beyond `Int64.max` seconds, which a `Duration` can hold and `Duration.components`
/// cannot: the keyed primitives saturate them at the end of the timeline exactly as the
/// single-key ones do, instead of trapping.
@Suite(.timeLimit(.minutes(3))) struct KeyedExtremeTimeTests {
  static let beyond = Duration.seconds(Int64.max) + .seconds(1)

  @Test func durationsBeyondInt64SecondsSaturate() {
    #expect(Self.beyond.paceNanoseconds == .max)
    #expect((Duration.seconds(Int64.max) * 4).paceNanoseconds == .max)
    #expect((Duration.zero - Duration.seconds(Int64.max) * 4).paceNanoseconds == .min)
    #expect(Duration.nanoseconds(Int64.max).paceNanoseconds == .max)
    #expect(Duration.nanoseconds(Int64.max - 1).paceNanoseconds == Int64.max - 1)
    #expect(Duration.nanoseconds(Int64.min + 1).paceNanoseconds == Int64.min + 1)
    #expect((Duration.seconds(9) + .nanoseconds(0.9)).paceNanoseconds == 9_000_000_000)
  }

  @Test func aKeyedThrottlerWithAWindowBeyondTheTimelineLeadsOnceLikeAThrottler() {
    let scheduler = TestScheduler()
    let keyed = Recorder<Int>(clock: scheduler)
    let single = Recorder<Int>(clock: scheduler)
    let throttler = KeyedThrottler<Int, Int>(for: Self.beyond, scheduler: scheduler) { _, value in keyed.record(value) }
    let reference = Throttler<Int>(for: Self.beyond, scheduler: scheduler) { single.record($0) }
    for value in 1...3 {
      throttler.call(7, value)
      reference.call(value)
      scheduler.advance(by: .seconds(1))
    }
    scheduler.advance(by: .seconds(Int64.max))
    #expect(keyed.values == single.values)
    #expect(keyed.values.first == 1)
  }

  @Test func aKeyedDebouncerWithAMaxWaitBeyondTheTimelineIgnoresItLikeADebouncer() {
    let scheduler = TestScheduler()
    let keyed = Recorder<Int>(clock: scheduler)
    let single = Recorder<Int>(clock: scheduler)
    let maximumWait = Duration.seconds(Int64.max) * 2
    let debouncer = KeyedDebouncer<Int, Int>(for: .seconds(1), maximumWait: maximumWait, scheduler: scheduler) {
      _, value in
      keyed.record(value)
    }
    let reference = Debouncer<Int>(for: .seconds(1), maximumWait: maximumWait, scheduler: scheduler) {
      single.record($0)
    }
    debouncer.call(7, 1)
    reference.call(1)
    scheduler.advance(by: .seconds(2))
    #expect(keyed.entriesWithTimes.map(\.time) == [ms(1_000)])
    #expect(keyed.values == single.values)
  }

  @Test func aKeyedRateLimiterWithAPeriodBeyondTheTimelineGrantsItsBurstOnce() {
    let scheduler = TestScheduler()
    let limiter = KeyedRateLimiter<Int>(permits: 1, per: .seconds(Int64.max) * 4, clock: scheduler)
    #expect(limiter.tryAcquire(7).isAllowed)
    #expect(!limiter.tryAcquire(7).isAllowed)
    scheduler.advance(by: .seconds(1_000_000_000))
    #expect(!limiter.tryAcquire(7).isAllowed)
    // A permit comes back after the emission interval, saturated at Int64.max ns: the timeline's end.
    scheduler.advance(by: .seconds(Int64.max))
    #expect(limiter.tryAcquire(7).isAllowed)
  }

  /// Where a bucket's capacity saturates 64 bits, both rate limiters report the same permits:
  /// for a key never seen, after a query (cost 0), and after taking one.
  @Test(arguments: [
    (1, Duration.seconds(365 * 86_400), 300),
    (2, Duration.nanoseconds(Int64.max), 2),
    (Int.max, Duration.seconds(1), Int.max),
    (3, Duration.seconds(1), 3),
  ])
  func bothRateLimitersReportTheSamePermitsAtEveryLimit(permits: Int, interval: Duration, burst: Int) {
    let scheduler = TestScheduler()
    let single = RateLimiter(permits: permits, per: interval, burst: burst, clock: scheduler)
    let keyed = KeyedRateLimiter<Int>(permits: permits, per: interval, burst: burst, clock: scheduler)
    #expect(keyed.availablePermits(for: 1) == single.availablePermits)
    #expect(keyed.tryAcquire(1, cost: 0) == .allowed(remaining: single.availablePermits))
    #expect(single.tryAcquire().isAllowed)
    #expect(keyed.tryAcquire(1, cost: 1) == .allowed(remaining: single.availablePermits))
    #expect(keyed.availablePermits(for: 1) == single.availablePermits)
  }

  /// Keyed pacers serve servers: by default they run on a queue of their own, which needs no main
  /// run loop (a test process serves none).
  @Test func theDefaultSchedulerIsNotTheMainQueue() async throws {
    let ran = AsyncStream<Bool>.makeStream()
    let debouncer = KeyedDebouncer<Int, Int>(for: .milliseconds(1)) { _, _ in
      ran.continuation.yield(Thread.isMainThread)
    }
    debouncer.call(1, 1)
    var onMain: Bool?
    for await value in ran.stream {  // real-time: a real queue; the time limit bounds it
      onMain = value
      break
    }
    #expect(onMain == false)
    let throttled = AsyncStream<Bool>.makeStream()
    let throttler = KeyedThrottler<Int, Int>(for: .milliseconds(1)) { _, _ in
      throttled.continuation.yield(Thread.isMainThread)
    }
    throttler.call(1, 1)
    for await value in throttled.stream {
      #expect(value == false)
      break
    }
  }
}
