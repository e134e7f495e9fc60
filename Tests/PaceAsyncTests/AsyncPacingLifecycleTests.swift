import PaceTesting
import Testing

@testable import Pace

/// The plumbing of `.debounced` and `.throttled`: a consumer suspended in `next()`, cancellation,
/// releasing the iterator, and the tasks behind them.
@Suite struct AsyncPacingLifecycleTests {
  enum Operator: CaseIterable {
    case debounced, throttled
  }

  /// An iterator of the operator over `upstream`, type-erased for the tests.
  func iterator(
    _ kind: Operator, _ upstream: TestStream<String>, interval: Duration, clock: some Clock<Duration>
  ) -> any PacedIterator<String> {
    switch kind {
    case .debounced: upstream.debounced(for: interval, clock: clock).makeAsyncIterator()
    case .throttled: upstream.throttled(for: interval, edges: .trailing, clock: clock).makeAsyncIterator()
    }
  }

  @Test(arguments: Operator.allCases)
  func aWaitingConsumerReceivesTheTimersEmissionAndTheEnd(kind: Operator) async throws {
    let scheduler = TestScheduler()
    let upstream = TestStream<String>()
    let received = Signals<String?>()
    let sequence = iterator(kind, upstream, interval: .milliseconds(300), clock: scheduler)
    let consumer = Task {
      var iterator = sequence
      while let value = try await iterator.next() { received.post(value) }
      received.post(nil)
    }
    await upstream.send("a")  // processed at 0 ms, once the consumer's first next() started the reading
    scheduler.advance(by: .milliseconds(300))
    #expect(await received.next() == "a")
    await upstream.send("b")
    upstream.finish()  // flushes "b"
    #expect(await received.next() == "b")
    #expect(await received.next() == nil)
    try await consumer.value
  }

  @Test func aWaitingConsumerReceivesALeadingEmissionFromTheReadingTask() async throws {
    let scheduler = TestScheduler()
    let upstream = TestStream<String>()
    let received = Signals<String?>()
    let sequence = upstream.throttled(for: .milliseconds(100), clock: scheduler)
    let consumer = Task {
      for try await value in sequence { received.post(value) }
      received.post(nil)
    }
    await upstream.send("a")
    #expect(await received.next() == "a")
    #expect(scheduler.now == .zero)
    upstream.fail(TestFailure())
    await #expect(throws: TestFailure.self) { try await consumer.value }
  }

  @Test func theBaseSequenceIsReadFromTheFirstNext() async {
    let upstream = TestStream<String>()
    let iterator = upstream.debounced(for: .milliseconds(300), clock: TestScheduler()).makeAsyncIterator()
    #expect(upstream.iteratorsMade == 0)
    #expect(iterator.tasksForTesting.isEmpty)
    _ = iterator.pollForTesting()
    #expect(iterator.tasksForTesting.count == 1)
    await upstream.send("a")
    #expect(upstream.iteratorsMade == 1)
  }

  @Test(arguments: Operator.allCases)
  func cancellingTheConsumingTaskEndsEverythingPromptly(kind: Operator) async throws {
    let scheduler = TestScheduler()
    let upstream = TestStream<String>()
    let iterator = iterator(kind, upstream, interval: .milliseconds(300), clock: scheduler)
    _ = iterator.pollForTesting()  // starts reading
    await upstream.send("a")  // pending, with a timer armed
    #expect(scheduler.pendingCount == 1)
    let tasks = iterator.tasksForTesting
    #expect(tasks.count == 1)  // the reading task; the timer is a job on the TestScheduler

    let entered = Signals<Void>()
    let consumer = Task {
      var iterator = iterator
      entered.post(())
      return try await iterator.next()
    }
    await entered.next()
    consumer.cancel()
    #expect(try await consumer.value == nil)  // the pending element is dropped
    for task in tasks { await task.value }  // no task outlives the iterator...
    await upstream.released()  // ...the base iterator was let go...
    #expect(scheduler.pendingCount == 0)  // ...and the timer is gone
  }

  @Test(arguments: Operator.allCases)
  func aCancelledTaskGetsNilAtOnce(kind: Operator) async throws {
    let upstream = TestStream<String>()
    let sequence = iterator(kind, upstream, interval: .milliseconds(300), clock: TestScheduler())
    let consumer = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      var iterator = sequence
      return try await iterator.next()
    }
    #expect(try await consumer.value == nil)
  }

  @Test(arguments: Operator.allCases)
  func releasingTheIteratorEndsEverything(kind: Operator) async {
    let scheduler = TestScheduler()
    let upstream = TestStream<String>()
    let tasks = await { () async -> [Task<Void, Never>] in
      let iterator = iterator(kind, upstream, interval: .milliseconds(300), clock: scheduler)
      _ = iterator.pollForTesting()
      await upstream.send("a")
      return iterator.tasksForTesting
    }()
    for task in tasks { await task.value }
    await upstream.released()
    #expect(scheduler.pendingCount == 0)
  }

  /// The timer of a real clock is a task sleeping on the clock: it must end with the iterator,
  /// not an hour later.
  @Test(.timeLimit(.minutes(3)), arguments: Operator.allCases)
  func withARealClockNoTaskOutlivesTheIterator(kind: Operator) async {
    let upstream = TestStream<String>()
    let tasks = await { () async -> [Task<Void, Never>] in
      let iterator = iterator(kind, upstream, interval: .seconds(3600), clock: ContinuousClock())
      _ = iterator.pollForTesting()
      await upstream.send("a")
      return iterator.tasksForTesting
    }()
    #expect(tasks.count == 2)  // reading upstream, and the timer sleeping for an hour
    for task in tasks { await task.value }
    await upstream.released()
  }

  @Test func breakingOutOfAForAwaitLoopEndsTheReading() async {
    let upstream = TestStream<String>()
    let sequence = upstream.throttled(for: .seconds(3600), clock: ContinuousClock())
    let consumer = Task {
      for try await value in sequence where value == "a" { break }
    }
    await upstream.send("a")
    await upstream.released()
    _ = await consumer.result
  }

  // real-time: a debounce on ContinuousClock; only lower bounds on elapsed time are checked, and
  // the upper bound is generous: the test shares the 2-core machine's cooperative pool with the
  // synchronous suites that `swift test` runs in parallel (one CI run measured 15.6 s for this
  // 50 ms debounce while a 27 s fuzz test held a pool thread).
  @Test func debouncesOnARealClock() async throws {
    let clock = ContinuousClock()
    let (stream, input) = AsyncStream<String>.makeStream()
    let start = clock.now
    input.yield("a")
    input.yield("b")
    var iterator = stream.debounced(for: .milliseconds(50), clock: clock).makeAsyncIterator()
    var received = [await iterator.next()]
    let elapsed = start.duration(to: clock.now)
    #expect(elapsed >= .milliseconds(50))
    #expect(elapsed < .seconds(120))
    input.finish()
    while let value = await iterator.next() { received.append(value) }
    // "b" alone; or "a" then "b" if the reading task was held up for 50 ms between the two.
    #expect(received == ["b"] || received == ["a", "b"])
  }
}
