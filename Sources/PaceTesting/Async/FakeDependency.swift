/// A fake async dependency on virtual time: it records each call's input and the virtual instant
/// it started at, takes `latency` of a `TestScheduler`'s time to answer, and lets a test wait
/// for a number of calls without polling.
///
/// Pass ``function`` (or the fake itself, called as a function) where a view model takes its
/// back end:
///
/// ```swift
/// @MainActor @Test func theSearchAnswersAfterItsLatency() async throws {
///   let scheduler = TestScheduler()
///   let api = FakeDependency<String, [String]>(scheduler: scheduler, latency: .milliseconds(200)) { query in
///     ["swift", "swiftui"].filter { $0.hasPrefix(query) }
///   }
///   let search = AsyncDebouncer(for: .milliseconds(300), clock: scheduler, operation: api.function)
///   let results = search.submit("swiftu")
///   scheduler.advance(by: .milliseconds(300))     // the search starts at 300 ms
///   await api.waitForCalls(1)                     // and is in flight, sleeping on the scheduler
///   #expect(api.calls == [.init(input: "swiftu", start: .milliseconds(300))])
///   scheduler.advance(by: .milliseconds(200))
///   #expect(try await results.value == ["swiftui"])
/// }
/// ```
///
/// The latency is a sleep on the scheduler, so ``waitForCalls(_:)`` returns once the call is
/// sleeping: advancing the scheduler then answers it. A cancelled call throws
/// `CancellationError` from its sleep, as a real request would.
public final class FakeDependency<Input: Sendable, Output: Sendable>: Sendable {
  /// One call: its input and the virtual instant it started at.
  public struct Call: Sendable {
    /// What the call was given.
    public let input: Input
    /// When it started, on the scheduler's timeline.
    public let start: PaceInstant

    /// A call of `input` at `start`, to compare with ``FakeDependency/calls``.
    public init(input: Input, start: PaceInstant) {
      self.input = input
      self.start = start
    }
  }

  /// The scheduler whose time stamps the calls and measures the latency.
  public let scheduler: TestScheduler
  /// How long each call takes to answer, in the scheduler's time.
  public let latency: Duration
  private let respond: @Sendable (Input) throws -> Output
  private let recorded = LockedState<[Call]>([])
  /// Calls that are sleeping on the scheduler, or past their sleep.
  private let settledCalls = WaitableCount()

  /// A fake that answers with `respond(input)` after `latency` of `scheduler`'s time.
  ///
  /// - Parameters:
  ///   - scheduler: The test's scheduler.
  ///   - latency: How long each call takes; `.zero` answers without sleeping.
  ///   - respond: The answer to an input; it may throw, as the real dependency would.
  public init(
    scheduler: TestScheduler, latency: Duration = .zero,
    respond: @escaping @Sendable (Input) throws -> Output
  ) {
    self.scheduler = scheduler
    self.latency = latency
    self.respond = respond
  }

  /// Records the call, sleeps `latency` on the scheduler, then answers.
  public func callAsFunction(_ input: Input) async throws -> Output {
    let start = scheduler.now
    recorded.withLock { $0.append(Call(input: input, start: start)) }
    // Counted once its sleep is scheduled, so that a test advancing after `waitForCalls`
    // wakes it.
    if latency > .zero {
      try await scheduler.sleep(until: start.advanced(by: latency), whenScheduled: { [self] in settledCalls.add() })
    } else {
      settledCalls.add()
    }
    return try respond(input)
  }

  /// The fake as a function, for an initialiser that takes `@Sendable (Input) async throws -> Output`.
  public var function: @Sendable (Input) async throws -> Output {
    { [self] input in try await self(input) }
  }

  /// Every call so far, oldest first.
  public var calls: [Call] { recorded.withLock { $0 } }

  /// The inputs of the calls so far, oldest first.
  public var inputs: [Input] { recorded.withLock { $0.map(\.input) } }

  /// Returns once at least `count` calls have been made (and, with a latency, are sleeping on
  /// the scheduler, so that advancing it answers them); at once if they have.
  ///
  /// If fewer are made within `timeout` of real time, it fails the test (Swift Testing or
  /// XCTest, whichever runs it), naming the calls it saw, and returns.
  ///
  /// - Parameters:
  ///   - count: How many calls to wait for.
  ///   - timeout: The real time to wait before failing.
  ///   - fileID: Where to report a failure.
  ///   - filePath: Where to report a failure.
  ///   - line: Where to report a failure.
  ///   - column: Where to report a failure.
  public func waitForCalls(
    _ count: Int, timeout: Duration = .seconds(30),
    fileID: String = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column
  ) async {
    await waitFor(
      "FakeDependency.waitForCalls(\(count))", count, "call(s)", timeout: timeout,
      at: FailureLocation(fileID, filePath, line, column),
      until: { await settledCalls.waitUntil(atLeast: count, timeout: $0) },
      saw: { "\(calls.count) \(calls.map { "\($0.input)@\($0.start)" }) (now is \(scheduler.now))" },
      hint: "the code under test never made them")
  }

  /// ``waitForCalls(_:timeout:fileID:filePath:line:column:)`` with its default time limit: the
  /// signature of earlier releases, kept for code compiled against it.
  @_disfavoredOverload
  public func waitForCalls(_ count: Int) async {
    await waitForCalls(count, timeout: .seconds(30))
  }
}

extension FakeDependency.Call: Equatable where Input: Equatable {}

extension FakeDependency where Input == Void {
  /// A fake without input that answers with `respond()` after `latency` of `scheduler`'s time.
  ///
  /// ```swift
  /// let fetch = FakeDependency<Void, [String]>(scheduler: scheduler, latency: .milliseconds(200)) {
  ///   ["inbox", "sent"]
  /// }
  /// let folders = try await fetch()
  /// ```
  ///
  /// - Parameters:
  ///   - scheduler: The test's scheduler.
  ///   - latency: How long each call takes; `.zero` answers without sleeping.
  ///   - respond: The answer; it may throw, as the real dependency would.
  public convenience init(
    scheduler: TestScheduler, latency: Duration = .zero, respond: @escaping @Sendable () throws -> Output
  ) {
    self.init(scheduler: scheduler, latency: latency, respond: { (_: Void) in try respond() })
  }

  /// Records the call, sleeps `latency` on the scheduler, then answers: `try await fetch()`.
  public func callAsFunction() async throws -> Output {
    try await self(())
  }

  /// The fake as a function without input, for an initialiser that takes
  /// `@Sendable () async throws -> Output`.
  public var action: @Sendable () async throws -> Output {
    { [self] in try await self(()) }
  }
}
