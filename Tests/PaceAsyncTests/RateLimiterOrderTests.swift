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

  // Requests granted at one instant (a window's permits coming back together): the code after
  // each `acquire()` starts in grant order, from the main actor and from another actor, every
  // round (before the hand-off, 24 to 40 of 300 rounds from the main actor were out of order).
  static let sameInstantRounds = 300

  @MainActor @Test func requestsGrantedAtOneInstantStartInGrantOrderOnTheMainActor() async throws {
    var outOfOrder = 0
    for _ in 0..<Self.sameInstantRounds {
      let (scheduler, limiter) = Self.windowSpent()
      let started = LockedRecorder<Int>(scheduler: scheduler)
      let uploads = (1...3).map { upload in
        Task {
          try await limiter.acquire()
          started.record(upload)
        }
      }
      await limiter.waitForWaiters(3)
      scheduler.advance(by: .milliseconds(100))  // all three permits come back at 100 ms
      for upload in uploads { try await upload.value }
      if started.values != [1, 2, 3] { outOfOrder += 1 }
      #expect(started.times == Array(repeating: .milliseconds(100), count: 3))
    }
    #expect(outOfOrder == 0)
  }

  @Test func requestsGrantedAtOneInstantStartInGrantOrderOnAnActor() async throws {
    var outOfOrder = 0
    for _ in 0..<Self.sameInstantRounds {
      let (scheduler, limiter) = Self.windowSpent()
      let (starts, started) = AsyncStream.makeStream(of: Int.self)
      await Uploader(limiter: limiter, started: started).start(3)
      await limiter.waitForWaiters(3)
      scheduler.advance(by: .milliseconds(100))
      var order: [Int] = []
      for await upload in starts.prefix(3) { order.append(upload) }
      if order != [1, 2, 3] { outOfOrder += 1 }
    }
    #expect(outOfOrder == 0)
  }

  /// A request granted while earlier grants are still on their way out of `acquire` starts after
  /// them, even though permits are available at once.
  @MainActor @Test func aRequestGrantedDuringTheHandOffStartsAfterTheEarlierGrants() async throws {
    let (scheduler, limiter) = Self.windowSpent(permits: 4)
    let started = LockedRecorder<Int>(scheduler: scheduler)
    let first = (1...3).map { upload in
      Task {
        try await limiter.acquire()
        started.record(upload)
      }
    }
    await limiter.waitForWaiters(3)
    scheduler.advance(by: .milliseconds(100))  // 4 permits back: 3 granted, 1 left
    let late = Task {
      try await limiter.acquire()
      started.record(4)
    }
    for task in first + [late] { try await task.value }
    #expect(started.values == [1, 2, 3, 4])
  }

  /// A sliding window of `permits` per 100 ms, all taken at 0 ms.
  static func windowSpent(permits: Int = 3) -> (TestScheduler, RateLimiter) {
    let scheduler = TestScheduler()
    let limiter = RateLimiter(limit: .slidingWindow(permits: permits, per: .milliseconds(100)), clock: scheduler)
    for _ in 0..<permits { _ = limiter.tryAcquire() }
    return (scheduler, limiter)
  }

  /// The first start (from the full bucket), then one per permit, one step of time at a time.
  static func startOrder(
    _ starts: AsyncStream<Int>, limiter: RateLimiter, scheduler: TestScheduler
  ) async throws -> [Int] {
    var iterator = starts.makeAsyncIterator()
    var order: [Int] = []
    await limiter.waitForWaiters(2)
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
    let started = LockedRecorder<Int>(scheduler: scheduler)
    let uploads = (1...3).map { upload in
      Task {
        try await limiter.acquire()
        started.record(upload)
      }
    }
    await limiter.waitForWaiters(2)
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
    await limiter.waitForWaiters(3)
    #expect(limiter.waitingCount == 3)
    await limiter.waitForWaiters(1)  // reached already: returns at once
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
