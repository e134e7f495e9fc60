import PaceTestSupport
import PaceTesting
import Testing
import XCTest

// PaceTesting's async harness, used the way users use it: `import PaceTesting` only, no
// `@testable`, from nonisolated and `@MainActor` Swift Testing tests and from XCTest. Every
// expectation is an exact virtual time; nothing yields, sleeps or polls.

// `ms(_:)` is the target's `PaceInstant(.milliseconds(_:))` (Support/Timelines.swift).

@Suite(.timeLimit(.minutes(3))) struct PublicHarnessTests {
  @Test func debouncedOverAStreamEmitsAtExactTimes() async {
    let scheduler = TestScheduler()
    let queries = TestStream<String>()
    let timeline = VirtualTimeline(scheduler: scheduler, queries.debounced(for: .milliseconds(300), clock: scheduler))

    await queries.send("s")
    timeline.advance(by: .milliseconds(100))
    await queries.send("sw")
    timeline.advance(by: .milliseconds(299))
    #expect(timeline.emissions.isEmpty)
    timeline.advance(by: .milliseconds(1))
    #expect(timeline.emissions == [.value("sw", at: ms(400))])

    await queries.send("swift")
    queries.finish()
    await timeline.waitForEnd()  // the end flushes the pending element at once
    #expect(timeline.emissions == [.value("sw", at: ms(400)), .value("swift", at: ms(400)), .finished(at: ms(400))])
  }

  @Test func twoEmissionsInOneAdvanceKeepTheirOwnTimes() async {
    let scheduler = TestScheduler()
    let taps = TestStream<Int>()
    let timeline = VirtualTimeline(scheduler: scheduler, taps.throttled(for: .milliseconds(100), clock: scheduler))
    for tap in 1...3 {
      await taps.send(tap)  // all at 0 ms: 1 on the leading edge, 3 on the trailing one
    }
    await taps.send(4)
    timeline.advance(by: .seconds(1))
    #expect(timeline.emissions == [.value(1, at: ms(0)), .value(4, at: ms(100))])
  }

  @MainActor @Test func worksFromTheMainActor() async {
    let scheduler = TestScheduler()
    let queries = TestStream<String>()
    let timeline = VirtualTimeline(scheduler: scheduler, queries.debounced(for: .milliseconds(300), clock: scheduler))
    await queries.send("a")
    timeline.runTimers()
    #expect(timeline.emissions == [.value("a", at: ms(300))])
    MainActor.preconditionIsolated()  // the timeline ran the reader without leaving the main actor
  }

  @Test func aFailureIsRecordedWithItsTime() async {
    struct Offline: Error {}
    let scheduler = TestScheduler()
    let queries = TestStream<String>()
    let timeline = VirtualTimeline(scheduler: scheduler, queries.debounced(for: .milliseconds(300), clock: scheduler))
    timeline.advance(by: .milliseconds(50))
    queries.fail(Offline())
    await timeline.waitForEnd()
    #expect(timeline.emissions == [.failed(at: ms(50))])
    #expect(timeline.isFinished)
  }

  @Test func cancellingTheTimelineEndsTheSequenceAndReleasesTheUpstream() async {
    let scheduler = TestScheduler()
    let queries = TestStream<String>()
    let timeline = VirtualTimeline(scheduler: scheduler, queries.debounced(for: .milliseconds(300), clock: scheduler))
    timeline.cancel()
    await timeline.waitForEnd()
    await queries.released()
    #expect(queries.iteratorsMade == 1)
  }

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func workThatSleepsOnTheClockIsAwaitedNotPolled() async throws {
    let scheduler = TestScheduler()
    let search = AsyncDebouncer(for: .milliseconds(300), clock: scheduler) { (query: String) in
      try await scheduler.sleep(for: .seconds(1))  // the "network"
      return (query.uppercased(), scheduler.now)
    }
    let result = Task.immediate { try await search("swift") }
    scheduler.advance(by: .milliseconds(300))
    await scheduler.waitForSleepers(1)
    #expect(scheduler.sleeperCount == 1)
    #expect(scheduler.pendingDeadlines == [ms(1300)])
    scheduler.advance(by: .seconds(1))
    let (value, finishedAt) = try await result.value
    #expect(value == "SWIFT")
    #expect(finishedAt == ms(1300))
    #expect(scheduler.sleeperCount == 0)
  }
  #endif

  @Test func aCancelledSleeperIsCountedOut() async {
    let scheduler = TestScheduler()
    let sleeper = Task { try await scheduler.sleep(for: .seconds(1)) }
    await scheduler.waitForSleepers(1)
    sleeper.cancel()
    await #expect(throws: CancellationError.self) { try await sleeper.value }
    #expect(scheduler.sleeperCount == 0)
    #expect(scheduler.pendingCount == 0)
  }

  @Test func waitForSleepersReturnsAtOnceWhenEnoughSleep() async {
    let scheduler = TestScheduler()
    await scheduler.waitForSleepers(0)
    let sleepers = (0..<3).map { _ in Task { try await scheduler.sleep(for: .milliseconds(10)) } }
    await scheduler.waitForSleepers(3)
    await scheduler.waitForSleepers(2)
    scheduler.advance(by: .milliseconds(10))
    for sleeper in sleepers { try? await sleeper.value }
    #expect(scheduler.sleeperCount == 0)
  }

  @MainActor @Test func rateLimiterAcquireFromTheMainActor() async throws {
    let scheduler = TestScheduler()
    let limiter = RateLimiter(permits: 10, per: .seconds(1), burst: 1, clock: scheduler)
    try await limiter.acquire()
    // `acquire` leaves the main actor, so the request registers later: wait for its timer.
    let second = Task { try await limiter.acquire() }
    await scheduler.waitForPending(1)
    #expect(scheduler.pendingDeadlines == [ms(100)])
    scheduler.advance(by: .milliseconds(100))
    try await second.value
    #expect(limiter.waitingCount == 0)
  }
}

/// The same harness from XCTest.
final class PublicHarnessXCTests: XCTestCase {
  func testDebouncedOverAStream() async {
    let scheduler = TestScheduler()
    let queries = TestStream<String>()
    let timeline = VirtualTimeline(scheduler: scheduler, queries.debounced(for: .milliseconds(300), clock: scheduler))
    await queries.send("s")
    timeline.advance(by: .milliseconds(299))
    XCTAssertEqual(timeline.emissions, [])
    timeline.advance(by: .milliseconds(1))
    XCTAssertEqual(timeline.emissions, [.value("s", at: ms(300))])
  }

  @MainActor func testSleepingWorkFromTheMainActor() async throws {
    // From the main actor the call registers after a hop: wait for its timer, then its sleep.
    let scheduler = TestScheduler()
    let save = AsyncDebouncer(for: .seconds(2), clock: scheduler) { (draft: String) in
      try await scheduler.sleep(for: .milliseconds(500))
      return draft.count
    }
    let saved = Task { try await save("Hello") }
    await scheduler.waitForPending()
    scheduler.advance(by: .seconds(2))
    await scheduler.waitForSleepers()
    scheduler.advance(by: .milliseconds(500))
    let count = try await saved.value
    XCTAssertEqual(count, 5)
    XCTAssertEqual(scheduler.now, ms(2500))
  }
}
