import CoreMetrics
import Pace

/// The send loop of ``PacedRequests``: pacing, attempts (with their timeout and hedge), retries,
/// all bounded by the send's deadline.
extension PacedRequests {
  /// How one attempt ended, once the limiter was told.
  enum AttemptOutcome<Body: Sendable>: Sendable {
    case answered((Body, ResponseHead), retryAfter: Duration?)
    case threw(any Error)
  }

  /// How a round (an attempt, and its hedge) ended, when it did not throw.
  enum RoundEnd<Body: Sendable>: Sendable {
    case answered((Body, ResponseHead), retryAfter: Duration?)
    case connectionError(any Error)
    case timedOut(after: Duration)
  }

  /// What a round's tasks report.
  enum RoundEvent<Body: Sendable>: Sendable {
    case attempt(index: Int, started: PaceInstant, AttemptOutcome<Body>)
    case timedOut
    case deadlinePassed
    case hedgeDue
    /// A timer cancelled: the round is over.
    case stopped
  }

  func sendLoop<Body: Sendable>(
    key: String,
    idempotent: Bool,
    deadline: Duration?,
    attemptTimeout: Duration?,
    isConnectionError: @Sendable (any Error) -> Bool,
    isolation: isolated (any Actor)?,
    _ attempt: @Sendable () async throws -> (Body, ResponseHead)
  ) async throws -> (Body, ResponseHead) {
    let deadline = deadline.map { time.now().advanced(by: $0) }
    retryBudget?.recordRequest()
    var attemptNumber = 1
    while true {
      // An open breaker answers at once, before the key's queue.
      let permit: KeyedCircuitBreaker<String>.Permit?
      do {
        permit = try breaker?.permit(key)
      } catch {
        metrics.breakerRefusals.increment()
        throw error
      }
      if permit?.isProbe == true { metrics.breakerProbes.increment() }
      let end: RoundEnd<Body>
      do {
        try await acquire(key, before: deadline, isolation: isolation)
        // After the key's turn: a place held while the turn is awaited would be latency the
        // concurrency limit's samples count against the upstream.
        let upstreamPermit = try await concurrency?.acquire(key, before: deadline)
        end = try await round(
          key: key, idempotent: idempotent, deadline: deadline, attemptTimeout: attemptTimeout,
          isConnectionError: isConnectionError, permit: upstreamPermit, isolation: isolation, attempt)
      } catch {
        // Nothing the key's health is known by: a wait refused, a cancellation, an error of the caller's.
        if let permit { breaker?.record(.ignored, for: permit) }
        throw error
      }
      if let permit, let breaker, let changed = breaker.record(Self.breakerOutcome(of: end), for: permit) {
        metrics.recordBreakerChange(to: changed)
      }
      let outcome: RetryStrategy.Outcome
      let retryAfter: Duration?
      switch end {
      case .answered(let result, let after): (outcome, retryAfter) = (.status(result.1.status), after)
      case .connectionError, .timedOut: (outcome, retryAfter) = (.connectionError, nil)
      }
      var decision = retryStrategy.decision(
        afterAttempt: attemptNumber, outcome: outcome, idempotent: idempotent, retryAfter: retryAfter)
      // Before the budget: a retry the deadline refuses takes nothing from it.
      if case .retry(let delay) = decision, let deadline { try checkWait(delay, before: deadline) }
      if case .retry = decision, let budget = retryBudget {
        if budget.tryWithdraw() {
          metrics.withdrawalsGranted.increment()
        } else {
          metrics.withdrawalsRefused.increment()
          decision = .stop(.budgetExhausted)
        }
      }
      guard case .retry(let delay) = decision else {
        switch end {
        case .answered(let result, _): return result
        case .connectionError(let error): throw error
        case .timedOut(let after): throw PacedRequestsError.attemptTimedOut(after: after)
        }
      }
      try Task.checkCancellation()
      if case .connectionError = end, let connectivity {
        try await waitForPath(connectivity, before: deadline)
        if let deadline { try checkWait(delay, before: deadline) }
      }
      metrics.recordRetry(after: outcome)
      if delay > .zero { try await time.sleep(for: delay) }
      attemptNumber += 1
    }
  }

  /// What a round says of its key's health: connection errors, timeouts and 5xx are failures,
  /// but a 503 with `Retry-After` (the limiter holds the key until then) and a 429 are pacing.
  static func breakerOutcome<Body>(of end: RoundEnd<Body>) -> CircuitBreakerOutcome {
    switch end {
    case .connectionError, .timedOut: .failure
    case .answered(let result, let retryAfter):
      switch result.1.status {
      case 429: .ignored
      case 503 where retryAfter != nil: .ignored
      case 500...599: .failure
      default: .success
      }
    }
  }

  /// Waits until `connectivity` says the path is up, no later than `deadline`.
  func waitForPath(_ connectivity: any ConnectivitySignal, before deadline: PaceInstant?) async throws {
    guard let deadline else { return try await connectivity.waitUntilReachable() }
    guard time.now() < deadline else { throw PacedRequestsError.deadlineExceeded(needed: nil, remaining: .zero) }
    // A task of its own, so that the deadline can cancel the wait alone.
    try await time.value(of: Task { try await connectivity.waitUntilReachable() }, cutAt: deadline)
  }

  /// Throws at once if a wait of `wait` from now would pass `deadline`.
  func checkWait(_ wait: Duration, before deadline: PaceInstant) throws {
    let remaining = time.now().duration(to: deadline)
    guard wait <= remaining, remaining > .zero else {
      throw PacedRequestsError.deadlineExceeded(needed: wait, remaining: max(remaining, .zero))
    }
  }

  /// Waits for `key`'s turn in the limiter, no later than `deadline`: at once if what the limiter
  /// knows holds the key beyond it, at the deadline if the key's queue still holds the request.
  func acquire(_ key: String, before deadline: PaceInstant?, isolation: isolated (any Actor)?) async throws {
    guard let deadline else { return try await limiter.acquire(key, isolation: isolation) }
    let remaining = time.now().duration(to: deadline)
    let knowledge = limiter.knowledge(for: key)
    // What holds the key for sure: a `Retry-After`, or no quota left until it is whole again.
    let exhausted = knowledge.remaining.map { $0 <= 0 } ?? false
    let held = max(knowledge.blockedFor ?? .zero, exhausted ? knowledge.resetsIn ?? .zero : .zero)
    guard held <= remaining, remaining > .zero else {
      throw PacedRequestsError.deadlineExceeded(needed: held > .zero ? held : nil, remaining: max(remaining, .zero))
    }
    try await time.value(
      of: Self.startAcquire(limiter, key, isolation: isolation), cutAt: deadline, isolation: isolation)
  }

  /// Starts `limiter.acquire(key)` in a task of its own (so that a deadline can cancel it alone)
  /// that runs on the caller's actor up to its first suspension: the request is queued before
  /// this returns, in the caller's order.
  static func startAcquire(
    _ limiter: ServerPacedLimiter<String>, _ key: String, isolation: isolated (any Actor)?
  ) -> Task<Void, any Error> {
    #if canImport(Darwin)
    // The Apple SDKs the package supports have no Task.immediate to compile against: enqueued on
    // the caller's actor, which runs its jobs in order.
    return Task {
      _ = isolation
      try await limiter.acquire(key, isolation: isolation)
    }
    #else
    return Task.immediate {
      _ = isolation
      try await limiter.acquire(key, isolation: isolation)
    }
    #endif
  }

  /// Takes `key`'s turn if the limiter grants it at once; whether it did. A request the limiter
  /// would hold is not queued.
  func acquireNow(_ key: String) -> Bool {
    limiter.tryAcquire(key)
  }

  /// One attempt, and what it told the limiter; its place in the key's concurrency limit, if it
  /// has one, is released as it ends, with what the attempt said of the upstream's load.
  func attemptOnce<Body: Sendable>(
    _ key: String, permit: UpstreamPermit?, cut: RoundCut?, isConnectionError: @Sendable (any Error) -> Bool,
    _ attempt: @Sendable () async throws -> (Body, ResponseHead)
  ) async -> AttemptOutcome<Body> {
    do {
      let result = try await attempt()
      permit?.release(UpstreamPermit.outcome(of: result.1))
      return .answered(result, retryAfter: record(result.1, for: key))
    } catch {
      if let permit {
        // A round's timeout or deadline cut it: the upstream was too slow. Cancelled otherwise
        // (the caller, a hedge that lost): it says nothing of the upstream.
        let outcome: AdaptiveConcurrencyLimiter.Outcome =
          if cut?.isMarked == true {
            .dropped
          } else if Task.isCancelled || error is CancellationError {
            .ignored
          } else {
            isConnectionError(error) ? .dropped : .ignored
          }
        permit.release(outcome)
      }
      limiter.recordFailure(for: key)
      return .threw(error)
    }
  }

  /// Tells the limiter what `head` said; the server's `Retry-After`.
  func record(_ head: ResponseHead, for key: String) -> Duration? {
    if head.status == 429 { metrics.rateLimited.increment() }
    if head.isFromCache {
      // A cache's answer says nothing current of the server's count (draft-ietf-httpapi-
      // ratelimit-headers-11, section 7.3): the request ends, and nothing is learned.
      limiter.recordFailure(for: key)
      return nil
    }
    let quota = ServerQuota(parsing: head, receivedAt: unixTime())
    limiter.record(quota, for: key)
    return quota.retryAfter
  }

  /// One attempt, cancelled at its timeout or the deadline, with its hedge if it has one.
  func round<Body: Sendable>(
    key: String,
    idempotent: Bool,
    deadline: PaceInstant?,
    attemptTimeout: Duration?,
    isConnectionError: @Sendable (any Error) -> Bool,
    permit: UpstreamPermit?,
    isolation: isolated (any Actor)?,
    _ attempt: @Sendable () async throws -> (Body, ResponseHead)
  ) async throws -> RoundEnd<Body> {
    // Whatever ends the round, no place is kept (an attempt that never started gives it back).
    defer { permit?.release(.ignored) }
    let started = time.now()
    let timeoutAt = attemptTimeout.map { started.advanced(by: $0) }
    // The earlier of the two cuts the attempt.
    let cut: (at: PaceInstant, event: RoundEvent<Body>)? =
      switch (timeoutAt, deadline) {
      case (let timeoutAt?, let deadline?): timeoutAt < deadline ? (timeoutAt, .timedOut) : (deadline, .deadlinePassed)
      case (let timeoutAt?, nil): (timeoutAt, .timedOut)
      case (nil, let deadline?): (deadline, .deadlinePassed)
      case (nil, nil): nil
      }
    let hedgeAt = idempotent ? hedge?.delay(for: key, latencies: latencies).map { started.advanced(by: $0) } : nil
    let hedgeDue = hedgeAt.flatMap { hedgeAt in cut.map { hedgeAt < $0.at } ?? true ? hedgeAt : nil }
    guard cut != nil || hedgeDue != nil else {
      let outcome = await attemptOnce(
        key, permit: permit, cut: nil, isConnectionError: isConnectionError, attempt)
      return try classify(outcome, key: key, started: started, isConnectionError: isConnectionError)
    }
    // The timers are armed here, at the round's start, on the clock: a `TestScheduler` fires
    // them at their exact instants, and they are not sleepers a test must tell apart.
    let cutSignal = cut.map { RoundSignal<Body>(firing: $0.event, at: $0.at, on: time) }
    let hedgeSignal = hedgeDue.map { RoundSignal<Body>(firing: .hedgeDue, at: $0, on: time) }
    let roundCut = RoundCut()
    defer {
      cutSignal?.disarm()
      hedgeSignal?.disarm()
    }
    return try await withoutActuallyEscaping(attempt) { attempt in
      try await withoutActuallyEscaping(isConnectionError) { isConnectionError in
        try await withThrowingTaskGroup(of: RoundEvent<Body>.self, returning: RoundEnd<Body>.self) { group in
          defer { group.cancelAll() }
          group.addTask {
            .attempt(
              index: 0, started: started,
              await self.attemptOnce(key, permit: permit, cut: roundCut, isConnectionError: isConnectionError, attempt))
          }
          if let cutSignal { group.addTask { await cutSignal.wait() } }
          if let hedgeSignal { group.addTask { await hedgeSignal.wait() } }
          var running: [Int: PaceInstant] = [0: started]
          while let event = try await group.next(isolation: isolation) {
            switch event {
            case .stopped: continue
            case .attempt(let index, let attemptStarted, let outcome):
              running[index] = nil
              if case .threw(let error) = outcome, !running.isEmpty, !(error is CancellationError),
                isConnectionError(error)
              {
                continue  // the other attempt may still answer
              }
              // The one still running is cancelled: it ran this long at least.
              let now = time.now()
              for other in running.values { latencies?.record(other.duration(to: now), for: key) }
              return try classify(outcome, key: key, started: attemptStarted, isConnectionError: isConnectionError)
            case .timedOut:
              roundCut.mark()
              return .timedOut(after: attemptTimeout ?? .zero)
            case .deadlinePassed:
              roundCut.mark()
              throw PacedRequestsError.deadlineExceeded(needed: nil, remaining: .zero)
            case .hedgeDue:
              guard running.count == 1 else { continue }
              // A hedge adds load: it goes only if its key's concurrency limit has a place free now.
              let hedgePermit = concurrency?.tryAcquire(key)
              if concurrency != nil, hedgePermit == nil { metrics.concurrencyHedgesHeld.increment() }
              guard concurrency == nil || hedgePermit != nil, await mayHedge(key, isolation: isolation) else {
                hedgePermit?.release(.ignored)
                continue
              }
              let hedgeStarted = time.now()
              running[1] = hedgeStarted
              group.addTask {
                .attempt(
                  index: 1, started: hedgeStarted,
                  await self.attemptOnce(
                    key, permit: hedgePermit, cut: roundCut, isConnectionError: isConnectionError, attempt))
              }
            }
          }
          // The first attempt always reports; only a cancelled group ends without it.
          throw CancellationError()
        }
      }
    }
  }

  /// The end of a round whose attempt ended with `outcome`; rethrows an error no retry mends.
  private func classify<Body: Sendable>(
    _ outcome: AttemptOutcome<Body>, key: String, started: PaceInstant,
    isConnectionError: @Sendable (any Error) -> Bool
  ) throws -> RoundEnd<Body> {
    switch outcome {
    case .answered(let result, let retryAfter):
      latencies?.record(started.duration(to: time.now()), for: key)
      return .answered(result, retryAfter: retryAfter)
    case .threw(let error):
      guard !(error is CancellationError), isConnectionError(error) else { throw error }
      return .connectionError(error)
    }
  }

  /// Whether a hedge of `key` may go now, its turn taken and its retry withdrawn if so.
  func mayHedge(_ key: String, isolation: isolated (any Actor)?) async -> Bool {
    if let breaker, breaker.state(for: key) != .closed { return false }
    if let budget = retryBudget, budget.availableRetries <= 0 { return false }
    guard acquireNow(key) else { return false }
    if let budget = retryBudget {
      guard budget.tryWithdraw() else {
        metrics.withdrawalsRefused.increment()
        limiter.recordFailure(for: key)
        return false
      }
      metrics.withdrawalsGranted.increment()
    }
    return true
  }
}

/// A timer of a round: armed on the clock when made, awaited by one of the round's tasks, which
/// it wakes with its event at its instant (or with `.stopped` when the task is cancelled).
final class RoundSignal<Body: Sendable>: Sendable {
  private enum State {
    case armed
    case waiting(UnsafeContinuation<PacedRequests.RoundEvent<Body>, Never>)
    case fired
    case done
  }

  private let event: PacedRequests.RoundEvent<Body>
  private let state = LockedState(State.armed)
  private let timer = LockedState<(any PaceCancellable)?>(nil)

  init(firing event: PacedRequests.RoundEvent<Body>, at instant: PaceInstant, on time: SendClock) {
    self.event = event
    let handle = time.schedule(at: instant) { [weak self] in self?.fire() }
    timer.withLock { $0 = handle }
  }

  func disarm() {
    timer.withLock { $0 }?.cancel()
  }

  private func fire() {
    let waiter = state.withLock { state -> UnsafeContinuation<PacedRequests.RoundEvent<Body>, Never>? in
      switch state {
      case .armed:
        state = .fired
        return nil
      case .waiting(let continuation):
        state = .done
        return continuation
      case .fired, .done:
        return nil
      }
    }
    waiter?.resume(returning: event)
  }

  /// The event once the timer fires; `.stopped` if the task is cancelled first.
  func wait() async -> PacedRequests.RoundEvent<Body> {
    await withTaskCancellationHandler {
      await withUnsafeContinuation { (continuation: UnsafeContinuation<PacedRequests.RoundEvent<Body>, Never>) in
        let result = state.withLock { state -> PacedRequests.RoundEvent<Body>? in
          switch state {
          case .armed:
            if Task.isCancelled {
              state = .done
              return .stopped
            }
            state = .waiting(continuation)
            return nil
          case .fired:
            state = .done
            return event
          case .waiting, .done:
            return .stopped
          }
        }
        if let result { continuation.resume(returning: result) }
      }
    } onCancel: {
      let waiter = state.withLock { state -> UnsafeContinuation<PacedRequests.RoundEvent<Body>, Never>? in
        switch state {
        case .waiting(let continuation):
          state = .done
          return continuation
        case .armed, .fired:
          state = .done
          return nil
        case .done:
          return nil
        }
      }
      waiter?.resume(returning: .stopped)
    }
  }
}
