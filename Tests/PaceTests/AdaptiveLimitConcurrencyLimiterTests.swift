import Pace
import PaceTestSupport
import PaceTesting
import Testing

@testable import Pace

/// The adaptive limit applied to a ``ConcurrencyLimiter``: exact limits after releases at exact
/// virtual instants.
@Suite struct AdaptiveConcurrencyLimiterTests {
  struct Failure: Error {}

  /// AIMD from `initialLimit`, 30 ms counting as too slow, halving on a drop.
  func limiter(
    initialLimit: Int, on scheduler: TestScheduler, changes: LockedState<[String]> = LockedState([])
  ) -> AdaptiveConcurrencyLimiter {
    AdaptiveConcurrencyLimiter(
      .aimd(initialLimit: initialLimit, timeout: .milliseconds(30), backoffRatio: 0.5), clock: scheduler
    ) { from, to in
      changes.withLock { $0.append("\(scheduler.now): \(from) -> \(to)") }
    }
  }

  @Test func releasesAreSamplesAndSetTheLimiter() throws {
    let scheduler = TestScheduler()
    let changes = LockedState<[String]>([])
    let limiter = limiter(initialLimit: 2, on: scheduler, changes: changes)
    #expect(limiter.maximumInFlight == 2)
    let first = try #require(limiter.tryAcquire())
    let second = try #require(limiter.tryAcquire())
    #expect((first.inFlight, second.inFlight) == (1, 2))
    #expect(limiter.tryAcquire() == nil)  // no queue by default: refused at once

    // Two good samples of 20 ms: a round at limit 2, so 3.
    scheduler.advance(by: .milliseconds(20))
    first.release(.success)
    #expect(limiter.maximumInFlight == 2)
    second.release(.success)
    #expect(limiter.maximumInFlight == 3)
    #expect(limiter.limit.limit == 3)
    #expect(changes.withLock { $0 } == ["20 ms: 2 -> 3"])

    let permits = try (0..<3).map { _ in try #require(limiter.tryAcquire()) }
    #expect(permits.map(\.inFlight) == [1, 2, 3])
    #expect(permits.map(\.admittedAt) == [ms(20), ms(20), ms(20)])
    #expect(limiter.tryAcquire() == nil)

    // 40 ms is above the 30 ms timeout: a drop, ⌊3 × 0.5⌋ = 1, with two still in flight.
    scheduler.advance(by: .milliseconds(40))
    permits[0].release(.success)
    #expect(limiter.maximumInFlight == 1)
    #expect(limiter.limiter.inFlightCount == 2)
    #expect(limiter.tryAcquire() == nil)
    // Ignored: no sample; the place is given back, but 1 is still in flight at a limit of 1.
    permits[1].release(.ignored)
    permits[1].release(.dropped)  // a second release does nothing
    #expect(limiter.maximumInFlight == 1)
    #expect(limiter.limiter.inFlightCount == 1)
    #expect(limiter.tryAcquire() == nil)
    permits[2].release(.dropped)  // held: admitted before the decrease
    #expect(limiter.maximumInFlight == 1)
    let last = try #require(limiter.tryAcquire())
    #expect(last.inFlight == 1)
    last.release(.success)
    // A good sample at a limit of 1 is a whole round: 2.
    #expect(changes.withLock { $0 } == ["20 ms: 2 -> 3", "60 ms: 3 -> 1", "60 ms: 1 -> 2"])
    #expect(limiter.limiter.forgottenPermitCount == 0)
  }

  @Test func aForgottenPermitGivesItsPlaceBackWithoutASample() throws {
    let scheduler = TestScheduler()
    let limiter = limiter(initialLimit: 1, on: scheduler)
    do {
      let permit = try #require(limiter.tryAcquire())
      #expect(permit.inFlight == 1)
      scheduler.advance(by: .seconds(1))  // would be a drop, if it were recorded
    }
    #expect(limiter.limiter.forgottenPermitCount == 1)
    #expect(limiter.maximumInFlight == 1)
    let next = try #require(limiter.tryAcquire())
    #expect(next.inFlight == 1)
    next.release(.success)
  }

  @Test func withPermitTimesItsBodyOnTheClock() async throws {
    let scheduler = TestScheduler()
    let limiter = limiter(initialLimit: 4, on: scheduler)
    let call = Task {
      try await limiter.withPermit {
        try await scheduler.sleep(for: .milliseconds(31))
        return "answer"
      }
    }
    await scheduler.waitForSleepers(1)
    #expect(limiter.limiter.inFlightCount == 1)
    scheduler.advance(by: .milliseconds(31))
    #expect(try await call.value == "answer")
    // A return after 31 ms: slower than the 30 ms timeout, a drop: ⌊4 × 0.5⌋ = 2.
    #expect(limiter.maximumInFlight == 2)
    #expect(limiter.limiter.inFlightCount == 0)
  }

  @Test func withPermitCountsAnErrorAsADropAndCancellationAsNothing() async throws {
    let scheduler = TestScheduler()
    let limiter = limiter(initialLimit: 4, on: scheduler)
    await #expect(throws: CancellationError.self) {
      try await limiter.withPermit { throw CancellationError() }
    }
    #expect(limiter.maximumInFlight == 4)
    await #expect(throws: Failure.self) {
      try await limiter.withPermit(isDropped: { !($0 is Failure) }) { throw Failure() }
    }
    #expect(limiter.maximumInFlight == 4)  // not a drop, by the caller's rule: ignored
    await #expect(throws: Failure.self) {
      try await limiter.withPermit { throw Failure() }
    }
    #expect(limiter.maximumInFlight == 2)
    #expect(limiter.limiter.inFlightCount == 0)
  }

  @Test func aCallBeyondTheLimitIsRefusedWithTheLimitersError() async throws {
    let scheduler = TestScheduler()
    let limiter = limiter(initialLimit: 1, on: scheduler)
    let held = try #require(limiter.tryAcquire())
    await #expect(throws: ConcurrencyLimiterError.self) {
      try await limiter.withPermit { "never" }
    }
    held.release(.success)
  }
}

/// Many tasks on real threads through one adaptive limiter, with outcomes of every kind: every
/// permit is accounted for, and the limiter's limit is the adaptive limit's, however the
/// completions interleave. Run under the thread sanitizer with the other stress tests.
// On the pool, not `.offThePool`: its serial queues would hold these tasks behind a long
// synchronous suite.
@Suite(.timeLimit(.minutes(2))) struct AdaptiveLimitConcurrencyLimiterStressTests {
  struct Failure: Error {}

  @Test(arguments: [
    AdaptiveLimit.aimd(initialLimit: 4, maximumLimit: 16, timeout: .microseconds(50), backoffRatio: 0.5),
    .gradient2(initialLimit: 4, maximumLimit: 16, window: .milliseconds(1), longWindow: 10),
  ])
  func everyPermitIsAccountedForAndTheLimitsAgree(limit: AdaptiveLimit) async {
    let limiter = AdaptiveConcurrencyLimiter(limit, maximumQueued: 64)
    let outcomes = LockedBox((ran: 0, refused: 0, failed: 0))
    await withTaskGroup(of: Void.self) { group in
      for call in 0..<2_000 {
        group.addTask {
          do {
            switch call % 4 {
            case 0:
              guard let permit = limiter.tryAcquire() else {
                throw ConcurrencyLimiterError.queueFull(maximumQueued: 0, waited: .zero)
              }
              for _ in 0..<(call % 5) { await Task.yield() }
              permit.release(call % 3 == 0 ? .dropped : .success)
              permit.release(.success)
            case 1:
              try await limiter.withPermit { throw Failure() }
            default:
              try await limiter.withPermit { for _ in 0..<(call % 7) { await Task.yield() } }
            }
            outcomes.withLock { $0.ran += 1 }
          } catch is ConcurrencyLimiterError {
            outcomes.withLock { $0.refused += 1 }
          } catch {
            outcomes.withLock { $0.failed += 1 }
          }
        }
      }
    }
    let counts = outcomes.withLock { $0 }
    #expect(counts.ran + counts.refused + counts.failed == 2_000)
    #expect(counts.ran > 0)
    #expect(limiter.permitsOut == 0)
    #expect(limiter.limiter.inFlightCount == 0)
    #expect(limiter.limiter.forgottenPermitCount == 0)
    #expect(limiter.maximumInFlight == limiter.limit.limit)
    #expect((1...16).contains(limiter.maximumInFlight))
  }
}
