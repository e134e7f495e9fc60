import Pace

/// A client-side rate limiter paced by the server: told what each response said about the quota
/// (a ``ServerQuota``), it holds the next requests for the same key until the server's window
/// allows them, so that a client stays under the limit instead of collecting 429s.
///
/// ```swift
/// let limiter = ServerPacedLimiter<String>()
/// try await limiter.acquire("api.example.com")     // waits for the key's turn
/// let response = try await send(request)
/// limiter.record(quota(of: response), for: "api.example.com")   // or recordFailure(for:)
/// ```
///
/// Each ``acquire(_:isolation:)`` starts one request, which ends with exactly one
/// ``record(_:for:)`` (its response came) or ``recordFailure(for:)`` (it had none). Per key:
///
/// - A key the server has told nothing yet has one request in flight at a time: the first
///   response says whether, and how, the server counts.
/// - `Retry-After` holds every request until then.
/// - `remaining` is what the server has left for this client, less every other request in flight
///   when it was told (they may not have been counted yet) and every request started since, until
///   the quota is whole again (`resetsIn`); then the whole `quota`, less the requests in flight.
/// - Once the server told its quota per window (or its quota and two resets, whose shortest step
///   is the window; or, telling only `Retry-After`, refused twice: the requests answered between
///   the first block's end and the second refusal are the quota), a local model of it
///   (`RateLimit` of `quota` per `window` under `localModel`, a sliding window by default)
///   counts every request started
///   since, and holds the next one until the model allows it. A sliding window of `q` per `w`
///   stays under a server's fixed window, sliding window or token bucket (of burst `q`) of the same
///   quota, and reaches its rate.
///
/// No single answer holds a key longer than `probeAfter` (5 minutes by default): when what the
/// server told (a far `Retry-After` or reset, a window no wait reaches) holds the key longer, one
/// waiting request is sent as a probe `probeAfter` after that answer, once nothing is in flight,
/// and its answer replaces what held the key; a probe held again schedules the next one. What the
/// limiter believes about a key is read with ``knowledge(for:)`` and dropped with ``forget(_:)``.
///
/// Requests start in FIFO order per key. A request never waits longer than `maximumWait`: one
/// that the server's demand would hold longer throws ``ServerPacingError/waitBeyondMaximum(required:maximumWait:)``
/// at once; one that waits for a response that does not come throws it after `maximumWait`.
/// A cancelled request throws `CancellationError` at once and takes nothing.
///
/// Keys are kept for the limiter's life (a client reaches few origins). Works on any clock whose
/// duration is `Duration`; pass a `TestScheduler` for virtual time. Safe from any task; the lock
/// is never held while a waiter is resumed.
public final class ServerPacedLimiter<Key: Hashable & Sendable>: Sendable {
  /// The longest a request waits in ``acquire(_:isolation:)``.
  public let maximumWait: Duration
  /// The longest one answer holds a key before a waiting request probes it.
  public let probeAfter: Duration
  /// How the local model counts a server's quota per window.
  public let localModel: RateLimit.Algorithm

  let storage: ServerPacingStorage<Key>

  /// A limiter for any number of keys.
  ///
  /// - Parameters:
  ///   - maximumWait: The longest a request waits; a longer demand throws
  ///     ``ServerPacingError/waitBeyondMaximum(required:maximumWait:)``. Not negative.
  ///   - localModel: How the local model counts a server's quota per window once told:
  ///     `.slidingWindow` (the default: safe against every policy of the same quota),
  ///     `.fixedWindow` (windows ending where the server said its quota is whole again) or
  ///     `.tokenBucket`.
  ///   - probeAfter: The longest one answer holds a key before a waiting request is sent to
  ///     probe it; 5 minutes by default. Positive. A server's demand to wait longer (a far
  ///     `Retry-After`, a quota whole only in a day) costs one request per `probeAfter` while
  ///     requests wait; an absurd one (a reset in 30,000 years) holds the key no longer.
  ///   - clock: The clock that measures waits: `ContinuousClock` by default, or a
  ///     `TestScheduler`.
  @inlinable
  public convenience init<C: Clock>(
    maximumWait: Duration = .seconds(60), localModel: RateLimit.Algorithm = .slidingWindow,
    probeAfter: Duration = .seconds(300), clock: C = ContinuousClock()
  ) where C.Duration == Duration {
    self.init(maximumWait: maximumWait, localModel: localModel, probeAfter: probeAfter, clock: AsyncClock(clock))
  }

  @usableFromInline
  init(maximumWait: Duration, localModel: RateLimit.Algorithm, probeAfter: Duration = .seconds(300), clock: AsyncClock)
  {
    precondition(maximumWait >= .zero, "ServerPacedLimiter: maximumWait must not be negative (got \(maximumWait))")
    precondition(probeAfter > .zero, "ServerPacedLimiter: probeAfter must be positive (got \(probeAfter))")
    self.maximumWait = maximumWait
    self.localModel = localModel
    self.probeAfter = probeAfter
    storage = ServerPacingStorage(
      maximumWait: maximumWait, localModel: localModel, probeAfter: probeAfter, clock: clock)
  }

  /// Waits until the server's quota for `key` allows one more request, then counts it in flight.
  ///
  /// The request arrives on the caller's actor before `acquire` first suspends, so requests
  /// started in order from one actor start in that order.
  ///
  /// - Parameters:
  ///   - key: What the server counts separately: an origin, a route, a credential.
  ///   - isolation: The caller's actor; leave the default.
  /// - Throws: `CancellationError` if the task is cancelled first (nothing is counted then);
  ///   ``ServerPacingError/waitBeyondMaximum(required:maximumWait:)`` if the request would wait
  ///   longer than ``maximumWait``.
  public func acquire(_ key: Key, isolation: isolated (any Actor)? = #isolation) async throws {
    try await storage.acquire(key, isolation: isolation)
  }

  /// Takes `key`'s turn if the limiter grants it now, without waiting: `true` if it did (the
  /// request is in flight: record its answer as after ``acquire(_:isolation:)``); `false`, with
  /// nothing counted, if the request would wait or be refused, or if others wait before it.
  public func tryAcquire(_ key: Key) -> Bool {
    storage.tryAcquire(key)
  }

  /// Tells the limiter that one of `key`'s requests got its response, and what the server said.
  ///
  /// - Parameters:
  ///   - quota: What the response said; an empty quota when it said nothing (the key is then
  ///     no longer probed).
  ///   - key: The key the request was acquired for.
  public func record(_ quota: ServerQuota, for key: Key) {
    storage.record(quota, for: key)
  }

  /// Tells the limiter that one of `key`'s requests ended without a response (a connection
  /// error, a cancellation): it is no longer in flight.
  public func recordFailure(for key: Key) {
    storage.recordFailure(for: key)
  }

  /// What the limiter believes about `key`'s server quota now: what the server told, what is
  /// left of it, what holds the key and when it is probed. A key never used reads as unanswered.
  public func knowledge(for key: Key) -> ServerPacingKnowledge { storage.knowledge(for: key) }

  /// Forgets what the server told about `key`: the next request probes it as a key never
  /// answered (one request, then what its answer says). For an app that knows better (the user
  /// signed in again, a plan changed); requests in flight stay counted, waiting ones are
  /// reconsidered at once.
  public func forget(_ key: Key) { storage.forget(key) }

  /// How many requests wait for `key`.
  public func waitingCount(for key: Key) -> Int { storage.waitingCount(for: key) }

  /// How many of `key`'s requests are in flight: acquired, and not yet recorded.
  public func inFlightCount(for key: Key) -> Int { storage.inFlightCount(for: key) }

  /// How many requests wait for their key's turn, over every key (the glossary: a count without
  /// `for:` is the total).
  public var waitingCount: Int { storage.totalWaitingCount }

  /// How many requests are in flight, over every key.
  public var inFlightCount: Int { storage.totalInFlightCount }
}

/// Why ``ServerPacedLimiter`` refused to wait.
public enum ServerPacingError: Error, Hashable, CustomStringConvertible {
  /// The request would wait longer than `maximumWait`: `required` is how long the server's demand
  /// would hold it (`nil`: unknown, a response it waited for never came).
  case waitBeyondMaximum(required: Duration?, maximumWait: Duration)

  /// What happened, in words.
  public var description: String {
    switch self {
    case .waitBeyondMaximum(let required?, let maximumWait):
      "The server's rate limit would hold the request \(required.paceDescription), beyond the maximum wait of "
        + "\(maximumWait.paceDescription)"
    case .waitBeyondMaximum(nil, let maximumWait):
      "The request waited the maximum of \(maximumWait.paceDescription) for a response that would tell the "
        + "server's rate limit"
    }
  }
}

/// The driver of ``ServerPacedLimiter``: takes the lock, asks the key's `ServerPacingMachine`,
/// releases the lock, then arms the key's timer and resumes the waiters.
final class ServerPacingStorage<Key: Hashable & Sendable>: Sendable {
  typealias Continuation = UnsafeContinuation<Void, any Error>

  struct KeyState {
    var machine: ServerPacingMachine
    /// The waiting requests' continuations, by the ids the machine queues.
    var continuations: [UInt64: Continuation] = [:]
    var timer = TimerSlot()
  }

  struct State {
    var keys: [Key: KeyState] = [:]
    var nextID: UInt64 = 0
  }

  /// What to do once the lock is released.
  struct Effects {
    var granted: [Continuation] = []
    /// Refused by the machine: they would wait, or have waited, beyond the maximum.
    var refused: [(Continuation, Duration?)] = []
    /// A request whose task was cancelled.
    var cancelled: Continuation?
    var arm: TimerSlot.Ticket?
    var superseded: (any PaceCancellable)?
    /// How many requests started waiting: told to a `TestScheduler`.
    var waitingChange = 0
  }

  let clock: AsyncClock
  let maximumWait: Duration
  let localModel: RateLimit.Algorithm
  let probeAfter: Duration
  let state: LockedState<State>

  init(maximumWait: Duration, localModel: RateLimit.Algorithm, probeAfter: Duration, clock: AsyncClock) {
    self.clock = clock
    self.maximumWait = maximumWait
    self.localModel = localModel
    self.probeAfter = probeAfter
    state = LockedState(State())
  }

  deinit {
    // Waiters hold the storage while they wait: only timers can be left.
    let timers = state.withLock { state in
      state.keys.keys.compactMap { key in state.keys[key]?.timer.disarm() }
    }
    for timer in timers { timer.cancel() }
  }

  /// Runs `event` on `key`'s machine under the lock (after keeping `waiter`'s continuation) and
  /// takes what its action resumes.
  private func update(
    _ key: Key, _ state: inout State, adding waiter: (UInt64, Continuation)? = nil,
    _ event: (inout ServerPacingMachine, PaceInstant) -> ServerPacingMachine.Action
  ) -> Effects {
    var keyState =
      state.keys.removeValue(forKey: key)
      ?? KeyState(
        machine: ServerPacingMachine(localModel: localModel, maximumWait: maximumWait, probeAfter: probeAfter))
    if let (id, continuation) = waiter { keyState.continuations[id] = continuation }
    let action = event(&keyState.machine, clock.now())
    var effects = Effects()
    for id in action.granted {
      if let continuation = keyState.continuations.removeValue(forKey: id) { effects.granted.append(continuation) }
    }
    for refusal in action.refused {
      if let continuation = keyState.continuations.removeValue(forKey: refusal.id) {
        effects.refused.append((continuation, refusal.required))
      }
    }
    if let deadline = action.wakeAt {
      if keyState.timer.deadline != deadline {
        (effects.arm, effects.superseded) = keyState.timer.reserve(at: deadline)
      }
    } else if keyState.timer.isArmed {
      effects.superseded = keyState.timer.disarm()
    }
    state.keys[key] = keyState
    return effects
  }

  func tryAcquire(_ key: Key) -> Bool {
    let (granted, effects) = state.withLock { state -> (Bool, Effects) in
      if let waiting = state.keys[key]?.machine.queue.count, waiting > 0 { return (false, Effects()) }
      state.nextID &+= 1
      let id = state.nextID
      var granted = false
      let effects = update(key, &state) { machine, now in
        let action = machine.enqueue(id: id, now: now)
        if action.granted.contains(id) {
          granted = true
          return action
        }
        // It would wait, or be refused: withdrawn, as if it had never come.
        return machine.cancel(id: id, now: now)
      }
      return (granted, effects)
    }
    carryOut(effects, key: key)
    return granted
  }

  func acquire(_ key: Key, isolation: isolated (any Actor)?) async throws {
    try Task.checkCancellation()
    let id = state.withLock { state in
      state.nextID &+= 1
      return state.nextID
    }
    // With `isolation`, neither the handler nor the continuation's body hops to another
    // executor: the request is queued before the first suspension, in the caller's order.
    try await withTaskCancellationHandler(
      operation: {
        try await withUnsafeThrowingContinuation(isolation: isolation) { (continuation: Continuation) in
          let effects = state.withLock { state -> Effects in
            guard !Task.isCancelled else { return Effects(cancelled: continuation, waitingChange: 1) }
            var effects = update(key, &state, adding: (id, continuation)) { machine, now in
              machine.enqueue(id: id, now: now)
            }
            effects.waitingChange = 1
            return effects
          }
          carryOut(effects, key: key)
        }
      },
      onCancel: {
        let effects = state.withLock { state -> Effects in
          // Gone already: granted or refused.
          guard let continuation = state.keys[key]?.continuations.removeValue(forKey: id) else { return Effects() }
          var effects = update(key, &state) { machine, now in machine.cancel(id: id, now: now) }
          effects.cancelled = continuation
          return effects
        }
        carryOut(effects, key: key)
      },
      isolation: isolation
    )
  }

  func record(_ quota: ServerQuota, for key: Key) {
    carryOut(state.withLock { update(key, &$0) { $0.record(quota, now: $1) } }, key: key)
  }

  func recordFailure(for key: Key) {
    carryOut(state.withLock { update(key, &$0) { $0.recordFailure(now: $1) } }, key: key)
  }

  func forget(_ key: Key) {
    carryOut(
      state.withLock { state -> Effects in
        guard state.keys[key] != nil else { return Effects() }
        return update(key, &state) { $0.forget(now: $1) }
      }, key: key)
  }

  func knowledge(for key: Key) -> ServerPacingKnowledge {
    let now = clock.now()
    return state.withLock { state in
      state.keys[key]?.machine.knowledge(now: now)
        ?? ServerPacingMachine(localModel: localModel, maximumWait: maximumWait).knowledge(now: now)
    }
  }

  func waitingCount(for key: Key) -> Int {
    state.withLock { $0.keys[key]?.machine.queue.count ?? 0 }
  }

  func inFlightCount(for key: Key) -> Int {
    state.withLock { $0.keys[key]?.machine.inFlight ?? 0 }
  }

  var totalWaitingCount: Int {
    state.withLock { $0.keys.values.reduce(0) { $0 + $1.machine.queue.count } }
  }

  var totalInFlightCount: Int {
    state.withLock { $0.keys.values.reduce(0) { $0 + $1.machine.inFlight } }
  }

  private func timerFired(_ key: Key, generation: UInt64) {
    carryOut(
      state.withLock { state -> Effects in
        guard state.keys[key]?.timer.fire(generation) == true else { return Effects() }
        return update(key, &state) { $0.timerFired(now: $1) }
      },
      key: key
    )
  }

  /// Performs the effects with the lock released.
  private func carryOut(_ effects: Effects, key: Key) {
    effects.superseded?.cancel()
    if let ticket = effects.arm {
      TimerSlot.arm(
        ticket, schedule: clock.schedule, fire: { [weak self] in self?.timerFired(key, generation: $0) }
      ) { timer in state.withLock { $0.keys[key]?.timer.install(timer, for: ticket) ?? false } }
    }
    if let scheduler = clock.testScheduler {
      let left = effects.granted.count + effects.refused.count + (effects.cancelled == nil ? 0 : 1)
      let change = effects.waitingChange - left
      if change != 0 { scheduler.suspendedCallersChanged(by: change) }
    }
    effects.cancelled?.resume(throwing: CancellationError())
    for (continuation, required) in effects.refused {
      continuation.resume(throwing: ServerPacingError.waitBeyondMaximum(required: required, maximumWait: maximumWait))
    }
    for continuation in effects.granted { continuation.resume() }
  }
}
