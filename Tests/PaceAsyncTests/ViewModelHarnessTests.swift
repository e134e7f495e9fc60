import PaceTesting
import Testing

/// PaceTesting's pieces for async view models: the fake dependency, the immediate clock,
/// `expectReleased`, the recorder and the instant shorthands.
@Suite(.timeLimit(.minutes(3))) struct ViewModelHarnessTests {
  @MainActor final class SearchModel {
    private(set) var results: [String] = []
    let search: AsyncDebouncer<String, [String]>
    private(set) var delivery: Task<Void, Never>?

    init(clock: some Clock<Duration>, api: @escaping @Sendable (String) async throws -> [String]) {
      search = AsyncDebouncer(for: .milliseconds(300), clock: clock, operation: api)
    }

    func queryChanged(_ query: String) {
      let call = search.submit(query)
      delivery = Task {
        guard let found = try? await call.value else { return }
        results = found
      }
    }
  }

  static func answer(_ query: String) -> [String] {
    ["swift", "swiftui", "swift-testing"].filter { $0.hasPrefix(query) }
  }

  @MainActor @Test func theFakeRecordsEachCallAndAnswersAfterItsLatency() async {
    let scheduler = TestScheduler()
    let api = FakeDependency<String, [String]>(scheduler: scheduler, latency: .milliseconds(200), respond: Self.answer)
    let model = SearchModel(clock: scheduler, api: api.function)
    model.queryChanged("s")
    scheduler.advance(by: .milliseconds(100))
    model.queryChanged("swiftu")
    #expect(model.search.nextInvocation == .milliseconds(400))
    scheduler.advance(to: .milliseconds(400))
    await api.waitForCalls(1)
    #expect(api.calls == [.init(input: "swiftu", start: .milliseconds(400))])
    #expect(model.results == [])
    scheduler.advance(by: .milliseconds(200))
    await model.delivery?.value
    #expect(model.results == ["swiftui"])
    expectNothingScheduled(on: scheduler)
  }

  @Test func waitingForTheSecondCallReturnsOnceItSleeps() async throws {
    let scheduler = TestScheduler()
    let api = FakeDependency<Int, Int>(scheduler: scheduler, latency: .seconds(1)) { $0 * 2 }
    let first = Task { try await api(1) }
    let second = Task { try await api(2) }
    await api.waitForCalls(2)
    #expect(Set(api.inputs) == [1, 2])
    #expect(scheduler.pendingCount == 2)
    scheduler.advance(by: .seconds(1))
    #expect(try await first.value == 2)
    #expect(try await second.value == 4)
  }

  @Test func aFakeWithoutLatencyAnswersAtOnceAndAFailureIsThrown() async throws {
    struct Offline: Error {}
    let scheduler = TestScheduler()
    let api = FakeDependency<String, Int>(scheduler: scheduler) { query in
      if query.isEmpty { throw Offline() }
      return query.count
    }
    #expect(try await api("abc") == 3)
    await #expect(throws: Offline.self) { try await api("") }
    await api.waitForCalls(2)
    #expect(api.calls.map(\.start) == [.zero, .zero])
  }

  @Test func aCancelledCallThrowsFromItsSleep() async throws {
    let scheduler = TestScheduler()
    let api = FakeDependency<Int, Int>(scheduler: scheduler, latency: .seconds(1)) { $0 }
    let call = Task { try await api(1) }
    await api.waitForCalls(1)
    call.cancel()
    await #expect(throws: CancellationError.self) { try await call.value }
  }

  @Test func theImmediatePaceClockRunsAsyncCodeStraightThrough() async throws {
    let clock = ImmediatePaceClock()
    let search = AsyncDebouncer(for: .milliseconds(300), clock: clock) { (query: String) in query.uppercased() }
    #expect(try await search.submit("swift").value == "SWIFT")
    try await clock.sleep(for: .seconds(5))
    #expect(clock.now >= .seconds(5))
    let before = clock.now
    try await clock.sleep(until: .zero)  // the past: time does not go back
    #expect(clock.now == before)
  }

  @Test func theImmediatePaceClockStillHonoursCancellation() async {
    let clock = ImmediatePaceClock()
    let task = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      try await clock.sleep(for: .seconds(1))
    }
    await #expect(throws: CancellationError.self) { try await task.value }
  }

  @MainActor @Test func aModelWithAPendingSearchIsReleasedWithItsTimer() {
    let scheduler = TestScheduler()
    var model: SearchModel? = SearchModel(clock: scheduler) { _ in [] }
    model?.search.submit("swift").cancel()
    expectReleased(&model)
    #expect(model == nil)
  }

  @Test func aHeldObjectIsReported() {
    final class Thing {}
    let keeper = Thing()
    var thing: Thing? = keeper
    withKnownIssue { expectReleased(&thing) }
    withExtendedLifetime(keeper) {}
  }

  @Test func theRecorderKeepsOrderAndTimes() {
    let scheduler = TestScheduler()
    let recorder = LockedRecorder<String>(scheduler: scheduler)
    recorder.record("a")
    scheduler.advance(by: .milliseconds(250))
    recorder.record("b")
    #expect(recorder.values == ["a", "b"])
    #expect(recorder.times == [.zero, .milliseconds(250)])
    #expect(recorder.count == 2)
    recorder.removeAll()
    #expect(recorder.values.isEmpty)
    #expect(PaceInstant.seconds(2) == .milliseconds(2_000))
    #expect(PaceInstant.microseconds(1_500) == PaceInstant(nanoseconds: 1_500_000))
  }
}
