/// A rate limit for async code, under any ``RateLimit``: a token bucket (`permits` per
/// `interval`, up to `burst` at once), a sliding window or a fixed window, granted in first-come
/// first-served order.
///
/// ```swift
/// let limiter = RateLimiter(permits: 10, per: .seconds(1))   // 10 requests a second
/// for url in urls {
///   try await limiter.acquire()        // suspends until a permit is available
///   try await download(url)
/// }
///
/// let uploads = RateLimiter(limit: .slidingWindow(permits: 3, per: .seconds(10)))  // at most 3 in any 10 s
/// ```
///
/// A token bucket starts full: `burst` permits (by default `permits`, one interval's worth) can be
/// taken at once; after that, permits come back at the steady rate, one every
/// `interval / permits`, exactly (integer arithmetic, no drift). A window limit starts empty: its
/// `permits` can be taken at once, then each permit comes back when its grant leaves the window
/// (sliding) or when the next window starts (fixed). The article <doc:RateLimiter> says which to
/// pick.
///
/// - ``acquire(cost:isolation:)`` suspends until its permits are available, in FIFO order: a request
///   never overtakes an earlier one, even a smaller request behind a large one. If its task is
///   cancelled first it throws `CancellationError` and consumes nothing. The request joins the
///   queue on the caller's actor, before `acquire` first suspends, so tasks started in order
///   from one actor are granted in that order, and the code after their `acquire()` starts in
///   that order too (see ``acquire(cost:isolation:)``).
/// - ``tryAcquire(cost:)->RateLimitDecision`` never waits: it takes the permits if they are available and nobody is
///   waiting (`.allowed(remaining:)`), and answers `.limited(retryAfter:)` otherwise, as
///   ``KeyedRateLimiter`` does for a key. ``decide(cost:)`` is the same decision for a cost that
///   comes from outside (a request's header): it throws ``InvalidInput`` where `tryAcquire` traps.
/// - A cost of 0 takes nothing and is answered as a cost of 1 would be: `tryAcquire(cost: 0)` is
///   allowed only when one permit is available, and `acquire(cost: 0)` waits as `acquire()`
///   would.
/// - A cost above the burst can never be granted: `acquire` throws
///   ``InvalidInput/costAboveBurst(cost:burst:)`` and `tryAcquire` answers
///   `.limited(retryAfter: RateLimitDecision.never)`; neither takes anything.
///
/// Works on any clock whose duration is `Duration`; pass a ``TestScheduler`` for virtual time.
/// Safe from any task; the lock is never held while a waiter is resumed.
public final class RateLimiter: Sendable {
  /// The limit and its policy; a ``KeyedRateLimiter``'s `limit` in the same words.
  public let limit: RateLimit
  // The engine of the limit's policy, specialised for its counter: exactly one is set. Three
  // constants rather than an enum, so that reaching the engine retains nothing.
  private let tokenBucket: RateLimiterEngine<TokenBucket>?
  private let slidingWindow: RateLimiterEngine<SlidingWindowLog>?
  private let fixedWindow: RateLimiterEngine<FixedWindowCounter>?

  /// A rate limiter granting `permits` per `interval`.
  ///
  /// - Parameters:
  ///   - permits: How many permits come back per `interval`. Positive.
  ///   - interval: The period of the rate. At least 1 ns.
  ///   - burst: The bucket's capacity: how many permits can be taken at once after a quiet
  ///     period; `permits` by default. Positive.
  ///   - clock: The clock that measures time: `ContinuousClock` by default, or a ``TestScheduler``.
  ///
  /// Extreme values do not trap: an `interval` beyond `Int64.max` nanoseconds (about 292 years,
  /// such as `.seconds(Int64.max)`) counts as `Int64.max` nanoseconds, and a `burst` of billions
  /// of permits of a slow rate is capped at what 64-bit arithmetic counts. A request whose
  /// permits would come back only after the end of the clock's timeline (``PaceInstant/max``)
  /// is never granted early: it waits until its task is cancelled.
  @inlinable
  public convenience init<C: Clock>(
    permits: Int, per interval: Duration, burst: Int? = nil, clock: C = ContinuousClock()
  ) where C.Duration == Duration {
    self.init(permits: permits, per: interval, burst: burst ?? permits, clock: AsyncClock(clock))
  }

  @usableFromInline
  convenience init(permits: Int, per interval: Duration, burst: Int, clock: AsyncClock) {
    // The limiter's own words, before `RateLimit` checks the same.
    precondition(permits > 0, "RateLimiter: permits must be positive (got \(permits))")
    precondition(interval >= .nanoseconds(1), "RateLimiter: interval must be at least 1 ns (got \(interval))")
    precondition(burst > 0, "RateLimiter: burst must be positive (got \(burst))")
    self.init(limit: RateLimit(permits: permits, per: interval, burst: burst), clock: clock)
  }

  /// A rate limiter enforcing `limit`, under its policy.
  ///
  /// ```swift
  /// RateLimiter(limit: RateLimit(permits: 100, per: .seconds(60), burst: 20))  // smooths
  /// RateLimiter(limit: .slidingWindow(permits: 3, per: .seconds(10)))                  // at most 3 in any 10 s
  /// RateLimiter(limit: .fixedWindow(permits: 5_000, per: .seconds(3600)))              // 5,000 per clock hour
  /// ```
  ///
  /// - Parameters:
  ///   - limit: The limit and its policy.
  ///   - clock: The clock that measures time: `ContinuousClock` by default, or a ``TestScheduler``.
  ///     A fixed window starts at whole multiples of the window in Unix time on a real clock
  ///     (`ContinuousClock`, `SuspendingClock`), as a store's and most APIs' windows do, and at
  ///     the clock's origin on a test clock (a ``TestScheduler``'s zero).
  @inlinable
  public convenience init<C: Clock>(limit: RateLimit, clock: C = ContinuousClock()) where C.Duration == Duration {
    self.init(limit: limit, clock: AsyncClock(clock))
  }

  @usableFromInline
  init(limit: RateLimit, clock: AsyncClock) {
    self.limit = limit
    let now = clock.now()
    let rate = WindowRate(
      permits: limit.permits, per: limit.interval, unixNanosecondsAtOrigin: clock.unixNanosecondsAtOrigin)
    tokenBucket =
      limit.algorithm == .tokenBucket
      ? RateLimiterEngine(
        counter: TokenBucket(permits: limit.permits, per: limit.interval, burst: limit.burst, now: now), clock: clock)
      : nil
    slidingWindow =
      limit.algorithm == .slidingWindow
      ? RateLimiterEngine(counter: SlidingWindowLog(rate: rate, now: now), clock: clock) : nil
    fixedWindow =
      limit.algorithm == .fixedWindow
      ? RateLimiterEngine(counter: FixedWindowCounter(rate: rate, now: now), clock: clock) : nil
  }

  /// Waits until `cost` permits are available, then takes them.
  ///
  /// Requests are served in the order they arrive. A cost of 0 waits as a cost of 1 would and
  /// takes nothing.
  ///
  /// The request arrives on the caller's actor, before `acquire` first suspends: tasks started in
  /// order from the main actor (or any one actor) join the queue, and are granted, in that order.
  ///
  /// The code after `acquire()` starts in grant order, even for requests granted at the same
  /// instant (one timer, one `advance`): a granted request is resumed only once the request
  /// granted before it has returned from `acquire` on its own actor. So for callers on one actor
  /// (the main actor, say), the code after an earlier request's `acquire()` runs, up to its next
  /// suspension, before a later request's does: uploads queued in order start in order. Callers
  /// on different actors, or on none, return from `acquire` in grant order, and from there run
  /// concurrently. A request granted while earlier ones are still on their way out of `acquire`
  /// waits behind them, even when permits are available at once.
  ///
  /// - Parameters:
  ///   - cost: How many permits to take; 1 by default. 0 through the limit's burst.
  ///   - isolation: The caller's actor; leave the default.
  /// - Throws: `CancellationError` if the task is cancelled before the permits are granted; then
  ///   nothing is consumed. ``InvalidInput/negativeCost(_:)`` or
  ///   ``InvalidInput/costAboveBurst(cost:burst:)`` at once for a cost no wait would grant.
  public func acquire(cost: Int = 1, isolation: isolated (any Actor)? = #isolation) async throws {
    try InputRules.check(cost: cost, limit: limit)
    if let engine = tokenBucket { return try await engine.acquire(cost: cost, isolation: isolation) }
    if let engine = slidingWindow { return try await engine.acquire(cost: cost, isolation: isolation) }
    try await fixedWindow!.acquire(cost: cost, isolation: isolation)
  }

  /// Takes `cost` permits if they are available now and no request is waiting; never waits.
  ///
  /// The same decision, in the same words, as ``KeyedRateLimiter``'s `tryAcquire(_:cost:)` for one
  /// key.
  ///
  /// - Parameter cost: How many permits to take; 1 by default. Not negative. 0 takes none and is
  ///   answered as 1 would be: `.allowed(remaining:)` with the permits available now only if one
  ///   permit is.
  /// - Returns: `.allowed(remaining:)` with the whole permits left, or `.limited(retryAfter:)`
  ///   with how long until the same request would be allowed if nothing else is taken (behind the
  ///   waiting requests, while some wait); ``RateLimitDecision/never`` for a cost above the burst.
  public func tryAcquire(cost: Int = 1) -> RateLimitDecision {
    precondition(cost >= 0, "RateLimiter.tryAcquire: cost must not be negative (got \(cost))")
    // Optional chaining borrows the engine: no retain on the hot path.
    if let decision = tokenBucket?.tryAcquire(cost: cost) { return decision }
    if let decision = slidingWindow?.tryAcquire(cost: cost) { return decision }
    return fixedWindow!.tryAcquire(cost: cost)
  }

  /// Takes `cost` permits if they are available now and no request is waiting; never waits; for
  /// a cost that comes from outside (a request's header, a file's size), checked with a thrown
  /// error rather than a trap.
  ///
  /// The decision of ``tryAcquire(cost:)->RateLimitDecision``, in the words of ``KeyedRateLimiter``'s
  /// `decide(_:cost:)`: a cost outside ``InputRules`` (negative, or above the burst) throws, and
  /// takes nothing.
  ///
  /// ```swift
  /// let cost = Int(request.headers["X-Cost"] ?? "1") ?? 1
  /// switch try limiter.decide(cost: cost) {   // InvalidInput for -1 or a cost above the burst
  /// case .allowed: try await handle(request)
  /// case .limited(let retryAfter): throw TooManyRequests(retryAfter: retryAfter)
  /// }
  /// ```
  ///
  /// - Parameter cost: How many permits to take; 1 by default. 0 takes none and is answered as 1
  ///   would be.
  /// - Returns: `.allowed(remaining:)` with the whole permits left, or `.limited(retryAfter:)`
  ///   with how long until the same request would be allowed if nothing else is taken.
  /// - Throws: ``InvalidInput/negativeCost(_:)`` or ``InvalidInput/costAboveBurst(cost:burst:)``.
  public func decide(cost: Int = 1) throws -> RateLimitDecision {
    try InputRules.check(cost: cost, limit: limit)
    return tryAcquire(cost: cost)
  }

  /// Takes `cost` permits if they are available now and no request is waiting; never waits.
  /// Whether they were taken: `tryAcquire(cost:).isAllowed`.
  ///
  /// Pace 0.1.0's `tryAcquire()` returned this `Bool`; a condition such as
  /// `if limiter.tryAcquire()` still compiles, and means what it meant, with a warning: in
  /// `#expect(limiter.tryAcquire())` the `Bool` is picked without a word, so spell the question.
  ///
  /// - Parameter cost: How many permits to take; 1 by default. Not negative.
  /// - Returns: Whether they were taken.
  @_disfavoredOverload
  @available(
    *, deprecated,
    message: "tryAcquire(cost:) returns a RateLimitDecision: ask tryAcquire(cost:).isAllowed for whether it was allowed"
  )
  public func tryAcquire(cost: Int = 1) -> Bool {
    tryAcquire(cost: cost).isAllowed
  }

  /// Takes `permits` if they are available now and no request is waiting; never waits.
  ///
  /// - Parameter permits: How many permits to take.
  /// - Returns: Whether they were taken.
  @available(
    *, deprecated, renamed: "tryAcquire(cost:)",
    message: "tryAcquire(cost:) returns a RateLimitDecision: ask tryAcquire(cost:).isAllowed for whether it was allowed"
  )
  public func tryAcquire(_ permits: Int) -> Bool {
    tryAcquire(cost: permits).isAllowed
  }

  /// Waits until `permits` are available, then takes them.
  @_disfavoredOverload
  @available(*, deprecated, renamed: "acquire(cost:isolation:)")
  public func acquire(_ permits: Int = 1, isolation: isolated (any Actor)? = #isolation) async throws {
    try await acquire(cost: permits, isolation: isolation)
  }

  /// The whole permits a request could take now: those in a token bucket, or a window's permits
  /// not yet granted. Permits may be available while requests wait, if the first request needs
  /// more than there are.
  public var availablePermits: Int {
    if let permits = tokenBucket?.availablePermits { return permits }
    if let permits = slidingWindow?.availablePermits { return permits }
    return fixedWindow!.availablePermits
  }

  /// How many requests are waiting in ``acquire(cost:isolation:)``.
  public var waitingCount: Int {
    if let count = tokenBucket?.waitingCount { return count }
    if let count = slidingWindow?.waitingCount { return count }
    return fixedWindow!.waitingCount
  }

  /// Returns once at least `count` requests wait in ``acquire(cost:isolation:)``; resumed by the
  /// request that makes the count, not by polling. For PaceTesting's `waitForWaiters(_:)`.
  ///
  /// - Returns: `true` once they wait, or `false` after `timeout` of real time (`nil`: no limit).
  package func waitUntilWaitingCount(_ count: Int, timeout: Duration?) async -> Bool {
    if let engine = tokenBucket { return await engine.waitUntilWaitingCount(count, timeout: timeout) }
    if let engine = slidingWindow { return await engine.waitUntilWaitingCount(count, timeout: timeout) }
    return await fixedWindow!.waitUntilWaitingCount(count, timeout: timeout)
  }
}

/// The waiting, timers and decisions of one ``RateLimiter``, for one policy's counter: generic, so
/// that each policy's arithmetic is specialised and inlined in its limiter's hot path.
final class RateLimiterEngine<Counter: RateLimitCounting & Sendable>: Sendable {
  private typealias Continuation = UnsafeContinuation<Void, any Error>

  private typealias Waiter = RateLimitWaiter

  private struct State {
    var machine: RateLimitMachine<Counter>
    /// The waiting requests' continuations, by the ids the machine queues.
    var continuations: [UInt64: Waiter] = [:]
    var nextID: UInt64 = 0
    /// The timer for the first waiting request, armed as ``TimerSlot`` says.
    var timer = TimerSlot()
    /// Tests waiting for a number of waiting requests; empty outside tests.
    var watchers = CountWaiters()
    /// The granted requests not resumed yet, in grant order, from `handOffHead` on: each is
    /// resumed once the one granted before it has returned from `acquire` (the hand-off).
    var handOff: [Continuation] = []
    var handOffHead = 0
    /// Whether a granted request has been resumed and has not returned from `acquire` yet.
    var isHandingOff = false

    /// The next granted request to resume, when the one before has returned; it then holds the
    /// hand-off until it returns.
    mutating func takeHandOff() -> Continuation? {
      guard handOffHead < handOff.count else {
        isHandingOff = false
        return nil
      }
      let next = handOff[handOffHead]
      handOffHead += 1
      if handOffHead == handOff.count {
        handOff.removeAll(keepingCapacity: true)
        handOffHead = 0
      }
      isHandingOff = true
      return next
    }

    /// Takes the continuations the machine's action resumes, and reserves or disarms the timer.
    mutating func apply(_ action: RateLimitAction) -> Effects {
      var effects = Effects()
      for id in action.granted {
        guard let waiter = continuations.removeValue(forKey: id) else { continue }
        effects.granted.append(waiter)
        handOff.append(waiter.continuation)
      }
      if !isHandingOff { effects.handOff = takeHandOff() }
      if let id = action.refused { effects.refused = continuations.removeValue(forKey: id) }
      effects.watchers = watchers.takeReady(current: machine.waitingCount)
      if let deadline = action.wakeAt {
        // A timer armed for earlier looks again when it fires, and arms for what it finds then.
        if let armed = timer.deadline, armed <= deadline { return effects }
        (effects.arm, effects.superseded) = timer.reserve(at: deadline)
      } else if timer.isArmed {
        effects.superseded = timer.disarm()
      }
      return effects
    }
  }

  /// What to do once the lock is released.
  private struct Effects {
    /// The requests granted, to count in; of them only `handOff` is resumed now.
    var granted: [Waiter] = []
    /// The granted request to resume now: the next in the hand-off.
    var handOff: Continuation?
    var refused: Waiter?
    /// A request refused before it waited (its task was cancelled first).
    var refusedAtOnce: Continuation?
    var arm: TimerSlot.Ticket?
    /// The timer `arm` replaces, or the one no longer needed, to cancel.
    var superseded: (any PaceCancellable)?
    var watchers: [UnsafeContinuation<Bool, Never>] = []
    /// How many requests started waiting (`+1`) or stopped (`-n`): told to a ``TestScheduler``.
    var waitingChange = 0
  }

  private let clock: AsyncClock
  private let state: LockedState<State>

  init(counter: Counter, clock: AsyncClock) {
    self.clock = clock
    state = LockedState(State(machine: RateLimitMachine(counter: counter)))
  }

  deinit {
    // Waiters hold the limiter while they wait, so only the timer can be left.
    state.withLock { $0.timer.disarm() }?.cancel()
  }

  /// Waits for `cost` permits (0 through the burst, checked by the limiter) in FIFO order, queued
  /// on the caller's actor before the first suspension.
  func acquire(cost: Int, isolation: isolated (any Actor)?) async throws {
    try Task.checkCancellation()
    let clock = self.clock
    // At once, unless granted requests are still on their way out of `acquire`: this one is
    // granted after them, so it queues behind them in the hand-off.
    let now = clock.now()
    if state.withLock({ !$0.isHandingOff && $0.machine.tryAcquire(cost: cost, now: now).isAllowed }) { return }
    let id = state.withLock { state in
      state.nextID &+= 1
      return state.nextID
    }
    // A task that a TestScheduler counts as running (PaceTesting's `settle`) waits here: counted
    // out once queued, and in again by whatever grants or refuses it, before it can run.
    let tracked = clock.testScheduler?.followsCurrentTask ?? false
    // With `isolation`, neither the handler nor the continuation's body hops to another
    // executor: the request is queued before the first suspension, in the caller's order.
    try await withTaskCancellationHandler(
      operation: {
        try await withUnsafeThrowingContinuation(isolation: isolation) { (continuation: Continuation) in
          let effects = state.withLock { state -> Effects in
            guard !Task.isCancelled else { return Effects(refusedAtOnce: continuation) }
            state.continuations[id] = (continuation: continuation, tracked: tracked)
            var effects = state.apply(state.machine.enqueue(id: id, cost: cost, now: clock.now()))
            effects.waitingChange += 1
            return effects
          }
          carryOut(effects)
          // Counted out after the grants it made were counted in: the count never reads zero
          // while something is on its way.
          if tracked, effects.refusedAtOnce == nil { clock.testScheduler?.activityStopped() }
        }
      },
      onCancel: {
        carryOut(state.withLock { $0.apply($0.machine.cancel(id: id, now: clock.now())) })
      },
      isolation: isolation
    )
    // Granted, and back on the caller's actor: the request granted next may start.
    handOffToNext()
  }

  /// Resumes the request granted after the one that has just returned from `acquire`, if any.
  private func handOffToNext() {
    state.withLock { $0.takeHandOff() }?.resume()
  }

  /// The whole permits a request could take now.
  var availablePermits: Int {
    let clock = self.clock
    return state.withLock { $0.machine.availablePermits(now: clock.now()) }
  }

  /// How many requests wait.
  var waitingCount: Int {
    state.withLock { $0.machine.waitingCount }
  }

  /// Returns once at least `count` requests wait, or `false` after `timeout`.
  func waitUntilWaitingCount(_ count: Int, timeout: Duration?) async -> Bool {
    await state.waitUntil(count, in: \.watchers, timeout: timeout) { $0.machine.waitingCount >= $1 }
  }

  /// The decision for `cost` (not negative) now, taking the permits if it is allowed.
  func tryAcquire(cost: Int) -> RateLimitDecision {
    let clock = self.clock
    return state.withLock { $0.machine.tryAcquire(cost: cost, now: clock.now()) }
  }

  /// Arms the reserved timer with the lock released, as ``TimerSlot`` says: a scheduler may run
  /// the timer in line.
  private func arm(_ ticket: TimerSlot.Ticket) {
    TimerSlot.arm(ticket, schedule: clock.schedule, fire: { [weak self] in self?.timerFired(generation: $0) }) {
      timer in state.withLock { $0.timer.install(timer, for: ticket) }
    }
  }

  private func timerFired(generation: UInt64) {
    let clock = self.clock
    carryOut(
      state.withLock { state -> Effects in
        guard state.timer.fire(generation) else { return Effects() }
        return state.apply(state.machine.timerFired(now: clock.now()))
      }
    )
  }

  /// Performs the effects with the lock released.
  private func carryOut(_ effects: Effects) {
    effects.superseded?.cancel()
    if let ticket = effects.arm { arm(ticket) }
    if let scheduler = clock.testScheduler {
      let left = effects.granted.count + (effects.refused == nil ? 0 : 1)
      scheduler.suspendedCallersChanged(by: effects.waitingChange - left)
      // Each tracked request is counted in before it can run.
      for waiter in effects.granted + [effects.refused].compactMap({ $0 }) where waiter.tracked {
        scheduler.activityStarted()
      }
    }
    effects.refusedAtOnce?.resume(throwing: CancellationError())
    effects.refused?.continuation.resume(throwing: CancellationError())
    effects.handOff?.resume()
    for watcher in effects.watchers { watcher.resume(returning: true) }
  }
}
