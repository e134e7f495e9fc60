/// A circuit breaker per key: stops calls to a key (an origin, a service) that keeps failing,
/// answering them at once with the instant it will try again, and lets a few probe calls find
/// out when it has recovered.
///
/// ```
/// closed ──(failure ratio reached, with the minimum of calls)──▶ open(until:)
/// open ──(until passes: the next call)──▶ halfOpen
/// halfOpen ──(every probe succeeds)──▶ closed
/// halfOpen ──(a probe fails)──▶ open(until:)
/// ```
///
/// Closed, every call goes through, and its outcome counts for `window`. A failure that brings
/// the window's failures to `failureRatio` of its calls, once it holds at least `minimumCalls`,
/// opens the breaker for `coolDown`: calls throw ``CircuitBreakerError/open(until:retryAfter:)``
/// at once. The first call at or after `until` goes through as a probe (half-open), as do the
/// next `probes - 1`; others throw ``CircuitBreakerError/probesInFlight``. When every probe
/// succeeds the breaker closes with an empty window; a probe that fails opens it again.
///
/// ```swift
/// let breaker = KeyedCircuitBreaker<String>(failureRatio: 0.5, minimumCalls: 10)
/// let data = try await breaker.run("api.example.com") { try await fetch() }
/// ```
///
/// Or step by step, to report what an error does not say (a 503 answer, a 429 that is pacing):
///
/// ```swift
/// let permit = try breaker.permit("api.example.com")   // throws CircuitBreakerError
/// let head = try await send()
/// breaker.record(head.status >= 500 ? .failure : .success, for: permit)
/// ```
///
/// Every permit must be recorded once: a key is kept while a permit is out, and a probe that is
/// never reported holds its place in half-open. Keys that are closed with an empty window and no
/// permit out are forgotten, so memory follows the keys in use; a key's window holds one entry
/// per outcome reported in it.
public final class KeyedCircuitBreaker<Key: Hashable & Sendable>: Sendable {
  /// Where the breaker is for a key.
  public typealias State = CircuitBreakerState
  /// What became of a call, as its caller reports it.
  public typealias Outcome = CircuitBreakerOutcome

  /// Leave for one call to go through, to be recorded with ``KeyedCircuitBreaker/record(_:for:)``.
  public struct Permit: Sendable, Hashable {
    /// The key the call counts for.
    public let key: Key
    /// Whether the call is one of half-open's probes.
    public let isProbe: Bool
    let generation: UInt64
  }

  private struct Storage {
    var machines: [Key: CircuitBreakerStateMachine] = [:]
    var operationsSinceSweep = 0

    /// Forgets the idle keys once every so many calls: amortised O(1) per call, and the table
    /// stays within twice the keys in use.
    mutating func tick(now: PaceInstant) {
      operationsSinceSweep += 1
      guard operationsSinceSweep >= Swift.max(64, machines.count) else { return }
      operationsSinceSweep = 0
      machines = machines.filter { !$0.value.isIdle(now: now) }
    }
  }

  private let storage = LockedState(Storage())
  private let configuration: CircuitBreakerStateMachine.Configuration
  private let clock: AsyncClock
  private let onStateChange: (@Sendable (Key, State, State) -> Void)?

  /// A circuit breaker per key.
  ///
  /// - Parameters:
  ///   - failureRatio: The share of failures among the window's calls that opens the breaker:
  ///     above 0, at most 1.
  ///   - minimumCalls: How many calls the window must hold before the ratio counts. Positive.
  ///   - window: How long an outcome counts. Positive.
  ///   - coolDown: How long the breaker stays open before it lets probes through. Positive.
  ///   - probes: How many probe calls half-open lets through; all must succeed to close. Positive.
  ///   - clock: The clock that measures time: `ContinuousClock` by default, or a ``TestScheduler``.
  ///   - onStateChange: Called with the key, the old and the new state at every change of state,
  ///     with no lock held, on the thread that caused it.
  public init<C: Clock>(
    failureRatio: Double = 0.5,
    minimumCalls: Int = 10,
    window: Duration = .seconds(10),
    coolDown: Duration = .seconds(5),
    probes: Int = 1,
    clock: C = ContinuousClock(),
    onStateChange: (@Sendable (_ key: Key, _ from: State, _ to: State) -> Void)? = nil
  ) where C.Duration == Duration {
    precondition(
      failureRatio > 0 && failureRatio <= 1,
      "KeyedCircuitBreaker: failureRatio must be above 0 and at most 1 (got \(failureRatio))")
    precondition(minimumCalls > 0, "KeyedCircuitBreaker: minimumCalls must be positive (got \(minimumCalls))")
    precondition(window > .zero, "KeyedCircuitBreaker: window must be positive (got \(window))")
    precondition(coolDown > .zero, "KeyedCircuitBreaker: coolDown must be positive (got \(coolDown))")
    precondition(probes > 0, "KeyedCircuitBreaker: probes must be positive (got \(probes))")
    configuration = CircuitBreakerStateMachine.Configuration(
      failureRatio: failureRatio, minimumCalls: minimumCalls, window: window, coolDown: coolDown, probes: probes)
    self.clock = AsyncClock(clock)
    self.onStateChange = onStateChange
  }

  /// Asks whether a call for `key` may go through now.
  ///
  /// - Returns: A permit to record the call's outcome with.
  /// - Throws: ``CircuitBreakerError/open(until:retryAfter:)`` while the key's breaker is open,
  ///   ``CircuitBreakerError/probesInFlight`` while it is half-open with every probe out.
  public func permit(_ key: Key) throws(CircuitBreakerError) -> Permit {
    let now = clock.now()
    let (admission, transition) = storage.withLock { storage in
      storage.tick(now: now)
      return storage.machines[key, default: CircuitBreakerStateMachine(configuration)].permit(now: now)
    }
    report(transition, for: key)
    switch admission {
    case .call(let generation): return Permit(key: key, isProbe: false, generation: generation)
    case .probe(let generation): return Permit(key: key, isProbe: true, generation: generation)
    case .reject(let error): throw error
    }
  }

  /// Records what became of the call `permit` let through.
  ///
  /// - Returns: The key's new state if this outcome changed it (a failure that opens the breaker,
  ///   a probe's outcome that closes or reopens it); `nil` if the state stays as it was.
  @discardableResult
  public func record(_ outcome: Outcome, for permit: Permit) -> State? {
    let now = clock.now()
    let transition = storage.withLock { storage -> CircuitBreakerStateMachine.Transition? in
      storage.tick(now: now)
      // Kept while a permit is out: missing only for a permit recorded twice.
      guard var machine = storage.machines[permit.key] else { return nil }
      let transition = machine.record(outcome, probe: permit.isProbe, generation: permit.generation, now: now)
      storage.machines[permit.key] = machine
      return transition
    }
    report(transition, for: permit.key)
    return transition?.to
  }

  /// The key's state now.
  public func state(for key: Key) -> State {
    let now = clock.now()
    return storage.withLock { $0.machines[key]?.state(now: now) } ?? .closed
  }

  /// How many keys the breaker holds state for: those open, half-open, or closed with outcomes in
  /// their window or permits out.
  public var keyCount: Int {
    let now = clock.now()
    return storage.withLock { storage in storage.machines.values.count { !$0.isIdle(now: now) } }
  }

  /// How many keys the table holds, the idle ones not yet swept included: for tests of forgetting.
  var storedKeyCount: Int { storage.withLock { $0.machines.count } }

  /// Runs `operation` if the key's breaker lets it through, and records its outcome: a return is
  /// a success, an error for which `isFailure` is `true` a failure (rethrown), any other error
  /// is ignored (rethrown).
  ///
  /// - Parameters:
  ///   - key: The key the call counts for.
  ///   - isFailure: Whether an error counts against the key; every error but `CancellationError`
  ///     by default.
  ///   - isolation: The caller's actor; leave the default.
  ///   - operation: The call.
  /// - Throws: ``CircuitBreakerError`` without running `operation` when the breaker refuses it;
  ///   else what `operation` throws.
  public func run<Result>(
    _ key: Key,
    isFailure: (any Error) -> Bool = { !($0 is CancellationError) },
    isolation: isolated (any Actor)? = #isolation,
    _ operation: () async throws -> Result
  ) async throws -> Result {
    let permit = try permit(key)
    do {
      let result = try await operation()
      record(.success, for: permit)
      return result
    } catch {
      record(isFailure(error) ? .failure : .ignored, for: permit)
      throw error
    }
  }

  private func report(_ transition: CircuitBreakerStateMachine.Transition?, for key: Key) {
    guard let transition, let onStateChange else { return }
    onStateChange(key, transition.from, transition.to)
  }
}
