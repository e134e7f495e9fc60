import PaceTestSupport
import PaceTesting
import Testing

@testable import Pace

/// `RateLimiter` on virtual time, with exact grant times; and a real-time stress test.
@Suite(.timeLimit(.minutes(3))) struct RateLimiterTests {
  let scheduler = TestScheduler()

  @Test func theBurstIsAvailableAtOnceThenPermitsComeBackAtTheRate() {
    let limiter = RateLimiter(permits: 10, per: .seconds(1), clock: scheduler)
    for _ in 0..<10 { #expect(limiter.tryAcquire().isAllowed) }
    #expect(!limiter.tryAcquire().isAllowed)
    scheduler.advance(by: .milliseconds(99))
    #expect(!limiter.tryAcquire().isAllowed)
    scheduler.advance(by: .milliseconds(1))
    #expect(limiter.tryAcquire().isAllowed)
    #expect(limiter.availablePermits == 0)
    #expect(scheduler.pendingCount == 0)
  }

  /// 0.1.0's `if limiter.tryAcquire()` still reads the decision as a `Bool` (deprecated: it is
  /// reached here through a protocol, without the warning), and takes the permits exactly as the
  /// decision does (Tests/SourceCompatibility has the other 0.1.0 calls).
  @Test func aConditionReadsTheDecisionAsWhetherThePermitsWereTaken() {
    let limiter = RateLimiter(permits: 2, per: .seconds(1), clock: scheduler)
    let asBool: any BoolTryAcquire = limiter
    var sent = 0
    for _ in 0..<3 where asBool.tryAcquire(cost: 1) { sent += 1 }
    #expect(sent == 2)
    #expect(limiter.tryAcquire() == .limited(retryAfter: .milliseconds(500)))
    scheduler.advance(by: .milliseconds(500))
    #expect(asBool.tryAcquire(cost: 1))
    // Cost 0 takes nothing and is answered as cost 1 would be.
    #expect(limiter.tryAcquire(cost: 0) == .limited(retryAfter: .milliseconds(500)))
    scheduler.advance(by: .milliseconds(500))
    #expect(limiter.tryAcquire(cost: 0) == .allowed(remaining: 1))
    #expect(limiter.availablePermits == 1)
  }

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func acquireSuspendsUntilItsPermitIsAvailable() async throws {
    let limiter = RateLimiter(permits: 10, per: .seconds(1), burst: 1, clock: scheduler)
    try await limiter.acquire()  // from the full bucket, without suspending
    let waiting = Task.immediate { try await limiter.acquire() }
    #expect(limiter.waitingCount == 1)
    #expect(scheduler.pendingDeadlines == [ms(100)])
    scheduler.advance(by: .milliseconds(99))
    #expect(limiter.waitingCount == 1)
    scheduler.advance(by: .milliseconds(1))
    #expect(limiter.waitingCount == 0)
    try await waiting.value
    #expect(scheduler.pendingCount == 0)
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func requestsAreServedInArrivalOrderEvenWhenALaterOneWouldFit() async throws {
    let limiter = RateLimiter(permits: 10, per: .seconds(1), clock: scheduler)
    #expect(limiter.tryAcquire(cost: 10).isAllowed)
    let large = Task.immediate { try await limiter.acquire(cost: 5) }
    let small = Task.immediate { try await limiter.acquire(cost: 1) }
    scheduler.advance(to: ms(100))  // one permit is back, but the large request is first
    #expect(limiter.waitingCount == 2)
    #expect(!limiter.tryAcquire().isAllowed)  // nor does tryAcquire overtake
    scheduler.advance(to: ms(500))
    try await large.value
    #expect(limiter.waitingCount == 1)
    scheduler.advance(to: ms(599))
    #expect(limiter.waitingCount == 1)
    scheduler.advance(to: ms(600))
    try await small.value
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func aCancelledRequestThrowsAndConsumesNothing() async throws {
    let limiter = RateLimiter(permits: 10, per: .seconds(1), clock: scheduler)
    #expect(limiter.tryAcquire(cost: 10).isAllowed)
    let large = Task.immediate { try await limiter.acquire(cost: 5) }
    let small = Task.immediate { try await limiter.acquire(cost: 1) }
    scheduler.advance(to: ms(100))
    large.cancel()
    await #expect(throws: CancellationError.self) { try await large.value }
    // The small request is first now, and its permit is already there.
    try await small.value
    #expect(limiter.waitingCount == 0)
    scheduler.advance(to: ms(1000))
    #expect(limiter.availablePermits == 9)  // the cancelled request took nothing
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func aCancelledTaskThrowsEvenWhenPermitsAreAvailable() async {
    let limiter = RateLimiter(permits: 10, per: .seconds(1), clock: scheduler)
    let cancelled = Task.immediate {
      withUnsafeCurrentTask { $0?.cancel() }
      try await limiter.acquire()
    }
    await #expect(throws: CancellationError.self) { try await cancelled.value }
    #expect(limiter.availablePermits == 10)
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func aRequestLargerThanTheBurstThrowsAndTakesNothing() async throws {
    let limiter = RateLimiter(permits: 10, per: .seconds(1), burst: 5, clock: scheduler)
    await #expect(throws: InvalidInput.costAboveBurst(cost: 20, burst: 5)) { try await limiter.acquire(cost: 20) }
    #expect(limiter.tryAcquire(cost: 6) == .limited(retryAfter: RateLimitDecision.never))
    #expect(limiter.availablePermits == 5)
    #expect(scheduler.pendingDeadlines.isEmpty)
    try await limiter.acquire(cost: 5)
    let next = Task.immediate { try await limiter.acquire() }
    #expect(scheduler.pendingDeadlines == [ms(100)])
    scheduler.advance(to: ms(100))
    try await next.value
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  /// The timer follows the first waiting request: kept when a later head is due after it (it
  /// looks again when it fires), moved earlier when the head is due sooner, cancelled when
  /// nobody waits.
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func theTimerFollowsTheFirstWaitingRequest() async throws {
    let limiter = RateLimiter(permits: 10, per: .seconds(1), clock: scheduler)
    #expect(limiter.tryAcquire(cost: 10).isAllowed)
    let small = Task.immediate { try await limiter.acquire(cost: 1) }
    let large = Task.immediate { try await limiter.acquire(cost: 5) }
    #expect(scheduler.pendingDeadlines == [ms(100)])
    scheduler.advance(to: ms(100))
    try await small.value
    #expect(scheduler.pendingDeadlines == [ms(600)])
    large.cancel()
    await #expect(throws: CancellationError.self) { try await large.value }
    #expect(scheduler.pendingCount == 0)
    let first = Task.immediate { try await limiter.acquire(cost: 3) }
    let second = Task.immediate { try await limiter.acquire(cost: 1) }
    #expect(scheduler.pendingDeadlines == [ms(400)])
    first.cancel()
    await #expect(throws: CancellationError.self) { try await first.value }
    #expect(scheduler.pendingDeadlines == [ms(200)])  // the new head is due sooner
    scheduler.advance(to: ms(200))
    try await second.value
    #expect(scheduler.pendingCount == 0)
    #expect(limiter.waitingCount == 0)
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  /// 10,000 requests at once on virtual time: grants are counted in every 100 µs step, and no
  /// window of any length ever holds more than the burst plus the rate times its length.
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func tenThousandConcurrentRequestsNeverOverGrant() async throws {
    let burst = 100
    // 100 permits per 10 ms: one permit every 100 µs.
    let limiter = RateLimiter(permits: 100, per: .milliseconds(10), burst: burst, clock: scheduler)
    let requests = (0..<10_000).map { _ in Task.immediate { try await limiter.acquire() } }
    var grants = [10_000 - limiter.waitingCount]  // grants per step; step 0 is the burst
    var waiting = limiter.waitingCount
    while waiting > 0 {
      scheduler.advance(by: .microseconds(100))
      let now = limiter.waitingCount
      grants.append(waiting - now)
      waiting = now
    }
    #expect(grants[0] == burst)
    #expect(grants.dropFirst().allSatisfy { $0 == 1 })
    #expect(grants.count == 1 + 9_900)

    // Every window of `length` steps holds at most `burst + length` grants.
    var prefix = [0]
    for count in grants { prefix.append(prefix.last! + count) }
    for length in 1...200 {
      for start in 0...(grants.count - length) {
        let inWindow = prefix[start + length] - prefix[start]
        if inWindow > burst + length {
          Issue.record("\(inWindow) grants in steps \(start)..<\(start + length)")
        }
      }
    }
    for request in requests { try await request.value }
    #expect(scheduler.pendingCount == 0)
  }
  #endif
}

/// `rateLimited(bytesPerSecond:)` and `rateLimited(by:cost:)`.
@Suite(.timeLimit(.minutes(3))) struct AsyncRateLimitedSequenceTests {
  let scheduler = TestScheduler()

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func byteChunksArePacedToTheRate() async throws {
    let chunks = ImmediateSequence(elements: [[UInt8]](repeating: Array(repeating: 7, count: 100), count: 4))
    let reader = IteratorBox(
      chunks.rateLimited(bytesPerSecond: 1_000, burst: 100, clock: scheduler).makeAsyncIterator())
    #expect(try await reader.next()?.count == 100)  // the burst, at 0 ms
    for chunk in 2...4 {
      let next = Task.immediate { try await reader.next() }
      #expect(scheduler.pendingDeadlines == [ms(Int64(chunk - 1) * 100)])
      scheduler.advance(to: ms(Int64(chunk - 1) * 100))
      #expect(try await next.value?.count == 100)
    }
    #expect(try await reader.next() == nil)
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func aChunkLargerThanTheBurstTakesItsBytesInPartsThenPasses() async throws {
    let chunks = ImmediateSequence(elements: [Array(repeating: UInt8(1), count: 250), [2]])
    let limiter = RateLimiter(permits: 1_000, per: .seconds(1), burst: 100, clock: scheduler)
    let reader = IteratorBox(chunks.rateLimited(by: limiter) { $0.count }.makeAsyncIterator())
    let first = Task.immediate { try await reader.next() }
    // 100 bytes at 0 ms, 100 more at 100 ms, the last 50 at 150 ms.
    #expect(scheduler.pendingDeadlines == [ms(100)])
    scheduler.advance(to: ms(100))
    await limiter.waitForWaiters(1)
    #expect(scheduler.pendingDeadlines == [ms(150)])
    scheduler.advance(to: ms(150))
    #expect(try await first.value?.count == 250)
    let next = Task.immediate { try await reader.next() }
    #expect(scheduler.pendingDeadlines == [ms(151)])
    scheduler.advance(to: ms(151))
    #expect(try await next.value == [2])
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func costDecidesThePermitsOfEachElement() async throws {
    let limiter = RateLimiter(permits: 10, per: .seconds(1), clock: scheduler)
    let requests = ImmediateSequence(elements: [4, 6, 1])
    let reader = IteratorBox(requests.rateLimited(by: limiter) { $0 }.makeAsyncIterator())
    #expect(try await reader.next() == 4)
    #expect(try await reader.next() == 6)
    let next = Task.immediate { try await reader.next() }
    scheduler.advance(to: ms(100))
    #expect(try await next.value == 1)
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func cancellingTheConsumerWhileAnElementWaitsEndsTheSequence() async throws {
    let limiter = RateLimiter(permits: 1, per: .seconds(1), clock: scheduler)
    #expect(limiter.tryAcquire().isAllowed)
    let reader = IteratorBox(ImmediateSequence(elements: [1, 2]).rateLimited(by: limiter).makeAsyncIterator())
    let next = Task.immediate { try await reader.next() }
    next.cancel()
    #expect(try await next.value == nil)
    scheduler.advance(to: ms(1000))
    #expect(limiter.availablePermits == 1)
  }
  #endif

  @Test func theBaseSequencesErrorIsThrown() async {
    let failing = AsyncThrowingStream<[UInt8], any Error> { $0.finish(throwing: TestFailure()) }
    var iterator = failing.rateLimited(bytesPerSecond: 10, clock: scheduler).makeAsyncIterator()
    await #expect(throws: TestFailure.self) { try await iterator.next() }
  }

  @Test func overANonThrowingSequenceNoTryIsNeeded() async {
    let stream = AsyncStream<[UInt8]> { input in
      input.yield([1, 2])
      input.finish()
    }
    var total = 0
    for await chunk in stream.rateLimited(bytesPerSecond: 1_000, clock: scheduler) { total += chunk.count }
    #expect(total == 2)
  }

  // real-time: 5 chunks of 1,000 bytes at 40,000 bytes a second with a 1,000-byte burst take at
  // least 100 ms; the upper bound is generous, as the test shares the cooperative pool with the
  // synchronous suites run in parallel (see `AsyncPacingLifecycleTests.debouncesOnARealClock`).
  @Test func limitsBytesOnARealClock() async {
    let clock = ContinuousClock()
    let start = clock.now
    let chunks = ImmediateSequence(elements: [[UInt8]](repeating: Array(repeating: 0, count: 1_000), count: 5))
    var total = 0
    for await chunk in chunks.rateLimited(bytesPerSecond: 40_000, burst: 1_000, clock: clock) { total += chunk.count }
    #expect(total == 5_000)
    let elapsed = start.duration(to: clock.now)
    #expect(elapsed >= .milliseconds(100))
    #expect(elapsed < .seconds(120))
  }
}

/// An async sequence over an array whose `next()` never suspends, so a `Task.immediate` reader
/// reaches the rate limiter before it returns.
struct ImmediateSequence<Element: Sendable>: AsyncSequence, Sendable {
  let elements: [Element]

  func makeAsyncIterator() -> Iterator {
    Iterator(elements: elements[...])
  }

  struct Iterator: AsyncIteratorProtocol {
    var elements: ArraySlice<Element>

    mutating func next() async -> Element? {
      elements.popFirst()
    }
  }
}

/// Lets successive `Task.immediate` readers share one iterator, one at a time.
final class IteratorBox<Iterator: AsyncIteratorProtocol>: @unchecked Sendable {
  // @unchecked Sendable: each test awaits a reader before it starts the next one, so the
  // iterator is never used by two tasks at once.
  private var iterator: Iterator

  init(_ iterator: Iterator) {
    self.iterator = iterator
  }

  func next() async throws -> Iterator.Element? {
    try await iterator.next()
  }
}

/// The deprecated `Bool` overload of `RateLimiter.tryAcquire(cost:)`, called without a warning.
protocol BoolTryAcquire {
  func tryAcquire(cost: Int) -> Bool
}

extension RateLimiter: BoolTryAcquire {}
