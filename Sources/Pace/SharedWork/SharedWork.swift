/// Concurrent callers asking for the same key share one run of the work (single flight), and
/// each gets its result or its error.
///
/// ```swift
/// let avatars = KeyedSharedWork<URL, Data>()
/// // Ten cells asking for the same avatar at once download it once.
/// let data = try await avatars.run(url) { try await download(url) }
/// ```
///
/// - A call for a key whose run is in flight joins it: the operation of the caller that started
///   the run is the one that runs; a joining caller's operation is not called.
/// - Each caller may cancel alone: its own call throws `CancellationError` at once, and the others
///   keep waiting. The run's task is cancelled only when its last caller has cancelled; the key
///   is then free at once, and the next call starts a new run.
/// - A call after the run has ended starts a new run, unless `reusingResultsFor` is positive: a
///   successful result is then returned to the calls made from the instant the run ended until
///   that duration later (exclusive), exactly on the clock. Errors are never reused.
///
/// The operation runs in a task of its own, started by the first caller (it inherits that
/// caller's priority and task-local values, not its actor). The lock is never held while the
/// operation runs or a caller is resumed. A run whose callers have all left is cancelled; a run's
/// task never holds the instance.
public final class KeyedSharedWork<Key: Hashable & Sendable, Value: Sendable>: Sendable {
  @usableFromInline let storage: SharedWorkStorage<Key, Value>

  /// How long a successful result is reused after its run ends; `.zero` for never.
  public let reuseDuration: Duration

  /// Shared work for any number of keys.
  ///
  /// - Parameters:
  ///   - reuse: How long a successful result is returned to new calls after its run ends; `.zero`
  ///     (the default) for never. Not negative. A duration beyond the end of the clock's timeline
  ///     (such as `.seconds(Int64.max)`) reuses the result for as long as the instance lives.
  ///   - clock: The clock that measures `reuse`: `ContinuousClock` by default, or a
  ///     ``TestScheduler``.
  @inlinable
  public convenience init<C: Clock>(reusingResultsFor reuse: Duration = .zero, clock: C = ContinuousClock())
  where C.Duration == Duration {
    self.init(reuse: reuse, clock: AsyncClock(clock))
  }

  /// `type` is the public type the precondition's message names.
  @usableFromInline
  init(reuse: Duration, clock: AsyncClock, type: StaticString = "KeyedSharedWork") {
    precondition(reuse >= .zero, "\(type): reusingResultsFor must not be negative (got \(reuse))")
    reuseDuration = reuse
    storage = SharedWorkStorage(reuse: reuse, clock: clock)
  }

  /// Returns the result of `key`'s run: the run in flight, a result still reused, or a new run of
  /// `operation`.
  ///
  /// - Parameters:
  ///   - key: What the work is for; calls with equal keys share a run.
  ///   - isolation: The caller's actor; leave the default.
  ///   - operation: The work, called only if this call starts a new run.
  /// - Returns: The run's value.
  /// - Throws: The run's error; `CancellationError` at once if this caller's task is cancelled,
  ///   whether or not the run goes on for other callers.
  @inlinable
  public func run(
    _ key: Key, isolation: isolated (any Actor)? = #isolation,
    _ operation: @escaping @Sendable () async throws -> Value
  ) async throws -> Value {
    try await storage.run(key, isolation: isolation, operation: operation)
  }

  /// How many runs are in flight.
  public var runningCount: Int { storage.runningCount }

  /// How many callers wait for `key`'s run; 0 when none is in flight.
  public func callerCount(for key: Key) -> Int { storage.callerCount(for: key) }

  /// Returns `true` once at least `count` callers wait for `key`'s run, resumed by the call
  /// that makes the count, not by polling; `false` after `timeout` of real time. For
  /// PaceTesting's `waitForCallers(_:for:timeout:)`.
  package func waitUntilCallerCount(_ count: Int, for key: Key, timeout: Duration?) async -> Bool {
    await storage.waitUntil(.callers(key, atLeast: count), timeout: timeout)
  }

  /// Returns `true` once at least `count` calls have reached the instance (joined a run, started
  /// one, reused a result or been refused); `false` after `timeout`. For PaceTesting's
  /// `waitForCalls(_:timeout:)`.
  package func waitUntilCallCount(_ count: Int, timeout: Duration?) async -> Bool {
    await storage.waitUntil(.calls(atLeast: count), timeout: timeout)
  }

  /// Returns once no run is in flight; for tests.
  package func waitUntilIdle() async {
    _ = await storage.waitUntil(.idle, timeout: nil)
  }
}

/// Concurrent callers share one run of the work (single flight): ``KeyedSharedWork`` for a single
/// key.
///
/// ```swift
/// let refresh = SharedWork<Token>()
/// // Every request that finds the token expired waits for the same refresh.
/// let token = try await refresh.run { try await authenticator.refreshToken() }
/// ```
///
/// The same rules as ``KeyedSharedWork``: a call while a run is in flight joins it; each caller may
/// cancel alone, and the run is cancelled when its last caller has; a call after the run ended
/// starts a new one, unless the last success is still reused.
public final class SharedWork<Value: Sendable>: Sendable {
  /// The only key.
  @usableFromInline
  struct Only: Hashable, Sendable {
    @usableFromInline init() {}
  }

  /// The work of the only key: this type is a ``KeyedSharedWork`` with one key.
  @usableFromInline let keyed: KeyedSharedWork<Only, Value>

  /// How long a successful result is reused after its run ends; `.zero` for never.
  public let reuseDuration: Duration

  /// Shared work for one key.
  ///
  /// - Parameters:
  ///   - reuse: How long a successful result is returned to new calls after its run ends; `.zero`
  ///     (the default) for never. Not negative.
  ///   - clock: The clock that measures `reuse`: `ContinuousClock` by default, or a
  ///     ``TestScheduler``.
  @inlinable
  public convenience init<C: Clock>(reusingResultsFor reuse: Duration = .zero, clock: C = ContinuousClock())
  where C.Duration == Duration {
    self.init(keyed: KeyedSharedWork(reuse: reuse, clock: AsyncClock(clock), type: "SharedWork"))
  }

  @usableFromInline
  init(keyed: KeyedSharedWork<Only, Value>) {
    self.keyed = keyed
    reuseDuration = keyed.reuseDuration
  }

  /// Returns the result of the run in flight, of a result still reused, or of a new run of
  /// `operation`.
  ///
  /// - Parameters:
  ///   - isolation: The caller's actor; leave the default.
  ///   - operation: The work, called only if this call starts a new run.
  /// - Returns: The run's value.
  /// - Throws: The run's error; `CancellationError` at once if this caller's task is cancelled.
  @inlinable
  public func run(
    isolation: isolated (any Actor)? = #isolation, _ operation: @escaping @Sendable () async throws -> Value
  ) async throws -> Value {
    try await keyed.run(Only(), isolation: isolation, operation)
  }

  /// Whether a run is in flight.
  public var isRunning: Bool { keyed.runningCount > 0 }

  /// How many callers wait for the run in flight; 0 when none is.
  public var callerCount: Int { keyed.callerCount(for: Only()) }

  /// Returns `true` once at least `count` callers wait for the run; `false` after `timeout`.
  /// For PaceTesting's `waitForCallers(_:timeout:)`.
  package func waitUntilCallerCount(_ count: Int, timeout: Duration?) async -> Bool {
    await keyed.waitUntilCallerCount(count, for: Only(), timeout: timeout)
  }

  /// Returns `true` once at least `count` calls have reached the instance; `false` after
  /// `timeout`. For PaceTesting's `waitForCalls(_:timeout:)`.
  package func waitUntilCallCount(_ count: Int, timeout: Duration?) async -> Bool {
    await keyed.waitUntilCallCount(count, timeout: timeout)
  }

  /// Returns once no run is in flight; for tests.
  package func waitUntilIdle() async {
    await keyed.waitUntilIdle()
  }
}
