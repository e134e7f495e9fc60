import PaceTesting
import Testing

@testable import Pace

/// The token bucket's arithmetic, driven directly.
@Suite struct TokenBucketTests {
  @Test func startsFullAndRefillsAtTheExactRate() {
    var bucket = TokenBucket(permits: 3, per: .seconds(1), burst: 3, now: .zero)
    #expect(bucket.availablePermits == 3)
    bucket.take(3)
    #expect(!bucket.canTake(1))
    // One permit every 333,333,333⅓ ns: the first is ready at the next whole nanosecond.
    #expect(bucket.readyTime(for: 1) == PaceInstant(nanoseconds: 333_333_334))
    bucket.refill(now: PaceInstant(nanoseconds: 333_333_333))
    #expect(!bucket.canTake(1))
    bucket.refill(now: PaceInstant(nanoseconds: 333_333_334))
    #expect(bucket.canTake(1))
    // No drift: three permits take exactly one second.
    bucket.refill(now: PaceInstant(nanoseconds: 999_999_999))
    #expect(bucket.availablePermits == 2)
    bucket.refill(now: PaceInstant(nanoseconds: 1_000_000_000))
    #expect(bucket.availablePermits == 3)
  }

  @Test func neverHoldsMoreThanTheBurst() {
    var bucket = TokenBucket(permits: 10, per: .seconds(1), burst: 4, now: .zero)
    bucket.refill(now: PaceInstant(.seconds(3600)))
    #expect(bucket.availablePermits == 4)
    bucket.refill(now: PaceInstant(nanoseconds: .max))
    #expect(bucket.availablePermits == 4)
  }

  @Test func aRequestLargerThanTheBurstWaitsForAFullBucketAndLeavesADebt() {
    var bucket = TokenBucket(permits: 10, per: .seconds(1), burst: 5, now: .zero)
    #expect(bucket.canTake(20))
    bucket.take(20)
    #expect(bucket.availablePermits == 0)
    // 15 permits of debt, then 1: 16 permits at 10 a second.
    #expect(bucket.readyTime(for: 1) == PaceInstant(.milliseconds(1600)))
    // A second large request needs a full bucket again: 15 + 5 permits.
    #expect(bucket.readyTime(for: 20) == PaceInstant(.milliseconds(2000)))
  }

  @Test func timeNeverGoesBack() {
    var bucket = TokenBucket(permits: 1, per: .seconds(1), burst: 1, now: PaceInstant(.seconds(10)))
    bucket.take(1)
    bucket.refill(now: PaceInstant(.seconds(5)))
    #expect(bucket.readyTime(for: 1) == PaceInstant(.seconds(11)))
  }
}
