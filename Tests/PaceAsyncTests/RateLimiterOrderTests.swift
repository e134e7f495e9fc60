import PaceTesting
import Testing

@testable import Pace

/// `RateLimiter.acquire` queues its request on the caller's actor, before it first suspends:
/// tasks started in order from one actor are granted in that order, every round.
@Suite(.timeLimit(.minutes(3))) struct RateLimiterOrderTests {
  static let rounds = 2_000

  // Each round grants one request per step of time and reads which task started: two
  // continuations resumed in one `advance` may run on the actor in either order, which is the
  // runtime's choice, not the limiter's.

  @MainActor @Test func tasksStartedInOrderFromTheMainActorAreGrantedInOrder() async throws {
    var outOfOrder = 0
    for _ in 0..<Self.rounds {
      let scheduler = TestScheduler()
      let limiter = RateLimiter(permits: 1, per: .milliseconds(100), clock: scheduler)
      let (starts, started) = AsyncStream.makeStream(of: Int.self)
      for upload in 1...3 {
        Task {
          try await limiter.acquire()
          started.yield(upload)
        }
      }
      if try await Self.startOrder(starts, limiter: limiter, scheduler: scheduler) != [1, 2, 3] { outOfOrder += 1 }
    }
    #expect(outOfOrder == 0)
  }

  @Test func tasksStartedInOrderFromAnActorAreGrantedInOrder() async throws {
    var outOfOrder = 0
    for _ in 0..<Self.rounds {
      let scheduler = TestScheduler()
      let limiter = RateLimiter(permits: 1, per: .milliseconds(100), clock: scheduler)
      let (starts, started) = AsyncStream.makeStream(of: Int.self)
      await Uploader(limiter: limiter, started: started).start(3)
      if try await Self.startOrder(starts, limiter: limiter, scheduler: scheduler) != [1, 2, 3] { outOfOrder += 1 }
    }
    #expect(outOfOrder == 0)
  }

  /// The first start (from the full bucket), then one per permit, one step of time at a time.
  static func startOrder(
    _ starts: AsyncStream<Int>, limiter: RateLimiter, scheduler: TestScheduler
  ) async throws -> [Int] {
    var iterator = starts.makeAsyncIterator()
    var order: [Int] = []
    await limiter.waitUntilWaiting(count: 2)
    order.append(await iterator.next() ?? 0)
    for _ in 0..<2 {
      scheduler.advance(by: .milliseconds(100))
      order.append(await iterator.next() ?? 0)
    }
    return order
  }

  @MainActor @Test func eachGrantComesAtItsExactInstant() async throws {
    let scheduler = TestScheduler()
    let limiter = RateLimiter(permits: 1, per: .milliseconds(100), clock: scheduler)
    let started = LockedRecorder<Int>(clock: scheduler)
    let uploads = (1...3).map { upload in
      Task {
        try await limiter.acquire()
        started.record(upload)
      }
    }
    await limiter.waitUntilWaiting(count: 2)
    #expect(scheduler.pendingDeadlines == [.milliseconds(100)])
    scheduler.advance(by: .milliseconds(100))
    try await uploads[1].value
    scheduler.advance(by: .milliseconds(100))
    try await uploads[2].value
    try await uploads[0].value
    #expect(started.values == [1, 2, 3])
    #expect(started.times == [.zero, .milliseconds(100), .milliseconds(200)])
  }

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @MainActor @Test func aCallQueuesBeforeItFirstSuspends() async throws {
    let scheduler = TestScheduler()
    let limiter = RateLimiter(permits: 1, per: .milliseconds(100), clock: scheduler)
    #expect(limiter.tryAcquire().isAllowed)
    let waiting = Task.immediate { try await limiter.acquire() }
    #expect(limiter.waitingCount == 1)  // queued synchronously, on the main actor
    scheduler.advance(by: .milliseconds(100))
    try await waiting.value
  }
  #endif

  @Test func waitingForTheThirdWaiterReturnsWhenItQueues() async throws {
    let scheduler = TestScheduler()
    let limiter = RateLimiter(permits: 1, per: .seconds(1), clock: scheduler)
    #expect(limiter.tryAcquire().isAllowed)
    let waiters = (0..<3).map { _ in Task { try await limiter.acquire() } }
    await limiter.waitUntilWaiting(count: 3)
    #expect(limiter.waitingCount == 3)
    await limiter.waitUntilWaiting(count: 1)  // reached already: returns at once
    scheduler.advance(by: .seconds(3))
    for waiter in waiters { try await waiter.value }
    #expect(limiter.waitingCount == 0)
  }
}

private actor Uploader {
  let limiter: RateLimiter
  let started: AsyncStream<Int>.Continuation

  init(limiter: RateLimiter, started: AsyncStream<Int>.Continuation) {
    self.limiter = limiter
    self.started = started
  }

  /// Starts `count` uploads in order, each in a task isolated to this actor.
  func start(_ count: Int) {
    for upload in 1...count {
      Task {
        try await self.limiter.acquire()
        self.started.yield(upload)
      }
    }
  }
}
