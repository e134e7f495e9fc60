import PaceTestSupport
import PaceTesting
import Testing

@testable import Pace

/// An error a test's operation throws.
private struct WorkFailed: Error, Equatable {
  let code: Int
}

/// `SharedWorkMachine` driven directly: one event, one expected action.
@Suite struct SharedWorkMachineTests {
  @Test func callersJoinTheRunInFlightAndTheResultIsReusedForExactlyTheDuration() {
    var machine = SharedWorkMachine<String>(reuseNanoseconds: 200_000_000)
    #expect(machine.call("k", caller: 1, now: ms(0)) == .start(run: 1, forget: []))
    #expect(machine.call("k", caller: 2, now: ms(100)) == .join(run: 1))
    #expect(machine.call("other", caller: 3, now: ms(100)) == .start(run: 2, forget: []))
    #expect(machine.callerCount(for: "k") == 2)
    #expect(machine.runningCount == 2)
    #expect(
      machine.finished("k", run: 1, succeeded: true, now: ms(400))
        == .deliver(run: 1, to: [1, 2], keep: true, forget: []))
    #expect(machine.call("k", caller: 4, now: ms(599)) == .reuse(run: 1))
    #expect(machine.call("k", caller: 5, now: ms(600)) == .start(run: 3, forget: [1]))
    #expect(
      machine.finished("k", run: 3, succeeded: false, now: ms(700))
        == .deliver(run: 3, to: [5], keep: false, forget: []))
    #expect(machine.call("k", caller: 6, now: ms(700)) == .start(run: 4, forget: []))
  }

  @Test func aCallerLeavesAloneAndTheLastOneCancelsTheRun() {
    var machine = SharedWorkMachine<String>(reuseNanoseconds: 0)
    #expect(machine.call("k", caller: 1, now: ms(0)) == .start(run: 1, forget: []))
    #expect(machine.call("k", caller: 2, now: ms(0)) == .join(run: 1))
    #expect(machine.cancel("k", caller: 1) == .refuse(caller: 1, run: 1, cancelsRun: false))
    #expect(machine.cancel("k", caller: 1) == .none)
    #expect(machine.cancel("k", caller: 2) == .refuse(caller: 2, run: 1, cancelsRun: true))
    #expect(machine.runningCount == 0)
    // The key is free at once; the cancelled run's end is ignored.
    #expect(machine.call("k", caller: 3, now: ms(100)) == .start(run: 2, forget: []))
    #expect(machine.finished("k", run: 1, succeeded: true, now: ms(200)) == .none)
    #expect(machine.callerCount(for: "k") == 1)
    #expect(
      machine.finished("k", run: 2, succeeded: true, now: ms(300)) == .deliver(run: 2, to: [3], keep: false, forget: [])
    )
    #expect(machine.cancel("k", caller: 3) == .none)
    #expect(machine.entries.isEmpty)
  }

  /// Keys called once leave their kept results behind only until the count of kept results has
  /// doubled; the sweep forgets the expired ones.
  @Test func expiredResultsAreSweptAsKeptResultsAccumulate() {
    var machine = SharedWorkMachine<Int>(reuseNanoseconds: 100_000_000)
    for key in 0..<15 {
      _ = machine.call(key, caller: UInt64(key), now: ms(0))
      _ = machine.finished(key, run: UInt64(key + 1), succeeded: true, now: ms(0))
    }
    #expect(machine.entries.count == 15)
    _ = machine.call(99, caller: 99, now: ms(100))
    #expect(
      machine.finished(99, run: 16, succeeded: true, now: ms(100))
        == .deliver(run: 16, to: [99], keep: true, forget: Array(1...15)))
    #expect(machine.entries.count == 1)
  }

  @Test func hostileReuseDurationsSaturate() {
    var forever = SharedWorkMachine<String>(reuseNanoseconds: .max)
    _ = forever.call("k", caller: 1, now: ms(5))
    _ = forever.finished("k", run: 1, succeeded: true, now: ms(5))
    #expect(forever.call("k", caller: 2, now: PaceInstant(nanoseconds: .max - 1)) == .reuse(run: 1))
    var never = SharedWorkMachine<String>(reuseNanoseconds: -5)
    _ = never.call("k", caller: 1, now: .max)
    #expect(
      never.finished("k", run: 1, succeeded: true, now: .max) == .deliver(run: 1, to: [1], keep: false, forget: []))
    #expect(never.call("k", caller: 2, now: .max) == .start(run: 2, forget: []))
  }
}

/// The machine against a reference model written the obvious way, on seeded random timelines.
@Suite(.offThePool) struct SharedWorkReferenceModelTests {
  /// One key, as the reference model sees it.
  struct ModelKey {
    var run: UInt64?
    var callers: [UInt64] = []
    var kept: (run: UInt64, until: Int64)?
  }

  @Test func theMachineAgreesWithTheReferenceModel() {
    for seed in 0..<UInt64(fuzzRuns(300)) {
      var random = SeededGenerator(seed: seed)
      let reuse = [Int64(0), 100, 300][Int.random(in: 0..<3, using: &random)]
      var machine = SharedWorkMachine<Int>(reuseNanoseconds: reuse * 1_000_000)
      var model: [Int: ModelKey] = [:]
      var lastRun: UInt64 = 0
      var lastCaller: UInt64 = 0
      var now: Int64 = 0
      for _ in 0..<200 {
        now += Int64.random(in: 0...150, using: &random)
        let key = Int.random(in: 0..<3, using: &random)
        var entry = model[key] ?? ModelKey()
        switch Int.random(in: 0..<10, using: &random) {
        case 0..<5:
          lastCaller += 1
          let expected: SharedWorkAction
          if let run = entry.run {
            entry.callers.append(lastCaller)
            expected = .join(run: run)
          } else if let kept = entry.kept, now < kept.until {
            expected = .reuse(run: kept.run)
          } else {
            lastRun += 1
            expected = .start(run: lastRun, forget: entry.kept.map { [$0.run] } ?? [])
            entry = ModelKey(run: lastRun, callers: [lastCaller])
          }
          #expect(machine.call(key, caller: lastCaller, now: ms(now)) == expected, "seed \(seed)")
        case 5..<7:
          guard let run = entry.run, !entry.callers.isEmpty else { continue }
          let caller = entry.callers.remove(at: Int.random(in: 0..<entry.callers.count, using: &random))
          let last = entry.callers.isEmpty
          if last { entry.run = nil }
          #expect(
            machine.cancel(key, caller: caller) == .refuse(caller: caller, run: run, cancelsRun: last), "seed \(seed)")
        default:
          guard let run = entry.run else {
            // A stale end (a cancelled run's) changes nothing.
            #expect(machine.finished(key, run: lastRun + 1_000, succeeded: true, now: ms(now)) == .none)
            continue
          }
          let succeeded = Bool.random(using: &random)
          let keep = succeeded && reuse > 0
          let action = machine.finished(key, run: run, succeeded: succeeded, now: ms(now))
          guard case .deliver(run, let to, keep, let forget) = action else {
            Issue.record("seed \(seed): \(action)")
            return
          }
          #expect(to.sorted == entry.callers.sorted(), "seed \(seed)")
          entry = ModelKey(kept: keep ? (run, now + reuse) : nil)
          // The sweep forgets only results no longer reusable.
          for (other, otherEntry) in model where other != key {
            if let kept = otherEntry.kept, forget.contains(kept.run) {
              #expect(kept.until <= now, "seed \(seed)")
              model[other]?.kept = nil
            }
          }
        }
        model[key] = entry
        #expect(machine.runningCount == model.values.filter { $0.run != nil }.count, "seed \(seed)")
      }
    }
  }
}

/// `KeyedSharedWork` and `SharedWork` on virtual time, with exact times.
@Suite(.timeLimit(.minutes(3))) struct SharedWorkTests {
  let scheduler = TestScheduler()

  /// An operation that counts its runs, records a cancellation, and ends at `end`.
  func operation(
    _ value: Int, until end: PaceInstant, runs: Counter, cancelled: Signals<Void>? = nil
  ) -> @Sendable () async throws -> Int {
    let scheduler = self.scheduler
    return {
      runs.increment()
      do {
        try await scheduler.sleep(until: end)
      } catch {
        cancelled?.post(())
        throw error
      }
      return value
    }
  }

  @Test func concurrentCallersShareOneRunAndGetItsResult() async throws {
    let work = KeyedSharedWork<String, Int>(clock: scheduler)
    let runs = Counter()
    let got = Recorder<Int>(clock: scheduler)
    let op = operation(42, until: ms(1000), runs: runs)
    let first = Task { try await got.record(work.run("k", op)) }
    await work.waitForCallers(1, for: "k")
    scheduler.advance(to: ms(300))
    let second = Task { try await got.record(work.run("k", op)) }
    let third = Task { try await got.record(work.run("k", op)) }
    await work.waitForCallers(3, for: "k")
    #expect(work.runningCount == 1)
    await scheduler.waitForSleepers(1)
    scheduler.advance(to: ms(1000))
    try await first.value
    try await second.value
    try await third.value
    #expect(got.values == [42, 42, 42])
    #expect(got.times == [ms(1000), ms(1000), ms(1000)])
    #expect(runs.count == 1)
    #expect(work.runningCount == 0)
    #expect(scheduler.pendingCount == 0)
  }

  @Test func aFailedRunGivesEveryCallerItsError() async {
    let work = KeyedSharedWork<String, Int>(clock: scheduler)
    let scheduler = self.scheduler
    let op: @Sendable () async throws -> Int = {
      try await scheduler.sleep(until: ms(500))
      throw WorkFailed(code: 7)
    }
    let first = Task { try await work.run("k", op) }
    let second = Task { try await work.run("k", op) }
    await work.waitForCallers(2, for: "k")
    await scheduler.waitForSleepers(1)
    scheduler.advance(to: ms(500))
    await #expect(throws: WorkFailed(code: 7)) { try await first.value }
    await #expect(throws: WorkFailed(code: 7)) { try await second.value }
  }

  @Test func aCallerCancelsAloneAndTheOthersStillGetTheResult() async throws {
    let work = KeyedSharedWork<String, Int>(clock: scheduler)
    let runs = Counter()
    let cancelled = Signals<Void>()
    let op = operation(1, until: ms(1000), runs: runs, cancelled: cancelled)
    let leaving = Task { try await work.run("k", op) }
    let staying = Task { try await work.run("k", op) }
    await work.waitForCallers(2, for: "k")
    scheduler.advance(to: ms(200))
    leaving.cancel()
    await #expect(throws: CancellationError.self) { try await leaving.value }
    #expect(scheduler.now == ms(200))  // at once, without waiting for the run
    #expect(work.callerCount(for: "k") == 1)
    await scheduler.waitForSleepers(1)
    scheduler.advance(to: ms(1000))
    #expect(try await staying.value == 1)
    #expect(runs.count == 1)
    #expect(cancelled.queued.isEmpty)
  }

  @Test func theLastCallerToCancelCancelsTheRunAndFreesTheKey() async throws {
    let work = KeyedSharedWork<String, Int>(clock: scheduler)
    let runs = Counter()
    let cancelled = Signals<Void>()
    let first = Task { try await work.run("k", operation(1, until: ms(1000), runs: runs, cancelled: cancelled)) }
    let second = Task { try await work.run("k", operation(2, until: ms(1000), runs: runs)) }
    await work.waitForCallers(2, for: "k")
    await scheduler.waitForSleepers(1)
    scheduler.advance(to: ms(100))
    first.cancel()
    #expect(work.runningCount == 1)
    second.cancel()
    #expect(work.runningCount == 0)
    await cancelled.next()  // the operation's task saw the cancellation
    await #expect(throws: CancellationError.self) { try await first.value }
    await #expect(throws: CancellationError.self) { try await second.value }
    // The next call starts a new run at once.
    let third = Task { try await work.run("k", operation(3, until: ms(600), runs: runs)) }
    await work.waitForCallers(1, for: "k")
    await scheduler.waitForSleepers(1)
    scheduler.advance(to: ms(600))
    #expect(try await third.value == 3)
    #expect(runs.count == 2)
  }

  @Test func aCancelledTaskThrowsBeforeJoiningAnything() async {
    let work = KeyedSharedWork<String, Int>(clock: scheduler)
    let runs = Counter()
    let cancelled = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      return try await work.run("k", operation(1, until: ms(100), runs: runs))
    }
    await #expect(throws: CancellationError.self) { try await cancelled.value }
    #expect(runs.count == 0)
    #expect(work.runningCount == 0)
  }

  @Test func aCallAfterTheRunEndedStartsANewOne() async throws {
    let work = KeyedSharedWork<String, Int>(clock: scheduler)
    let runs = Counter()
    let first = Task { try await work.run("k", operation(1, until: ms(100), runs: runs)) }
    await scheduler.waitForSleepers(1)
    scheduler.advance(to: ms(100))
    #expect(try await first.value == 1)
    #expect(try await work.run("k") { 2 } == 2)
    #expect(runs.count == 1)
  }

  @Test func aSuccessIsReusedUntilExactlyTheDurationAfterTheRunEnded() async throws {
    let work = KeyedSharedWork<String, Int>(reusingResultsFor: .milliseconds(500), clock: scheduler)
    let runs = Counter()
    let first = Task { try await work.run("k", operation(1, until: ms(1000), runs: runs)) }
    await scheduler.waitForSleepers(1)
    scheduler.advance(to: ms(1000))
    #expect(try await first.value == 1)
    scheduler.advance(to: ms(1499))
    #expect(try await work.run("k") { 2 } == 1)  // reused: the run ended 499 ms ago
    #expect(try await work.run("other") { 3 } == 3)  // another key has its own runs
    scheduler.advance(to: ms(1500))
    #expect(try await work.run("k") { 4 } == 4)  // 500 ms after: a new run
    #expect(try await work.run("k") { 5 } == 4)  // whose result is reused in turn
    #expect(runs.count == 1)
  }

  @Test func aCancelledTaskThrowsEvenWhereAResultIsReused() async throws {
    let work = KeyedSharedWork<String, Int>(reusingResultsFor: .seconds(10), clock: scheduler)
    #expect(try await work.run("k") { 1 } == 1)
    let cancelled = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      return try await work.run("k") { 2 }
    }
    await #expect(throws: CancellationError.self) { try await cancelled.value }
    #expect(try await work.run("k") { 3 } == 1)  // the result is still reused by the others
  }

  @Test func aFailureIsNeverReused() async throws {
    let work = KeyedSharedWork<String, Int>(reusingResultsFor: .seconds(10), clock: scheduler)
    await #expect(throws: WorkFailed(code: 1)) { try await work.run("k") { throw WorkFailed(code: 1) } }
    #expect(try await work.run("k") { 2 } == 2)
  }

  @Test func aReuseBeyondTheTimelineSaturates() async throws {
    let work = SharedWork<Int>(reusingResultsFor: .seconds(Int64.max), clock: scheduler)
    #expect(try await work.run { 1 } == 1)
    scheduler.advance(to: PaceInstant(nanoseconds: .max - 1))
    #expect(try await work.run { 2 } == 1)
  }

  @Test func unkeyedWorkSharesItsOneRun() async throws {
    let work = SharedWork<Int>(clock: scheduler)
    let runs = Counter()
    let op = operation(9, until: ms(250), runs: runs)
    let callers = (0..<3).map { _ in Task { try await work.run(op) } }
    await work.waitForCallers(3)
    #expect(work.isRunning)
    #expect(work.callerCount == 3)
    await scheduler.waitForSleepers(1)
    scheduler.advance(to: ms(250))
    for caller in callers { #expect(try await caller.value == 9) }
    #expect(runs.count == 1)
    #expect(!work.isRunning)
  }

  @Test func theRunsHoldTheInstanceWeakly() async throws {
    var work: KeyedSharedWork<String, Int>? = KeyedSharedWork(clock: scheduler)
    weak var released: KeyedSharedWork<String, Int>?
    released = work
    let proceed = Signals<Void>()
    let ended = Signals<Void>()
    // An operation that ignores cancellation, so that its task outlives its callers.
    let caller = Task { [work] in
      try await work!.run("k") {
        await proceed.next()
        ended.post(())
        return 1
      }
    }
    await work!.waitForCallers(1, for: "k")
    caller.cancel()
    await #expect(throws: CancellationError.self) { try await caller.value }
    work = nil
    #expect(released == nil)  // released while its run's task still goes on
    proceed.post(())
    await ended.next()
  }
}

/// Shared work under real concurrency, for the thread sanitizer: callers join, leave and start
/// runs from many threads at once, and every caller gets the value or `CancellationError`.
@Suite(.timeLimit(.minutes(3))) struct SharedWorkStressTests {
  @Test func manyCallersJoiningAndCancellingAtOnce() async {
    let work = KeyedSharedWork<Int, Int>()
    let runs = Counter()
    let outcomes = await withTaskGroup(of: Bool.self) { group in
      for index in 0..<2_000 {
        group.addTask {
          let key = index % 7
          let call = Task {
            try await work.run(key) {
              runs.increment()
              await Task.yield()
              return key * 10
            }
          }
          if index % 3 == 0 { call.cancel() }
          switch await call.result {
          case .success(let value): return value == key * 10
          case .failure(let error): return error is CancellationError
          }
        }
      }
      return await group.reduce(into: [Bool]()) { $0.append($1) }
    }
    #expect(outcomes.count == 2_000)
    #expect(outcomes.allSatisfy { $0 })
    #expect(runs.count <= 2_000)
    #expect(work.runningCount == 0)
  }

  @Test func unkeyedCallersFromManyThreads() async throws {
    let work = SharedWork<Int>(reusingResultsFor: .milliseconds(1))
    try await withThrowingTaskGroup(of: Int.self) { group in
      for _ in 0..<1_000 {
        group.addTask { try await work.run { 5 } }
      }
      for try await value in group { #expect(value == 5) }
    }
  }
}

/// The diagrams of KeyedSharedWork.md, run through `SharedWork` on virtual time. One character is
/// 100 ms; a caller's letter in `calls` is its call, its capital in `cancels` the cancellation of
/// its task. The results show a caller's letter when it gets the value, its capital when it
/// throws `CancellationError`; `runs` shows, at a run's start, the caller whose call started it.
@Suite(.timeLimit(.minutes(3))) struct SharedWorkDocDiagramTests {
  let step: Int64 = 100

  func diagram(
    calls: String, cancels: String = "", operationSteps: Int64, reuseSteps: Int64 = 0
  ) async -> (runs: String, results: String) {
    let scheduler = TestScheduler()
    let step = self.step
    let work = SharedWork<String>(reusingResultsFor: .milliseconds(reuseSteps * step), clock: scheduler)
    let results = Signals<Emission<String>>()
    var log: [Emission<String>] = []
    var runs: [Emission<String>] = []
    var tasks: [String: Task<Void, Never>] = [:]
    var reported = 0
    var runEnd: Int64?
    let callEvents = Marbles.parse(calls, step: 1)
    let cancelEvents = Marbles.parse(cancels, step: 1)
    let last = (callEvents + cancelEvents).map(\.0).max() ?? 0

    func drain() async {
      while tasks.count - reported - work.callerCount > 0 {
        log.append(await results.next())
        reported += 1
      }
    }

    for index in 0...(last + operationSteps + reuseSteps + 1) {
      scheduler.advance(to: ms(index * step))
      if runEnd == index {
        await work.waitUntilIdle()
        runEnd = nil
      }
      await drain()
      for case (index, .element(let name)) in callEvents {
        let waiting = work.callerCount
        let end = ms((index + operationSteps) * step)
        tasks[name] = Task {
          do {
            _ = try await work.run {
              try await scheduler.sleep(until: end)
              return name
            }
            results.post(.value(name, at: scheduler.now))
          } catch {
            results.post(.value(error is CancellationError ? name.uppercased() : "!", at: scheduler.now))
          }
        }
        await work.waitForCalls(tasks.count)
        if waiting == 0 && work.callerCount == 1 {
          runs.append(.value(name, at: ms(index * step)))
          runEnd = index + operationSteps
        }
        await drain()
      }
      for case (index, .element(let name)) in cancelEvents {
        tasks[name.lowercased()]?.cancel()
        if work.callerCount == 0 { runEnd = nil }
        await drain()
      }
    }
    func sorted(_ emissions: [Emission<String>]) -> [Emission<String>] {
      emissions.sorted { lhs, rhs in
        guard case .value(let left, let leftTime) = lhs, case .value(let right, let rightTime) = rhs else {
          return false
        }
        return (leftTime, left.lowercased()) < (rightTime, right.lowercased())
      }
    }
    return (Marbles.render(sorted(runs), step: step), Marbles.render(sorted(log), step: step))
  }

  @Test func sharingAndReuseDiagram() async {
    let shared = await diagram(calls: "ab-c-d-e", operationSteps: 4, reuseSteps: 2)
    #expect(shared.runs == "a------e")
    #expect(shared.results == "----[abc]d-----e")
  }

  @Test func cancellationDiagram() async {
    let cancelled = await diagram(calls: "ab---c-d", cancels: "--A---C", operationSteps: 4)
    #expect(cancelled.runs == "a----c-d")
    #expect(cancelled.results == "--A-b-C----d")
  }
}
