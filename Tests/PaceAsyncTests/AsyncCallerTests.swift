import Dispatch
import PaceTestSupport
import Testing

@testable import Pace

/// How callers reach `AsyncDebouncer` and `AsyncThrottler`: `call` inherits the caller's
/// isolation, `submit` registers synchronously, `owner:` holds the owner weakly, and
/// `.dropCallsWhileRunning` ignores calls while the work runs.
@Suite(.timeLimit(.minutes(3))) struct AsyncCallerTests {
  let scheduler = TestScheduler()

  // MARK: call inherits the caller's isolation

  #if compiler(>=6.2)  // Task.immediate
  /// The reproduction: from the main actor, `Task.immediate` then `advance` failed 18
  /// times in 20 while `call` left the main actor before registering.
  @Test(arguments: 0..<20) @MainActor
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  func aCallFromTheMainActorIsRegisteredBeforeItFirstSuspends(_ run: Int) async throws {
    let scheduler = TestScheduler()
    let search = AsyncDebouncer(for: .milliseconds(300), clock: scheduler) { (query: String) in
      "\(query)@\(scheduler.now.nanoseconds / 1_000_000)"
    }
    let caller = Task.immediate { try await search("swi") }
    #expect(search.isPending)
    #expect(scheduler.pendingDeadlines == [ms(300)])
    scheduler.advance(by: .milliseconds(300))
    #expect(try await caller.value == "swi@300")
  }
  #endif

  /// The same without `Task.immediate` (Swift 6.0, iOS 16): two main-actor tasks run in the
  /// order they were made, and the caller's registers before the probe runs.
  @Test @MainActor func aMainActorTaskRegistersItsCallBeforeTheNextMainActorJob() async throws {
    let scheduler = TestScheduler()
    let search = AsyncDebouncer(for: .milliseconds(300), clock: scheduler) { (query: String) in
      "\(query)@\(scheduler.now.nanoseconds / 1_000_000)"
    }
    let caller = Task { @MainActor in try await search("swi") }
    let probe = Task { @MainActor in
      let pending = search.isPending
      scheduler.advance(by: .milliseconds(300))
      return pending
    }
    #expect(await probe.value)
    #expect(try await caller.value == "swi@300")
  }

  @Test func aCallFromAnActorIsRegisteredBeforeItFirstSuspends() async throws {
    let screen = SearchScreen(scheduler: scheduler)
    #expect(try await screen.searchAndAdvance("swift") == "swift@300")
  }

  // MARK: submit

  @Test func submitRegistersTheCallBeforeItReturns() async throws {
    let search = AsyncDebouncer(for: .milliseconds(300), clock: scheduler) { (query: String) in
      "\(query)@\(scheduler.now.nanoseconds / 1_000_000)"
    }
    let first = search.submit("s")
    #expect(search.isPending)
    #expect(scheduler.pendingDeadlines == [ms(300)])
    scheduler.advance(to: ms(100))
    let second = search.submit("sw")
    scheduler.advance(to: ms(399))
    #expect(search.isPending)
    scheduler.advance(to: ms(400))
    #expect(try await first.value == "sw@400")
    #expect(try await second.value == "sw@400")
  }

  @Test func submitOnAThrottlerLeadsAtOnce() async throws {
    let refresh = AsyncThrottler(for: .seconds(1), clock: scheduler) { (page: Int) in
      "\(page)@\(scheduler.now.nanoseconds / 1_000_000)"
    }
    let first = refresh.submit(1)
    #expect(try await first.value == "1@0")  // awaited, or the next call would supersede it
    scheduler.advance(to: ms(200))
    let second = refresh.submit(2)
    let third = refresh.submit(3)
    scheduler.advance(to: ms(1000))
    #expect(try await second.value == "3@1000")
    #expect(try await third.value == "3@1000")
  }

  @Test func cancellingTheSubmittedTaskCancelsTheCall() async {
    let invoked = Log<String>()
    let search = AsyncDebouncer(for: .milliseconds(300), clock: scheduler) { (query: String) in
      invoked.append(query)
      return query
    }
    let task = search.submit("a")
    task.cancel()
    await #expect(throws: CancellationError.self) { try await task.value }
    scheduler.advance(by: .milliseconds(300))
    #expect(invoked.all.isEmpty)
    #expect(search.pacer.invocationCountForTesting == 0)
  }

  @Test func releasingTheDebouncerFailsTheSubmittedTasks() async {
    var search: AsyncDebouncer<String, String>? = AsyncDebouncer(for: .milliseconds(300), clock: scheduler) {
      (query: String) in query
    }
    let task = search!.submit("a")
    search = nil
    await #expect(throws: CancellationError.self) { try await task.value }
    #expect(scheduler.pendingCount == 0)
  }

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func voidSubmitAndCall() async throws {
    let reload = AsyncDebouncer(for: .milliseconds(10), clock: scheduler) { scheduler.now }
    let first = reload.submit()
    let second = Task.immediate { try await reload.call() }
    scheduler.advance(by: .milliseconds(10))
    #expect(try await first.value == ms(10))
    #expect(try await second.value == ms(10))
  }
  #endif

  // MARK: Drop while running

  @Test func callsWhileTheWorkRunsAreDroppedAndTheWorkGoesOn() async throws {
    let work = GatedWork()
    let pay = AsyncThrottler(
      for: .milliseconds(100), edges: .leading, staleWork: .dropCallsWhileRunning, clock: scheduler
    ) { (tap: String) in
      try await work.run("\(tap)@\(scheduler.now.nanoseconds / 1_000_000)")
    }
    let first = pay.submit("tap 1")
    #expect(await work.started.next() == "tap 1@0")

    scheduler.advance(to: ms(50))
    let second = pay.submit("tap 2")  // inside the window and while the work runs
    await #expect(throws: CancellationError.self) { try await second.value }
    scheduler.advance(to: ms(150))
    let third = pay.submit("tap 3")  // the window is over, but the work still runs
    await #expect(throws: CancellationError.self) { try await third.value }
    #expect(!pay.isPending)
    #expect(pay.pacer.invocationCountForTesting == 1)

    work.gate.open()
    #expect(try await first.value == "TAP 1@0")  // the work was neither cancelled nor superseded
    #expect(work.cancelled.queued.isEmpty)

    scheduler.advance(to: ms(300))
    let fourth = pay.submit("tap 4")  // the work has ended: paced as usual
    #expect(try await fourth.value == "TAP 4@300")
    #expect(pay.pacer.invocationCountForTesting == 2)
  }

  /// The diagram of MainActorApps.md: the work runs from 0 to 500 ms.
  @Test func theDropWhileRunningDiagram() async throws {
    let work = GatedWork()
    let pay = AsyncThrottler(
      for: .milliseconds(100), edges: .leading, staleWork: .dropCallsWhileRunning, clock: scheduler
    ) { (tap: String) in
      try await work.run("\(tap)@\(scheduler.now.nanoseconds / 1_000_000)")
    }
    let a = pay.submit("a")
    #expect(await work.started.next() == "a@0")
    scheduler.advance(to: ms(200))
    let b = pay.submit("b")
    scheduler.advance(to: ms(400))
    let c = pay.submit("c")
    scheduler.advance(to: ms(500))
    work.gate.open()
    #expect(try await a.value == "A@0")
    await #expect(throws: CancellationError.self) { try await b.value }
    await #expect(throws: CancellationError.self) { try await c.value }
    scheduler.advance(to: ms(800))
    let d = pay.submit("d")
    #expect(try await d.value == "D@800")
    #expect(pay.pacer.invocationCountForTesting == 2)
  }

  @Test func aDroppedCallLeavesTheDebouncersTimingUntouched() async throws {
    let work = GatedWork()
    let save = AsyncDebouncer(for: .milliseconds(100), staleWork: .dropCallsWhileRunning, clock: scheduler) {
      (draft: String) in
      try await work.run("\(draft)@\(scheduler.now.nanoseconds / 1_000_000)")
    }
    let first = save.submit("a")
    scheduler.advance(to: ms(100))
    #expect(await work.started.next() == "a@100")
    scheduler.advance(to: ms(150))
    let dropped = save.submit("b")
    await #expect(throws: CancellationError.self) { try await dropped.value }
    #expect(!save.isPending)
    #expect(scheduler.pendingCount == 0)  // no burst started
    work.gate.open()
    #expect(try await first.value == "A@100")
    scheduler.advance(to: ms(200))
    let next = save.submit("c")
    scheduler.advance(to: ms(300))
    #expect(try await next.value == "C@300")
  }

  // MARK: owner:

  @Test func theOwnerIsPassedToEachInvocation() async throws {
    let owner = Counter()
    let search = AsyncDebouncer(for: .milliseconds(300), clock: scheduler, owner: owner) {
      (owner: Counter, query: String) in
      owner.increment()
      return "\(query)@\(scheduler.now.nanoseconds / 1_000_000)"
    }
    let first = search.submit("a")
    scheduler.advance(to: ms(300))
    #expect(try await first.value == "a@300")
    #expect(owner.count == 1)
  }

  @Test func onceTheOwnerIsGonePendingWorkIsDroppedAndCallsThrow() async throws {
    var owner: Counter? = Counter()
    let invoked = Log<String>()
    let refresh = AsyncThrottler(for: .milliseconds(100), clock: scheduler, owner: owner!) {
      (_: Counter, page: String) in
      invoked.append(page)
      return page
    }
    #expect(try await refresh.submit("1").value == "1")
    let pending = refresh.submit("2")  // for the trailing edge at 100
    owner = nil
    scheduler.advance(to: ms(100))
    await #expect(throws: CancellationError.self) { try await pending.value }
    let late = refresh.submit("3")
    await #expect(throws: CancellationError.self) { try await late.value }
    #expect(invoked.all == ["1"])
    #expect(!refresh.isPending)
  }
}

/// An actor that calls a debouncer and advances virtual time in one turn of its own.
actor SearchScreen {
  let scheduler: TestScheduler
  let search: AsyncDebouncer<String, String>

  init(scheduler: TestScheduler) {
    self.scheduler = scheduler
    search = AsyncDebouncer(for: .milliseconds(300), clock: scheduler) { (query: String) in
      "\(query)@\(scheduler.now.nanoseconds / 1_000_000)"
    }
  }

  func searchAndAdvance(_ query: String) async throws -> String {
    // Both run on this actor, in order: the call registers before the probe advances time.
    let caller = Task { try await search(query) }
    let probe = Task {
      let pending = search.isPending
      scheduler.advance(by: .milliseconds(300))
      return pending
    }
    guard await probe.value else { return "not registered" }
    return try await caller.value
  }
}

/// A counter that can be an owner.
final class Counter: Sendable {
  private let value = LockedState(0)
  func increment() { value.withLock { $0 += 1 } }
  var count: Int { value.withLock { $0 } }
}

/// `submit`, `owner:` and `.dropCallsWhileRunning` under concurrent callers, for the thread
/// sanitizer: every caller is answered, and nothing races.
@Suite(.timeLimit(.minutes(3))) struct AsyncCallerStressTests {
  @Test func concurrentSubmitsWhileTheOwnerGoesAway() async {
    let scheduler = TestScheduler()
    let clockHand = DispatchQueue(label: "clock hand")
    let owner = LockedState<Counter?>(Counter())
    let search = AsyncDebouncer(for: .milliseconds(10), clock: scheduler, owner: owner.withLock { $0! }) {
      (owner: Counter, query: Int) in
      owner.increment()
      return query
    }
    let answered = await withTaskGroup(of: Int.self) { group in
      for worker in 0..<8 {
        group.addTask {
          var answered = 0
          for index in 0..<100 {
            let task = search.submit(worker * 1000 + index)
            // Every wait ends: by the timer, or by a newer call. One thread at a time moves time.
            clockHand.sync { scheduler.advance(by: .milliseconds(10)) }
            _ = try? await task.value
            answered += 1
          }
          return answered
        }
      }
      group.addTask {
        owner.withLock { $0 = nil }
        return 0
      }
      return await group.reduce(0, +)
    }
    #expect(answered == 800)
    scheduler.advance(by: .seconds(1))
    #expect(!search.isPending)
  }

  // real-time: a zero interval on ContinuousClock, so that windows close while calls race.
  @Test func concurrentCallsWhileWorkRunsAreDroppedOrAnswered() async {
    let running = Counter()
    let pay = AsyncThrottler(for: .zero, edges: .leading, staleWork: .dropCallsWhileRunning) { (tap: Int) in
      running.increment()
      return tap
    }
    let outcomes: (answered: Int, dropped: Int) = await withTaskGroup(of: (answered: Int, dropped: Int).self) {
      group in
      for worker in 0..<8 {
        group.addTask {
          var answered = 0
          var dropped = 0
          for index in 0..<200 {
            do {
              _ = try await pay(worker * 1000 + index)
              answered += 1
            } catch {
              dropped += 1
            }
          }
          return (answered, dropped)
        }
      }
      return await group.reduce((0, 0)) { ($0.0 + $1.answered, $0.1 + $1.dropped) }
    }
    #expect(outcomes.answered + outcomes.dropped == 1600)
    #expect(outcomes.answered == running.count)
  }
}
