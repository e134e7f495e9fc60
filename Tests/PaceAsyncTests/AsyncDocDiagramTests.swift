import PaceTestSupport
import PaceTesting
import Testing

@testable import Pace

/// The diagrams and examples of AsyncOperators.md, AsyncDebouncer.md and RateLimiter.md, run
/// through the real operators on virtual time. One character is 100 ms.
@Suite(.timeLimit(.minutes(3))) struct AsyncDocDiagramTests {
  let step: Int64 = 100

  func debounced(_ base: String, edges: Edges = .trailing) async -> String {
    let log = await runTimeline(Marbles.parse(base, step: step)) { upstream, scheduler in
      upstream.debounced(for: .milliseconds(300), edges: edges, clock: scheduler)
    }
    return Marbles.render(log, step: step)
  }

  func throttled(_ base: String) async -> String {
    let log = await runTimeline(Marbles.parse(base, step: step)) { upstream, scheduler in
      upstream.throttled(for: .milliseconds(300), clock: scheduler)
    }
    return Marbles.render(log, step: step)
  }

  // MARK: AsyncOperators.md

  @Test func debouncedDiagrams() async {
    #expect(await debounced("a-b-c-------d---|") == "-------c-------d|")
    #expect(await debounced("a-b-c-------d---|", edges: .both) == "a------c----d---|")
  }

  @Test func throttledDiagram() async {
    #expect(await throttled("abcdefg-----h") == "a--c--f--g--h")
  }

  @Test func endOfTheBaseSequenceDiagrams() async {
    #expect(await debounced("a-b-|") == "----[b|]")
    #expect(await throttled("abcd|") == "a--c[d|]")
    #expect(await debounced("a-b^") == "---[b^]")
  }

  @Test func virtualTimeExample() async {
    let scheduler = TestScheduler()
    let (queries, input) = AsyncStream<String>.makeStream()
    var results = queries.debounced(for: .milliseconds(300), clock: scheduler).makeAsyncIterator()
    input.yield("swift")
    input.finish()
    #expect(await results.next() == "swift")
    #expect(await results.next() == nil)
  }

  // MARK: AsyncDebouncer.md

  func invocations(
    _ calls: String, through make: (WorkTimeline<String>) -> some AsyncWorkPacing<String, String>
  ) async -> (diagram: String, results: [String?]) {
    let timeline = WorkTimeline<String>()
    let pacer = make(timeline)
    let inputs = Marbles.parse(calls, step: step).compactMap { time, event -> (Int64, String)? in
      if case .element(let value) = event { return (time, value) }
      return nil
    }
    let log = await timeline.run(inputs, through: pacer)
    return (Marbles.render(log, step: step), await timeline.results())
  }

  @Test func asyncDebouncerDiagrams() async {
    let trailing = await invocations("a-b-c-------d") { timeline in
      AsyncDebouncer(for: .milliseconds(300), clock: timeline.scheduler, operation: timeline.operation)
    }
    #expect(trailing.diagram == "-------c-------d")
    #expect(trailing.results == ["c", "c", "c", "d"])

    let leading = await invocations("a-b-c-------d") { timeline in
      AsyncDebouncer(
        for: .milliseconds(300), edges: .leading, clock: timeline.scheduler, operation: timeline.operation)
    }
    #expect(leading.diagram == "a-----------d")
    #expect(leading.results == ["a", nil, nil, "d"])
  }

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func staleWorkDiagram() async throws {
    let scheduler = TestScheduler()
    let work = GatedWork()
    let search = AsyncDebouncer(for: .milliseconds(300), clock: scheduler, operation: work.run)
    let a = Task.immediate { try await search("a") }
    scheduler.advance(to: ms(300))
    #expect(await work.started.next() == "a")
    scheduler.advance(to: ms(700))
    let b = Task.immediate { try await search("b") }
    await #expect(throws: CancellationError.self) { try await a.value }
    #expect(await work.cancelled.next() == "a")
    work.gate.open()
    scheduler.advance(to: ms(1000))
    #expect(try await b.value == "B")
  }
  #endif

  @Test func asyncThrottlerDiagram() async {
    let throttled = await invocations("abcdefg-----h") { timeline in
      AsyncThrottler(
        for: .milliseconds(300), staleWork: .discardResult, clock: timeline.scheduler, operation: timeline.operation)
    }
    #expect(throttled.diagram == "a--c--f--g--h")
  }

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func asyncDebouncerTestingExample() async throws {
    let scheduler = TestScheduler()
    let search = AsyncDebouncer(for: .milliseconds(300), clock: scheduler) { (query: String) in
      query.uppercased()
    }
    let swi = Task.immediate { try await search("swi") }
    let swift = Task.immediate { try await search("swift") }
    scheduler.advance(by: .milliseconds(300))
    #expect(try await swi.value == "SWIFT")
    #expect(try await swift.value == "SWIFT")
  }
  #endif

  // MARK: RateLimiter.md

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func rateLimiterDiagram() async throws {
    let scheduler = TestScheduler()
    let limiter = RateLimiter(permits: 1, per: .milliseconds(100), burst: 3, clock: scheduler)
    var requests: [(name: String, task: Task<Void, any Error>)] = []
    var grants: [Emission<String>] = []
    var granted = 0
    func record() {
      let total = requests.count - limiter.waitingCount
      while granted < total {
        grants.append(.value(requests[granted].name, at: scheduler.now))
        granted += 1
      }
    }
    for (time, event) in Marbles.parse("[abcdef]------g", step: step) {
      while let deadline = scheduler.nextDeadline, deadline <= ms(time) {
        scheduler.advance(to: deadline)
        record()
      }
      scheduler.advance(to: ms(time))
      guard case .element(let name) = event else { continue }
      requests.append((name, Task.immediate { try await limiter.acquire() }))
      record()
    }
    while let deadline = scheduler.nextDeadline {
      scheduler.advance(to: deadline)
      record()
    }
    #expect(Marbles.render(grants, step: step) == "[abc]def---g")
    for request in requests { try await request.task.value }
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func rateLimiterTestingExample() async throws {
    let scheduler = TestScheduler()
    let limiter = RateLimiter(permits: 10, per: .seconds(1), burst: 1, clock: scheduler)
    try await limiter.acquire()
    let second = Task.immediate { try await limiter.acquire() }
    #expect(scheduler.pendingDeadlines == [PaceInstant(.milliseconds(100))])
    scheduler.advance(by: .milliseconds(100))
    #expect(limiter.waitingCount == 0)
    try await second.value
  }
  #endif
}
