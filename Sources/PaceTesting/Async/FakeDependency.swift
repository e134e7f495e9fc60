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

  private struct State {
    var calls: [Call] = []
    /// Calls that are sleeping on the scheduler, or past their sleep.
    var settled = 0
    var waiters: [(count: Int, continuation: UnsafeContinuation<Void, Never>)] = []

    mutating func takeSatisfiedWaiters() -> [UnsafeContinuation<Void, Never>] {
      let count = settled
      let ready = waiters.filter { $0.count <= count }.map(\.continuation)
      waiters.removeAll { $0.count <= count }
      return ready
    }
  }

  /// The scheduler whose time stamps the calls and measures the latency.
  public let scheduler: TestScheduler
  /// How long each call takes to answer, in the scheduler's time.
  public let latency: Duration
  private let respond: @Sendable (Input) throws -> Output
  private let state = LockedState(State())

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
    state.withLock { $0.calls.append(Call(input: input, start: start)) }
    // Counted once its sleep is scheduled, so that a test advancing after `waitForCalls`
    // wakes it.
    if latency > .zero {
      try await scheduler.sleep(until: start.advanced(by: latency), whenScheduled: { [self] in callSettled() })
    } else {
      callSettled()
    }
    return try respond(input)
  }

  /// The fake as a function, for an initialiser that takes `@Sendable (Input) async throws -> Output`.
  public var function: @Sendable (Input) async throws -> Output {
    { [self] input in try await self(input) }
  }

  /// Every call so far, oldest first.
  public var calls: [Call] { state.withLock { $0.calls } }

  /// The inputs of the calls so far, oldest first.
  public var inputs: [Input] { state.withLock { $0.calls.map(\.input) } }

  /// Returns once at least `count` calls have been made (and, with a latency, are sleeping on
  /// the scheduler, so that advancing it answers them); at once if they have. If fewer are ever
  /// made, it never returns: give the test a time limit.
  public func waitForCalls(_ count: Int) async {
    await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
      let ready = state.withLock { state in
        state.waiters.append((count, continuation))
        return state.takeSatisfiedWaiters()
      }
      for waiter in ready { waiter.resume() }
    }
  }

  private func callSettled() {
    let ready = state.withLock { state in
      state.settled += 1
      return state.takeSatisfiedWaiters()
    }
    for waiter in ready { waiter.resume() }
  }
}

extension FakeDependency.Call: Equatable where Input: Equatable {}
