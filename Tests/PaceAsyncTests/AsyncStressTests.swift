import PaceTesting
import Testing

@testable import Pace

/// Many tasks at once on real clocks, for the thread sanitizer: nothing lost, nothing duplicated,
/// nothing over-granted, nothing left running. Each test takes well under a second.
@Suite(.timeLimit(.minutes(3))) struct AsyncStressTests {
  // real-time: 10,000 concurrent requests from a task group on ContinuousClock. Delays can only
  // make a grant look later than it was, so the check is one-sided and exact: the k-th grant seen
  // is never earlier than the bucket allows since the limiter was made.
  @Test func tenThousandConcurrentRequestsOnARealClockNeverOverGrant() async throws {
    let clock = ContinuousClock()
    let burst = 500
    let start = clock.now
    // 5,000 permits per 100 ms: one every 20 µs; the 9,500 after the burst take 190 ms.
    let limiter = RateLimiter(permits: 5_000, per: .milliseconds(100), burst: burst, clock: clock)
    let seen = try await withThrowingTaskGroup(of: Duration.self) { group in
      for _ in 0..<10_000 {
        group.addTask {
          try await limiter.acquire()
          return start.duration(to: clock.now)
        }
      }
      return try await group.reduce(into: [Duration]()) { $0.append($1) }.sorted()
    }
    #expect(seen.count == 10_000)
    for (index, elapsed) in seen.enumerated() {
      let earliest = Duration.microseconds(20) * max(0, index + 1 - burst)
      if elapsed < earliest {
        Issue.record("grant \(index + 1) seen after \(elapsed), before the earliest allowed \(earliest)")
        break
      }
    }
    #expect(seen.last! >= .milliseconds(190))
    #expect(seen.last! < .seconds(60))  // generous: TSAN and a loaded machine slow the task group
  }

  /// Many callers at once, from many threads: each gets the result of an invocation that covers
  /// its own input, or `CancellationError` because newer input superseded it; nothing else.
  @Test func concurrentCallersEachGetAnInvocationThatCoversThem() async {
    let clock = ContinuousClock()
    let debouncer = AsyncDebouncer(for: .microseconds(200), maximumWait: .milliseconds(1), merge: .append, clock: clock)
    {
      (batch: [Int]) in batch
    }
    let outcomes = await withTaskGroup(of: (Int, [Int]?).self) { group in
      for index in 0..<2_000 {
        group.addTask { (index, try? await debouncer([index])) }
      }
      return await group.reduce(into: [(Int, [Int]?)]()) { $0.append($1) }
    }
    #expect(outcomes.count == 2_000)
    for (index, batch) in outcomes {
      if let batch { #expect(batch.contains(index)) }
    }
    #expect(outcomes.contains { $0.1 != nil })
  }

  /// Producers in many tasks feed one debounced and one throttled sequence with `.append`: every
  /// element reaches exactly one emission.
  @Test(arguments: [true, false])
  func concurrentProducersLoseAndDuplicateNothing(debounce: Bool) async {
    let (stream, input) = AsyncStream<[Int]>.makeStream()
    let paced: [[Int]] =
      if debounce {
        await collect(stream.debounced(for: .microseconds(100), maximumWait: .milliseconds(1), merge: .append), input)
      } else {
        await collect(stream.throttled(for: .microseconds(100), merge: .append), input)
      }
    #expect(paced.flatMap { $0 }.sorted() == Array(0..<8_000))
  }

  private func collect<S: AsyncSequence & Sendable>(
    _ sequence: S, _ input: AsyncStream<[Int]>.Continuation
  ) async -> [[Int]] where S.Element == [Int] {
    async let collected = { () async -> [[Int]] in
      var batches: [[Int]] = []
      do {
        for try await batch in sequence { batches.append(batch) }
      } catch {}
      return batches
    }()
    await withTaskGroup(of: Void.self) { group in
      for producer in 0..<8 {
        group.addTask {
          for index in 0..<1_000 { input.yield([producer * 1_000 + index]) }
        }
      }
    }
    input.finish()
    return await collected
  }

  /// Consumers cancelled at random moments while producers keep sending: each ends with `nil`,
  /// and its tasks end.
  @Test func cancellingConsumersUnderLoadEndsTheirTasks() async {
    await withTaskGroup(of: Void.self) { group in
      for round in 0..<50 {
        group.addTask {
          let (stream, input) = AsyncStream<Int>.makeStream()
          let iterator =
            round.isMultiple(of: 2)
            ? stream.debounced(for: .milliseconds(5), clock: ContinuousClock()).makeAsyncIterator().erased
            : stream.throttled(for: .milliseconds(5), clock: ContinuousClock()).makeAsyncIterator().erased
          _ = iterator.pollForTesting()  // starts reading
          let tasks = iterator.tasksForTesting
          let consumer = Task {
            var iterator = iterator
            while (try? await iterator.next()) != nil {}
          }
          for value in 0..<200 { input.yield(value) }
          consumer.cancel()
          await consumer.value
          for task in tasks { await task.value }
          input.finish()
        }
      }
    }
  }

  /// Requests cancelled while others wait: every request that was not cancelled is granted (a
  /// cancelled one may have been granted before its cancellation), and nothing is left waiting.
  @Test func cancellationStormsConsumeNothing() async throws {
    let limiter = RateLimiter(permits: 2_000, per: .milliseconds(100), burst: 100, clock: ContinuousClock())
    let outcomes = await withTaskGroup(of: Bool.self) { group in
      for index in 0..<2_000 {
        group.addTask {
          let request = Task { try await limiter.acquire() }
          if index.isMultiple(of: 3) { request.cancel() }
          return (try? await request.value) != nil
        }
      }
      return await group.reduce(into: [Bool]()) { $0.append($1) }
    }
    #expect(limiter.waitingCount == 0)
    let granted = outcomes.filter { $0 }.count
    #expect(granted >= 2_000 - 667)  // every request that was not cancelled
  }
}

extension AsyncIteratorProtocol where Self: PacedIterator, Element == Int {
  /// The iterator as an existential, so both operators can be picked at run time.
  var erased: any PacedIterator<Int> { self }
}
