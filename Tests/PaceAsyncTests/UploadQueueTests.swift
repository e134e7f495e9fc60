import Pace
import PaceTesting
import Testing

/// An upload queue as an app writes it: each file waits for a permit of a rate limiter, then
/// uploads, in a task the model spawns through `OwnedTasks(clock:)`. Tested with `settle`
/// alone: what a permit lets through runs within the settle, so the counts are exact.
@MainActor final class UploadQueue {
  private(set) var started: [String] = []
  private(set) var uploaded: [String] = []
  /// The uploads: cancelled with the model, followed by a `TestScheduler` clock.
  let tasks: OwnedTasks
  private let limiter: RateLimiter
  private let upload: @Sendable (String) async throws -> Void

  /// Never more than 3 uploads in any 10 s (`burst: 1`), or 3 at once and then one every
  /// 3.33 s (`burst: nil`, the default: a full bucket of 3).
  init(clock: some Clock<Duration>, burst: Int? = 1, upload: @escaping @Sendable (String) async throws -> Void) {
    limiter = RateLimiter(permits: 3, per: .seconds(10), burst: burst, clock: clock)
    tasks = OwnedTasks(clock: clock)
    self.upload = upload
  }

  func enqueue(_ file: String) {
    tasks.spawn { [weak self, limiter, upload] in
      do {
        try await limiter.acquire()
        self?.started.append(file)
        try await upload(file)
        self?.uploaded.append(file)
      } catch {
        // Cancelled with the model.
      }
    }
  }
}

@Suite(.timeLimit(.minutes(3))) struct UploadQueueTests {
  static let files = ["a", "b", "c", "d", "e"]
  /// One permit every 10 s / 3, in integer nanoseconds: 3,333,333,333⅓ ns, so with the default
  /// burst the second permit is whole at 3,333,333,334 ns and the third at 6,666,666,667 ns.
  static let second = PaceInstant(nanoseconds: 3_333_333_334)
  static let third = PaceInstant(nanoseconds: 6_666_666_667)
  /// With `burst: 1` the bucket holds no more than the one permit, so the ⅔ ns by which a grant
  /// at a whole nanosecond comes late is not kept: each permit comes 3,333,333,333⅓ ns after
  /// the previous grant, and the fourth just after 10 s, never 4 in any 10 s.
  static let thirdWithBurstOne = PaceInstant(nanoseconds: 6_666_666_668)
  static let fourthWithBurstOne = PaceInstant(nanoseconds: 10_000_000_002)

  @MainActor @Test func exactlyThreeUploadsRunInTheFirstTenSecondsWithBurstOne() async {
    let scheduler = TestScheduler()
    let api = FakeDependency<String, Void>(scheduler: scheduler, latency: .milliseconds(500)) { _ in }
    let queue = UploadQueue(clock: scheduler, upload: api.function)
    for file in Self.files { queue.enqueue(file) }
    await scheduler.settle(by: .milliseconds(9_999))
    #expect(queue.started == ["a", "b", "c"])
    #expect(queue.uploaded == ["a", "b", "c"])
    #expect(api.calls.map(\.start) == [.zero, Self.second, Self.thirdWithBurstOne])
    #expect(scheduler.suspendedCallerCount == 2)  // "d" and "e" wait for their permits
    await scheduler.settle(by: .milliseconds(1))  // 10 s
    #expect(queue.started == ["a", "b", "c"])
    await scheduler.settle(by: .milliseconds(1))
    #expect(queue.started == ["a", "b", "c", "d"])
    #expect(api.calls.last?.start == Self.fourthWithBurstOne)
    #expect(scheduler.suspendedCallerCount == 1)
  }

  @MainActor @Test func fiveUploadsStartInTheFirstTenSecondsWithTheDefaultBurst() async {
    let scheduler = TestScheduler()
    let api = FakeDependency<String, Void>(scheduler: scheduler, latency: .milliseconds(500)) { _ in }
    let queue = UploadQueue(clock: scheduler, burst: nil, upload: api.function)
    for file in Self.files { queue.enqueue(file) }
    await scheduler.settle(by: .zero)
    #expect(queue.started == ["a", "b", "c"])  // the full bucket, at once
    await scheduler.settle(by: .milliseconds(9_999))
    #expect(queue.started == Self.files)
    #expect(api.calls.map(\.start) == [.zero, .zero, .zero, Self.second, Self.third])
    // "a", "b" and "c" finish at the same instant (500 ms): their tasks resume in no set order.
    #expect(queue.uploaded.sorted() == Self.files)
  }

  @MainActor @Test func waitingThroughTheSchedulerSeesEveryQueuedUpload() async {
    let scheduler = TestScheduler()
    let api = FakeDependency<String, Void>(scheduler: scheduler, latency: .milliseconds(500)) { _ in }
    let queue = UploadQueue(clock: scheduler, upload: api.function)
    for file in Self.files { queue.enqueue(file) }
    await scheduler.waitForSuspendedCallers(4)  // "a" took the permit; the others wait, in order
    #expect(scheduler.suspendedCallerCount == 4)
    await scheduler.settle(by: .seconds(20))
    #expect(queue.started == Self.files)
    #expect(scheduler.suspendedCallerCount == 0)
  }

  @MainActor @Test func releasingTheModelCancelsTheWaitingUploads() async {
    let scheduler = TestScheduler()
    let api = FakeDependency<String, Void>(scheduler: scheduler, latency: .milliseconds(500)) { _ in }
    var queue: UploadQueue? = UploadQueue(clock: scheduler, upload: api.function)
    for file in Self.files { queue?.enqueue(file) }
    await scheduler.settle(by: .milliseconds(100))
    #expect(scheduler.suspendedCallerCount == 4)
    queue = nil  // cancels the tasks: the waiting requests leave the limiter
    await scheduler.settle(by: .seconds(20))
    #expect(scheduler.suspendedCallerCount == 0)
    #expect(api.calls.count == 1)
  }
}

/// `settle` and the work it follows: tasks made with the clock, the keyed limiter's grants, and
/// synchronous pacers given the scheduler as a clock.
@Suite(.timeLimit(.minutes(3))) struct TrackedWorkTests {
  @MainActor @Test func aTaskMadeWithTheClockIsSettledThroughItsSleepsAndPermits() async {
    let scheduler = TestScheduler()
    let limiter = RateLimiter(permits: 1, per: .seconds(1), clock: scheduler)
    let steps = LockedRecorder<String>(scheduler: scheduler)
    let task = Task(clock: scheduler) {
      for step in ["one", "two", "three"] {
        try? await limiter.acquire()
        steps.record(step)
        try? await scheduler.sleep(for: .milliseconds(10))
      }
    }
    await scheduler.settle(by: .zero)
    #expect(steps.values == ["one"])
    await scheduler.settle(by: .milliseconds(1_999))
    #expect(steps.values == ["one", "two"])
    #expect(steps.times == [.zero, .seconds(1)])
    await scheduler.settle(by: .milliseconds(1))
    #expect(steps.values == ["one", "two", "three"])
    await scheduler.settle(by: .milliseconds(10))  // its last sleep
    await task.value
  }

  @Test func aThrowingTaskMadeWithTheClockIsSettledToo() async throws {
    let scheduler = TestScheduler()
    let steps = LockedRecorder<Int>(scheduler: scheduler)
    let task = Task(clock: scheduler) { () async throws -> Int in
      try await scheduler.sleep(for: .seconds(1))
      steps.record(1)
      return 1
    }
    await scheduler.settle(by: .seconds(1))
    #expect(steps.entries.map(\.time) == [.seconds(1)])
    #expect(try await task.value == 1)
  }

  @Test func aTaskMadeWithAnotherClockIsAPlainTask() async {
    let task = Task(clock: ContinuousClock()) { 42 }
    #expect(await task.value == 42)
  }

  @MainActor @Test func keyedGrantsRunWithinTheSettle() async {
    let scheduler = TestScheduler()
    let limiter = KeyedRateLimiter<String>(permits: 1, per: .seconds(1), clock: scheduler)
    let tasks = OwnedTasks(clock: scheduler)
    let granted = LockedRecorder<String>(scheduler: scheduler)
    for (index, user) in ["ann", "ann", "bob", "ann"].enumerated() {
      tasks.spawn {
        try? await limiter.acquire(user)
        granted.record("\(user)\(index)")
      }
    }
    await scheduler.settle(by: .zero)
    #expect(granted.values == ["ann0", "bob2"])
    #expect(scheduler.suspendedCallerCount == 2)
    await scheduler.settle(by: .milliseconds(1_999))
    #expect(granted.values == ["ann0", "bob2", "ann1"])
    await scheduler.settle(by: .milliseconds(1), awaiting: tasks)
    #expect(granted.values == ["ann0", "bob2", "ann1", "ann3"])
    #expect(granted.times == [.zero, .zero, .seconds(1), .seconds(2)])
    #expect(scheduler.suspendedCallerCount == 0)
  }

  @Test func aDebouncerGivenTheSchedulerAsAClockRunsOnItExactly() {
    let scheduler = TestScheduler()
    let searched = LockedRecorder<String>(scheduler: scheduler)
    let search = Debouncer<String>(for: .milliseconds(300), scheduler: .clock(scheduler)) { searched.record($0) }
    search("s")
    scheduler.advance(by: .milliseconds(100))
    search("sw")
    scheduler.advance(by: .milliseconds(299))
    #expect(searched.values == [])
    scheduler.advance(by: .milliseconds(1))
    #expect(searched.values == ["sw"])
    #expect(searched.times == [.milliseconds(400)])
  }

  @Test func aFakeWithoutInputIsCalledWithoutArguments() async throws {
    let scheduler = TestScheduler()
    let fetch = FakeDependency<Void, [String]>(scheduler: scheduler, latency: .milliseconds(200)) {
      ["inbox", "sent"]
    }
    let folders = Task { try await fetch() }
    await fetch.waitForCalls(1)
    scheduler.advance(by: .milliseconds(200))
    #expect(try await folders.value == ["inbox", "sent"])
    let action: @Sendable () async throws -> [String] = fetch.action
    let again = Task { try await action() }
    await fetch.waitForCalls(2)
    scheduler.advance(by: .milliseconds(200))
    #expect(try await again.value == ["inbox", "sent"])
    #expect(fetch.calls.map(\.start) == [.zero, .milliseconds(200)])
  }
}

/// Every `waitFor…`/`waitUntil…` helper ends within its time limit, failing the test with what it
/// waited for and what it saw.
@Suite(.timeLimit(.minutes(3))) struct BoundedWaitTests {
  // real-time: each wait below is for something that never comes, so it runs out its 50 ms limit.
  static let limit = Duration.milliseconds(50)

  static func failure(_ issue: Issue, mentions parts: String...) -> Bool {
    issue.comments.contains { comment in parts.allSatisfy { comment.rawValue.contains($0) } }
  }

  @Test func waitForSleepersFailsNamingTheSleepers() async {
    let scheduler = TestScheduler()
    await withKnownIssue {
      await scheduler.waitForSleepers(1, timeout: Self.limit)
    } matching: {
      Self.failure($0, mentions: "waitForSleepers(1)", "1 task(s) sleeping", "saw 0")
    }
  }

  @Test func waitForPendingFailsNamingTheDeadlines() async {
    let scheduler = TestScheduler()
    scheduler.schedule(at: .seconds(1)) {}
    await withKnownIssue {
      await scheduler.waitForPending(2, timeout: Self.limit)
    } matching: {
      Self.failure($0, mentions: "waitForPending(2)", "saw 1", "pending deadlines")
    }
  }

  @Test func waitForSuspendedCallersFailsNamingTheCount() async throws {
    let scheduler = TestScheduler()
    let limiter = RateLimiter(permits: 1, per: .seconds(1), clock: scheduler)
    try await limiter.acquire()
    let second = Task { try await limiter.acquire() }
    await scheduler.waitForSuspendedCallers(1)
    await withKnownIssue {
      await scheduler.waitForSuspendedCallers(2, timeout: Self.limit)
    } matching: {
      Self.failure($0, mentions: "waitForSuspendedCallers(2)", "saw 1")
    }
    second.cancel()
    await #expect(throws: CancellationError.self) { try await second.value }
    #expect(scheduler.suspendedCallerCount == 0)
  }

  @Test func waitForWaitersFailsNamingTheCount() async {
    let limiter = RateLimiter(permits: 1, per: .seconds(1), clock: TestScheduler())
    await withKnownIssue {
      await limiter.waitForWaiters(1, timeout: Self.limit)
    } matching: {
      Self.failure($0, mentions: "RateLimiter.waitForWaiters(1)", "saw 0")
    }
  }

  /// A keyed limiter's waits count its own requests, in total and for one key, not those of
  /// another limiter on the same scheduler (`waitForSuspendedCallers` counts every limiter's).
  @Test func aKeyedLimitersWaitsCountItsOwnRequests() async throws {
    let scheduler = TestScheduler()
    let limit = RateLimit(permits: 1, per: .seconds(1))
    let limiter = KeyedRateLimiter<String>(limit: limit, clock: scheduler)
    let other = RateLimiter(limit: limit, clock: scheduler)
    try await other.acquire()
    let elsewhere = Task { try await other.acquire() }
    try await limiter.acquire("ann")
    let ann = Task { try await limiter.acquire("ann") }
    await limiter.waitForWaiters(1)
    await limiter.waitForWaiters(1, for: "ann")
    // The scheduler counts both limiters' waiters (`elsewhere` may suspend after `ann`): wait for
    // both, where reading the count once raced with `elsewhere`.
    await scheduler.waitForSuspendedCallers(2)
    await withKnownIssue {
      await limiter.waitForWaiters(2, timeout: Self.limit)
    } matching: {
      Self.failure($0, mentions: "KeyedRateLimiter.waitForWaiters(2)", "saw 1")
    }
    await withKnownIssue {
      await limiter.waitForWaiters(1, for: "bob", timeout: Self.limit)
    } matching: {
      Self.failure($0, mentions: "KeyedRateLimiter.waitForWaiters(1, for: bob)", "saw 0")
    }
    scheduler.advance(by: .seconds(1))
    try await ann.value
    try await elsewhere.value
  }

  @Test func sharedWorksWaitsFailNamingTheCount() async throws {
    let keyed = KeyedSharedWork<String, Int>(clock: TestScheduler())
    await withKnownIssue {
      await keyed.waitForCallers(1, for: "k", timeout: Self.limit)
    } matching: {
      Self.failure($0, mentions: "KeyedSharedWork.waitForCallers(1, for: k)", "saw 0")
    }
    await withKnownIssue {
      await keyed.waitForCalls(1, timeout: Self.limit)
    } matching: {
      Self.failure($0, mentions: "KeyedSharedWork.waitForCalls(1)", "call(s)")
    }
    let single = SharedWork<Int>(clock: TestScheduler())
    _ = try await single.run { 1 }
    await single.waitForCalls(1, timeout: .zero)
    await withKnownIssue {
      await single.waitForCallers(1, timeout: Self.limit)
    } matching: {
      Self.failure($0, mentions: "SharedWork.waitForCallers(1)", "saw 0")
    }
  }

  @Test func batchersWaitsFailNamingTheCount() async throws {
    let scheduler = TestScheduler()
    let batcher = Batcher<Int, Void>(maximumCount: 10, maximumWait: .seconds(1), clock: scheduler) { _ in }
    try await batcher.submit(1)
    await batcher.waitForCalls(1, timeout: .zero)
    await withKnownIssue {
      await batcher.waitForCalls(2, timeout: Self.limit)
    } matching: {
      Self.failure($0, mentions: "Batcher.waitForCalls(2)", "1 item(s) buffered")
    }
    await withKnownIssue {
      await batcher.waitForEndedBatches(1, timeout: Self.limit)
    } matching: {
      Self.failure($0, mentions: "Batcher.waitForEndedBatches(1)", "0 sent")
    }
    scheduler.advance(by: .seconds(1))
    await batcher.waitForEndedBatches(1)
  }

  @Test func waitForAllFailsNamingTheTasksStillRunning() async {
    let scheduler = TestScheduler()
    let tasks = OwnedTasks()
    tasks.spawn { try? await scheduler.sleep(for: .seconds(1)) }
    await withKnownIssue {
      await tasks.waitForAll(timeout: Self.limit)
    } matching: {
      Self.failure($0, mentions: "OwnedTasks.waitForAll", "saw 1")
    }
    await scheduler.waitForSleepers(1)
    scheduler.advance(by: .seconds(1))
    await tasks.waitForAll(timeout: .seconds(30))
  }

  @Test func waitForCallsFailsNamingTheCalls() async throws {
    let scheduler = TestScheduler()
    let api = FakeDependency<String, String>(scheduler: scheduler) { $0 }
    _ = try await api("first")
    await withKnownIssue {
      await api.waitForCalls(2, timeout: Self.limit)
    } matching: {
      Self.failure($0, mentions: "waitForCalls(2)", "saw 1", "first@")
    }
  }

  @Test func waitForValuesFailsNamingTheValues() async {
    let recorder = LockedRecorder<String>()
    recorder.record("only")
    await withKnownIssue {
      await recorder.waitForValues(2, timeout: Self.limit)
    } matching: {
      Self.failure($0, mentions: "waitForValues(2)", "saw 1", "only")
    }
  }

  @Test func waitsReturnAtOnceWhenTheCountIsThere() async throws {
    let scheduler = TestScheduler()
    scheduler.schedule(at: .seconds(1)) {}
    await scheduler.waitForPending(1, timeout: .zero)
    await scheduler.waitForSleepers(0, timeout: .zero)
    await scheduler.waitForSuspendedCallers(0, timeout: .zero)
    let recorder = LockedRecorder<Int>()
    recorder.record(1)
    await recorder.waitForValues(1, timeout: .zero)
  }
}
