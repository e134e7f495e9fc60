import Pace
import PaceTestSupport
import Testing

@testable import Pace

/// An ``AdaptiveLimit`` fed through a reference, so that `#expect` can read what `record` returns.
final class Fed {
  var value: AdaptiveLimit
  init(_ value: AdaptiveLimit) { self.value = value }
  @discardableResult
  func record(_ sample: AdaptiveLimitSample, now: PaceInstant) -> Int { value.record(sample, now: now) }
}

/// Each algorithm fed hand-made samples: exact limits after each.
@Suite struct AdaptiveLimitAIMDTests {
  /// A good sample: 20 ms, with `inFlight` in flight.
  func good(_ inFlight: Int) -> AdaptiveLimitSample {
    AdaptiveLimitSample(roundTrip: .milliseconds(20), inFlight: inFlight)
  }

  let drop = AdaptiveLimitSample(roundTrip: .milliseconds(5), inFlight: 1, dropped: true)

  @Test func growsByOnePerRoundOfGoodSamples() {
    let limit = Fed(.aimd(initialLimit: 4, timeout: .milliseconds(30)))
    // A round is `limit` good samples: 4 at limit 4, then 5 at limit 5.
    #expect((1...3).map { _ in limit.record(good(4), now: .zero) } == [4, 4, 4])
    #expect(limit.record(good(4), now: .zero) == 5)
    #expect((1...4).map { _ in limit.record(good(4), now: .zero) } == [5, 5, 5, 5])
    #expect(limit.record(good(4), now: .zero) == 6)
  }

  @Test func aLimitLessThanHalfUsedDoesNotGrow() {
    let limit = Fed(.aimd(initialLimit: 4, timeout: .milliseconds(30)))
    // 1 × 2 < 4: not counted, however many.
    for _ in 0..<100 { #expect(limit.record(good(1), now: .zero) == 4) }
    // 2 × 2 ≥ 4: counted.
    #expect((1...4).map { _ in limit.record(good(2), now: .zero) } == [4, 4, 4, 5])
  }

  @Test func anInFlightCountOfAnySizeIsRead() {
    let limit = Fed(.aimd(initialLimit: 3, timeout: .milliseconds(30)))
    // 1 × 2 < 3; 2 × 2 ≥ 3; Int.max does not overflow.
    #expect(limit.record(good(1), now: .zero) == 3)
    #expect((1...3).map { _ in limit.record(good(2), now: .zero) } == [3, 3, 4])
    #expect((1...4).map { _ in limit.record(good(.max), now: .zero) } == [4, 4, 4, 5])
  }

  @Test func aDropHalvesWithARatioOfOneHalf() {
    let limit = Fed(.aimd(initialLimit: 10, timeout: .milliseconds(30), backoffRatio: 0.5))
    #expect(limit.record(drop, now: .zero) == 5)
  }

  @Test func aDropMultipliesByTheRatioRoundedDown() {
    // ⌊10 × 0.9⌋ = 9; ⌊5 × 0.9⌋ = 4; ⌊2 × 0.9⌋ = 1; 1 stays at the floor of 1.
    for (before, after) in [(10, 9), (5, 4), (2, 1), (1, 1)] {
      let limit = Fed(.aimd(initialLimit: before, timeout: .milliseconds(30), backoffRatio: 0.9))
      #expect(limit.record(drop, now: .zero) == after, "from \(before)")
    }
  }

  @Test func aRoundTripAboveTheTimeoutIsADrop() {
    let limit = Fed(.aimd(initialLimit: 10, timeout: .milliseconds(30), backoffRatio: 0.5))
    // Exactly the timeout is good (counted towards the next increase).
    #expect(limit.record(AdaptiveLimitSample(roundTrip: .milliseconds(30), inFlight: 10), now: .zero) == 10)
    #expect(limit.record(AdaptiveLimitSample(roundTrip: .nanoseconds(30_000_001), inFlight: 10), now: .zero) == 5)
  }

  @Test func theSamplesLetThroughBeforeADecreaseDoNotDecreaseAgain() {
    let limit = Fed(.aimd(initialLimit: 10, timeout: .milliseconds(30), backoffRatio: 0.5))
    #expect(limit.record(drop, now: .zero) == 5)
    // The next 10 samples (the limit before the decrease) were let through under 10: held.
    for _ in 0..<10 { #expect(limit.record(drop, now: .zero) == 5) }
    // The 11th is of the new limit: ⌊5 × 0.5⌋ = 2.
    #expect(limit.record(drop, now: .zero) == 2)
  }

  @Test func goodSamplesCountTowardsAnIncreaseWhileHeld() {
    let limit = Fed(.aimd(initialLimit: 8, timeout: .milliseconds(30), backoffRatio: 0.5))
    #expect(limit.record(drop, now: .zero) == 4)
    #expect((1...4).map { _ in limit.record(good(4), now: .zero) } == [4, 4, 4, 5])
    // Still 4 held samples to go (8 − 4): their drops do nothing.
    #expect((1...4).map { _ in limit.record(drop, now: .zero) } == [5, 5, 5, 5])
    #expect(limit.record(drop, now: .zero) == 2)
  }

  @Test func theFloorHolds() {
    let limit = Fed(.aimd(initialLimit: 4, minimumLimit: 3, timeout: .milliseconds(30), backoffRatio: 0.5))
    #expect(limit.record(drop, now: .zero) == 3)  // ⌊4 × 0.5⌋ = 2, held at 3
    for _ in 0..<100 { #expect(limit.record(drop, now: .zero) == 3) }
  }

  @Test func theCeilingHolds() {
    let limit = Fed(.aimd(initialLimit: 4, maximumLimit: 5, timeout: .milliseconds(30)))
    #expect((1...4).map { _ in limit.record(good(4), now: .zero) } == [4, 4, 4, 5])
    for _ in 0..<100 { #expect(limit.record(good(5), now: .zero) == 5) }
  }

  @Test func aDropRestartsTheRound() {
    let limit = Fed(.aimd(initialLimit: 4, timeout: .milliseconds(30), backoffRatio: 0.5))
    for _ in 0..<3 { limit.record(good(4), now: .zero) }
    #expect(limit.record(drop, now: .zero) == 2)
    // A fresh round of 2 at limit 2.
    #expect((1...2).map { _ in limit.record(good(2), now: .zero) } == [2, 3])
  }
}

@Suite struct AdaptiveLimitGradient2Tests {
  /// Windows of 100 ms; an exponential average over 9 windows moves by 2 / 10 = 0.2 of the gap.
  func gradient2(
    initialLimit: Int = 10, minimumLimit: Int = 1, maximumLimit: Int = 200, tolerance: Double = 1.5,
    smoothing: Double = 0.5, queueSize: Int = 2
  ) -> AdaptiveLimit {
    .gradient2(
      initialLimit: initialLimit, minimumLimit: minimumLimit, maximumLimit: maximumLimit, tolerance: tolerance,
      smoothing: smoothing, queueSize: queueSize, window: .milliseconds(100), longWindow: 9)
  }

  func sample(_ roundTrip: Int, inFlight: Int = 10, dropped: Bool = false) -> AdaptiveLimitSample {
    AdaptiveLimitSample(roundTrip: .milliseconds(roundTrip), inFlight: inFlight, dropped: dropped)
  }

  @Test func aWindowClosesWithTheFirstSampleAtOrAfterItsEnd() {
    let limit = Fed(gradient2())
    #expect(limit.record(sample(20), now: ms(0)) == 10)
    #expect(limit.record(sample(20), now: .init(nanoseconds: 99_999_999)) == 10)
    #expect(limit.value.longRoundTrip == nil)
    // Closes at 100 ms: short = long = 20 ms, gradient min(1, 1.5) = 1;
    // target = 10 + 2 = 12; estimate = 10 × 0.5 + 12 × 0.5 = 11.
    #expect(limit.record(sample(20), now: ms(100)) == 11)
    #expect(limit.value.longRoundTrip == .milliseconds(20))
  }

  @Test func eachWindowOpensWhenTheOneBeforeClosed() {
    let limit = Fed(gradient2())
    limit.record(sample(20), now: ms(0))
    #expect(limit.record(sample(20), now: ms(100)) == 11)  // the first closes; the second opens at 100 ms
    #expect(limit.record(sample(20), now: ms(199)) == 11)
    #expect(limit.record(sample(20), now: ms(200)) == 12)  // 100 ms after it opened
    // After a quiet spell, the window that opened at 200 ms closes with the next sample, alone.
    #expect(limit.record(sample(20), now: ms(5_000)) == 13)
  }

  @Test func aSlowerWindowShrinksTheLimitByTheGradient() {
    let limit = Fed(gradient2())
    limit.record(sample(20), now: ms(0))
    #expect(limit.record(sample(20), now: ms(100)) == 11)
    // The next window opened at 100 ms: 60 ms round trips. long = 20 + (60 − 20) × 0.2 = 28 ms;
    // gradient = 1.5 × 28 / 60 = 0.7; target = 11 × 0.7 + 2 = 9.7; estimate = 5.5 + 4.85 = 10.35.
    #expect(limit.record(sample(60, inFlight: 11), now: ms(150)) == 11)
    #expect(limit.record(sample(60, inFlight: 11), now: ms(200)) == 10)
    #expect(limit.value.longRoundTrip == .milliseconds(28))
  }

  @Test func theGradientIsNeverBelowOneHalf() {
    let limit = Fed(gradient2())
    limit.record(sample(20), now: ms(0))
    limit.record(sample(20), now: ms(100))  // 11
    // 2 s round trips: long = 20 + 1980 × 0.2 = 416 ms; 1.5 × 416 / 2000 = 0.312, held at 0.5:
    // target = 11 × 0.5 + 2 = 7.5; estimate = 5.5 + 3.75 = 9.25.
    #expect(limit.record(sample(2000, inFlight: 11), now: ms(200)) == 9)
  }

  @Test func aLimitLessThanHalfUsedDoesNotMoveButTheBaselineDoes() {
    let limit = Fed(gradient2())
    limit.record(sample(20, inFlight: 4), now: ms(0))
    // 4 × 2 < 10: the limit stays; the baseline is learned.
    #expect(limit.record(sample(20, inFlight: 4), now: ms(100)) == 10)
    #expect(limit.value.longRoundTrip == .milliseconds(20))
    // 5 × 2 ≥ 10: the largest in flight of the window counts.
    limit.record(sample(20, inFlight: 5), now: ms(150))
    #expect(limit.record(sample(20, inFlight: 1), now: ms(200)) == 11)
  }

  @Test func theBaselineComesDownFasterAfterAnOverload() {
    let limit = Fed(gradient2())
    limit.record(sample(100), now: ms(0))
    limit.record(sample(100), now: ms(100))
    #expect(limit.value.longRoundTrip == .milliseconds(100))
    // long = 100 + (20 − 100) × 0.2 = 84 ms, more than twice 20 ms: 84 × 0.9 = 75.6 ms.
    limit.record(sample(20), now: ms(200))
    #expect(limit.value.longRoundTrip == .microseconds(75_600))
  }

  @Test func theFloorAndTheCeilingHold() {
    let low = Fed(gradient2(minimumLimit: 9))
    low.record(sample(20), now: ms(0))
    low.record(sample(20), now: ms(100))  // 11
    // 9.25 as in theGradientIsNeverBelowOneHalf, then 8.16 (long 732.8 ms, gradient 0.5496): held at 9.
    #expect(low.record(sample(2000, inFlight: 11), now: ms(200)) == 9)
    #expect(low.record(sample(2000, inFlight: 11), now: ms(300)) == 9)

    let high = Fed(gradient2(maximumLimit: 12))
    high.record(sample(20), now: ms(0))
    let limits = (1...5).map { high.record(sample(20, inFlight: 12), now: ms(100 * Int64($0))) }
    // 11, 12 (11 + 1), then held at 12.
    #expect(limits == [11, 12, 12, 12, 12])
  }

  @Test func dropsAreNotRead() {
    let dropped = Fed(gradient2())
    let kept = Fed(gradient2())
    for t in stride(from: Int64(0), through: 500, by: 50) {
      dropped.record(sample(20, dropped: true), now: ms(t))
      kept.record(sample(20), now: ms(t))
    }
    #expect(dropped.value == kept.value)
    #expect(dropped.value.limit == 15)  // five windows at the baseline: 11, 12, 13, 14, 15
  }
}

/// Bad settings stop the process with a message naming the type, the parameter, the rule and the value.
@Suite struct AdaptiveLimitPreconditionTests {
  static func message(_ result: ExitTest.Result?) -> String {
    String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
  }

  @Test func anInitialLimitOutsideTheBoundsNamesThem() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = AdaptiveLimit.aimd(initialLimit: 300, timeout: .milliseconds(30))
    }
    #expect(Self.message(result).contains("AdaptiveLimit.aimd: initialLimit must be within 1...200 (got 300)"))
  }

  @Test func aBackoffRatioOfOneIsRefused() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = AdaptiveLimit.aimd(timeout: .milliseconds(30), backoffRatio: 1)
    }
    #expect(Self.message(result).contains("AdaptiveLimit.aimd: backoffRatio must be above 0 and below 1 (got 1.0)"))
  }

  @Test func aToleranceBelowOneIsRefused() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = AdaptiveLimit.gradient2(tolerance: 0.9)
    }
    #expect(Self.message(result).contains("AdaptiveLimit.gradient2: tolerance must be at least 1 (got 0.9)"))
  }

  @Test func theAdaptiveLimitersQueueSettingsNameIt() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = AdaptiveConcurrencyLimiter(.aimd(timeout: .milliseconds(30)), maximumQueued: -1)
    }
    #expect(Self.message(result).contains("AdaptiveConcurrencyLimiter: maximumQueued must not be negative (got -1)"))
  }

  @Test func aCeilingBelowTheFloorIsRefused() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = AdaptiveLimit.gradient2(initialLimit: 5, minimumLimit: 5, maximumLimit: 4)
    }
    #expect(
      Self.message(result).contains("AdaptiveLimit.gradient2: maximumLimit must be at least minimumLimit 5 (got 4)"))
  }
}
