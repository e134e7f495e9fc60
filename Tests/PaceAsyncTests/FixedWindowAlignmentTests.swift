import Testing

@testable import Pace

/// Fixed windows start at whole multiples of the window in Unix time on a real clock (as a
/// store's and most APIs' do), at the origin on a test clock; the arithmetic of the phase is
/// exact and never traps at the ends of the timeline.
@Suite struct FixedWindowAlignmentTests {
  /// A timeline whose instant 0 is Unix time 3 ns: windows of 10 ns start at 7, 17, …
  @Test func windowsStartAtWholeMultiplesInUnixTime() {
    let rate = WindowRate(permits: 1, per: .nanoseconds(10), unixNanosecondsAtOrigin: 3)
    #expect(rate.phase == 7)
    var counter = FixedWindowCounter(rate: rate, now: .zero)
    #expect(counter.windowStart == PaceInstant(nanoseconds: -3))
    #expect(counter.nextWindowStart == PaceInstant(nanoseconds: 7))
    var grants: [Bool] = []
    for t: Int64 in [6, 6, 7, 16, 17] {
      grants.append(counter.tryTake(1, now: PaceInstant(nanoseconds: t)))
      if t == 6 && grants.count == 2 { #expect(counter.readyTime(for: 1) == PaceInstant(nanoseconds: 7)) }
    }
    #expect(grants == [true, false, true, false, true])
  }

  /// The phase for every kind of origin: none, before the epoch, on a boundary, at the extremes.
  @Test func thePhaseOfEveryOrigin() {
    func phase(_ origin: Int64?, window: Int64 = 10) -> Int64 {
      WindowRate(permits: 1, per: .nanoseconds(window), unixNanosecondsAtOrigin: origin).phase
    }
    #expect(phase(nil) == 0)
    #expect(phase(0) == 0)
    #expect(phase(20) == 0)
    #expect(phase(-3) == 3)
    #expect(phase(13) == 7)
    #expect(phase(.max) == 10 - Int64.max % 10)
    #expect(phase(.min) == -(Int64.min % 10))
    #expect(phase(.max, window: .max) == 0)
    #expect(phase(.min, window: .max) == 1)
  }

  /// Window indices, starts and ends at the ends of the timeline: saturated or `nil`, never a trap.
  @Test func theEndsOfTheTimeline() {
    let rate = WindowRate(permits: 1, per: .seconds(1), unixNanosecondsAtOrigin: 123_456_789)
    for t in [Int64.min, .min + 1, -1, 0, 1, .max - 1, .max] {
      let counter = FixedWindowCounter(rate: rate, now: PaceInstant(nanoseconds: t))
      #expect(counter.windowStart.nanoseconds <= t)
      if let next = counter.nextWindowStart {
        #expect(next.nanoseconds > t && next.nanoseconds - t <= 1_000_000_000)
        // A window that began before the timeline starts at its start.
        let start = counter.windowStart.nanoseconds
        #expect(start == .min || next.nanoseconds - start == 1_000_000_000)
      } else {
        #expect(t > .max - 1_000_000_000)
      }
    }
  }

  /// A limiter on the continuous clock counts windows of Unix time: a denied request's wait
  /// ends at the next whole second of Unix time (real time: a bound of a generous 100 ms).
  @Test func aLimiterOnARealClockAlignsToUnixTime() {
    let limiter = RateLimiter(limit: .fixedWindow(permits: 1, per: .seconds(1)))
    _ = limiter.tryAcquire(cost: 1) as RateLimitDecision
    guard case .limited(let retryAfter) = limiter.tryAcquire(cost: 1) as RateLimitDecision else {
      Issue.record("a second request in the same window was allowed")
      return
    }
    let unix = unixTimeNanoseconds()
    let untilNextSecond = Duration.nanoseconds(1_000_000_000 - unix % 1_000_000_000)
    #expect(abs((retryAfter - untilNextSecond) / .milliseconds(1)) < 100, "\(retryAfter) vs \(untilNextSecond)")
  }
}
