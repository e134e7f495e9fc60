import Pace

/// What one key of a ``ServerPacedLimiter`` does: which waiting requests may start, and when to
/// look again, from what the server said and what is in flight. A value with exact integer time:
/// `now` comes in with every event, and an `Action` comes out. It holds no task, continuation
/// or clock.
///
/// A request may start when all of these allow it:
/// - the key is not blocked: a `Retry-After` blocks it until then;
/// - a key the server has told nothing yet has no request in flight (one request probes it);
/// - the server's `remaining`, less the requests in flight when it was told and those started
///   since, is above 0, until the quota is whole again (`now + resetsIn`); then the quota, less
///   the requests in flight, until a response tells more. Responses may overtake one another: one
///   whose reset is sooner than the one known can lower what is left, never bring the reset
///   closer; one whose reset has passed (its window ended on the way) tells nothing about what is
///   left;
/// - once the server told its quota per window (a window stated is kept by later answers that
///   state none; or told its quota and two resets, whose shortest step is the window; or,
///   telling only `Retry-After`, answered a quota of requests between the ends of two blocks),
///   the local model (a `RateLimit` of that quota and window under the limiter's policy, counting
///   every request started since) allows one more. A sliding model's window is widened by the longest recent round trip: the server
///   counts a request when it arrives, anywhere within a round trip of its start.
///
/// What the server refuses outweighs what it tells: a refusal while the model of the quota told
/// had room sets a ceiling (what the server accepted over the last window) that the model keeps
/// to, and a quota learned from refusals is revised by each later one (the larger of the last two
/// counts). Either holds for ten windows after a refusal, then rises by one each window without
/// one, so a server that allows more again is found at one refusal per ten windows or so.
///
/// No single answer holds the key longer than `probeAfter`: when what was told (a far
/// `Retry-After`, a far reset, a window no wait reaches) holds it longer, one waiting request is
/// sent as a probe `probeAfter` after the answer, once nothing is in flight; the probe's answer
/// replaces what held the key (a server that answers `t=1` again unlocks it), and a probe that
/// is held again schedules the next one `probeAfter` later.
///
/// Requests start in FIFO order. A request that would start only after its deadline (the
/// limiter's maximum wait after it arrived) is refused at once, with the wait it would need; one
/// that waits for a response that does not come is refused at its deadline.
struct ServerPacingMachine {
  /// A waiting request.
  struct Waiter: Equatable, Sendable {
    let id: UInt64
    /// When it is refused if it has not started.
    let deadline: PaceInstant
  }

  /// What to do after an event.
  struct Action: Equatable, Sendable {
    /// The requests that start now, in order.
    var granted: [UInt64] = []
    /// The requests refused, in order, with the wait they would have needed (`nil`: unknown, a
    /// response never came).
    var refused: [Refusal] = []
    /// When to call ``timerFired(now:)``; `nil` for no timer.
    var wakeAt: PaceInstant?
  }

  /// A refused request and the wait it would have needed.
  struct Refusal: Equatable, Sendable {
    let id: UInt64
    let required: Duration?
  }

  /// When the head of the queue could start.
  enum Readiness: Equatable {
    case now
    case at(PaceInstant)
    /// Only a response can tell: a probe, or a spent quota with no reset known, is in flight.
    case afterResponse
    /// Never: beyond the end of the timeline.
    case never
  }

  /// How the local model counts, once the server told its quota and window.
  let localModel: RateLimit.Algorithm
  /// The longest a request waits, in nanoseconds.
  let maximumWaitNanoseconds: Int64
  /// The longest one answer holds the key before a request probes it, in nanoseconds.
  let probeAfterNanoseconds: Int64

  private(set) var queue: [Waiter] = []
  /// The requests started and not yet answered.
  private(set) var inFlight = 0
  /// Whether a response has come for this key (whatever it said).
  private(set) var learned = false
  /// No request starts before this instant (`Retry-After`).
  private(set) var blockedUntil = PaceInstant(nanoseconds: .min)
  /// What the server has left for this client, less the requests in flight and started since.
  private(set) var serverRemaining: Int?
  /// When the quota is whole again; `nil` when unknown.
  private(set) var resetAt: PaceInstant?
  /// The quota per window, as the server said (`q`, `X-RateLimit-Limit`).
  private(set) var limit: Int?
  /// The window the local model counts, in nanoseconds (`w`, or learned).
  private(set) var windowNanoseconds: Int64?
  /// The window the server stated (`w`), in nanoseconds: an answer without one keeps it, rather
  /// than a window learned from resets, which is shorter when the server's resets move with each
  /// request (a sliding window's).
  private(set) var statedWindowNanoseconds: Int64?
  /// The local model of the server's window, counting the requests started since it was told.
  private(set) var model: RateLimitCounter?
  /// When each request in flight started, oldest first.
  private(set) var sendTimes: [PaceInstant] = []
  /// The last round trips measured, in nanoseconds: from the oldest request in flight's start to
  /// each response (an upper bound, whatever order the responses come in).
  private(set) var roundTrips: [Int64] = []
  /// The margin a sliding model's window was widened by.
  private(set) var modelMargin: Int64 = 0
  /// The latest reset the server told (kept after it passes), for learning an untold window.
  private(set) var lastToldReset: PaceInstant?
  /// When the last `Retry-After` block ends (or ended), and the requests answered since then: what
  /// a server that tells only `Retry-After` allows between two refusals.
  private(set) var lastBlockEnd: PaceInstant?
  private(set) var answeredSinceBlockEnd = 0
  /// The window learned from the steps between resets (or between `Retry-After` blocks), when the
  /// server does not say it.
  private(set) var inferredWindowNanoseconds: Int64?
  /// When a request may probe the key, which what was told holds beyond `probeAfter`; nil while
  /// nothing holds it that long.
  private(set) var probeAt: PaceInstant?
  /// Whether the request in flight is a probe: its answer replaces what held the key.
  private(set) var probing = false
  /// The most the server was seen to allow in a window, below the quota it tells: a server that
  /// advertises more than it enforces is believed by its refusals. Held for
  /// `windowsBeforeRaising` windows after a refusal, then raised by one each window without one,
  /// and dropped once it reaches the quota told.
  private(set) var refusalCeiling: Int?
  /// When the ceiling (or a quota learned from refusals) may next rise by one.
  private(set) var nextRaiseAt: PaceInstant?
  /// The answers that were not refusals, over the last window: what the server accepted, for
  /// the ceiling a refusal sets.
  private(set) var accepted: SlidingWindowLog?
  /// How many windows a ceiling (or a quota learned from refusals) holds after a refusal before
  /// it probes upward: a server that allows a little more is found again within tens of windows,
  /// at one refusal per this many windows.
  static let windowsBeforeRaising: Int64 = 10
  /// Whether `limit` was learned from refusals (`Retry-After` alone), not told: every later
  /// refusal revises it, and each window without one raises it by one.
  private(set) var limitFromRefusals = false
  /// The requests answered between the last two blocks, for revising a quota learned from them.
  private(set) var lastRefusalCount: Int?

  /// The shortest window learned from resets: closer resets are one window's, read twice.
  static let shortestInferredWindowNanoseconds: Int64 = 100_000_000

  /// How many round trips the margin looks back on.
  static let roundTripsKept = 32
  /// The widest margin: a request that took minutes says little about the next.
  static let maximumMarginNanoseconds: Int64 = 60_000_000_000

  /// The longest recent round trip, rounded up to a millisecond: how much earlier or later than
  /// its start the server may have counted a request. A sliding model's window is widened by it.
  var latencyMargin: Int64 {
    guard let longest = roundTrips.max(), longest > 0 else { return 0 }
    let rounded = min(longest, Self.maximumMarginNanoseconds).addingSaturating(999_999) / 1_000_000 * 1_000_000
    return min(rounded, Self.maximumMarginNanoseconds)
  }

  init(localModel: RateLimit.Algorithm, maximumWait: Duration, probeAfter: Duration = .seconds(300)) {
    self.localModel = localModel
    maximumWaitNanoseconds = max(0, maximumWait.paceNanoseconds)
    probeAfterNanoseconds = max(0, probeAfter.paceNanoseconds)
  }

  // MARK: Events

  /// A request arrives.
  mutating func enqueue(id: UInt64, now: PaceInstant) -> Action {
    queue.append(Waiter(id: id, deadline: now.advanced(byNanoseconds: maximumWaitNanoseconds)))
    return advance(now: now)
  }

  /// A waiting request's task is cancelled: it leaves the queue (if still there).
  mutating func cancel(id: UInt64, now: PaceInstant) -> Action {
    queue.removeAll { $0.id == id }
    return advance(now: now)
  }

  /// The timer asked for fired.
  mutating func timerFired(now: PaceInstant) -> Action {
    advance(now: now)
  }

  /// A started request's response came, with what the server said in it (perhaps nothing).
  mutating func record(_ quota: ServerQuota, now: PaceInstant) -> Action {
    inFlight = max(0, inFlight - 1)
    noteRoundTrip(now: now)
    if probing {
      // The probe's answer is the news: what held the key is dropped before it is read.
      probing = false
      forgetHolds()
    }
    learn(quota, now: now)
    widenSlidingModel()
    scheduleProbe(now: now)
    return advance(now: now)
  }

  /// A started request ended without a response (a connection error, a cancellation): it is no
  /// longer in flight, and nothing is learned.
  mutating func recordFailure(now: PaceInstant) -> Action {
    inFlight = max(0, inFlight - 1)
    if !sendTimes.isEmpty { sendTimes.removeFirst() }
    probing = false
    scheduleProbe(now: now)
    return advance(now: now)
  }

  /// Forgets everything the server told: the key is probed again as a key never answered. The
  /// requests in flight stay counted.
  mutating func forget(now: PaceInstant) -> Action {
    forgetHolds()
    learned = false
    limit = nil
    refusalCeiling = nil
    nextRaiseAt = nil
    limitFromRefusals = false
    lastRefusalCount = nil
    accepted = nil
    lastToldReset = nil
    lastBlockEnd = nil
    answeredSinceBlockEnd = 0
    inferredWindowNanoseconds = nil
    probeAt = nil
    probing = false
    return advance(now: now)
  }

  /// Drops what holds the key (a block, what is left until a reset, the local model), keeping
  /// the quota and what was learned of the window.
  private mutating func forgetHolds() {
    blockedUntil = PaceInstant(nanoseconds: .min)
    serverRemaining = nil
    resetAt = nil
    model = nil
    windowNanoseconds = nil
    statedWindowNanoseconds = nil
    modelMargin = 0
  }

  /// Sets when a request may probe the key, if what was told holds it beyond `probeAfter`; clears
  /// it once nothing does.
  private mutating func scheduleProbe(now: PaceInstant) {
    let far = now.advanced(byNanoseconds: probeAfterNanoseconds)
    let heldTooLong: Bool
    switch heldReadiness(now: now) {
    case .at(let ready): heldTooLong = ready > far
    case .never: heldTooLong = true
    case .now, .afterResponse: heldTooLong = false
    }
    if !heldTooLong {
      probeAt = nil
    } else if probeAt == nil {
      probeAt = far
    }
  }

  // MARK: Learning

  private mutating func noteRoundTrip(now: PaceInstant) {
    guard !sendTimes.isEmpty else { return }
    let sent = sendTimes.removeFirst()
    let (trip, overflow) = now.nanoseconds.subtractingReportingOverflow(sent.nanoseconds)
    roundTrips.append(overflow ? .max : max(0, trip))
    if roundTrips.count > Self.roundTripsKept { roundTrips.removeFirst() }
  }

  /// A sliding window of `q` per `w + margin` of the starts keeps the server's count (at the
  /// requests' arrivals, up to a round trip after their starts) within `q` per `w`.
  private mutating func widenSlidingModel() {
    guard case .slidingWindow(let log)? = model, let window = windowNanoseconds, latencyMargin != modelMargin else {
      return
    }
    modelMargin = latencyMargin
    let rate = WindowRate(permits: log.rate.permits, per: .nanoseconds(window.addingSaturating(modelMargin)))
    var widened = SlidingWindowLog(rate: rate, now: log.updated)
    widened.grants = ContiguousArray(log.grants[log.head...])
    widened.used = log.used
    model = .slidingWindow(widened)
  }

  private mutating func learn(_ quota: ServerQuota, now: PaceInstant) {
    learned = true
    if let retryAfter = quota.retryAfter {
      let blockEnd = now.advanced(by: retryAfter)
      // The first refusal since the last block ended: a wave of them may follow, of the requests
      // already in flight.
      if now >= blockedUntil {
        learnFromRefusal(blockEnd: blockEnd, now: now)
        lowerCeiling(now: now)
      }
      blockedUntil = max(blockedUntil, blockEnd)
    } else {
      if let end = lastBlockEnd, now >= end { answeredSinceBlockEnd += 1 }
      noteAccepted(now: now, window: quota.window?.paceNanoseconds)
      raiseCeiling(now: now)
    }
    if let quota = quota.quota {
      limit = quota
      limitFromRefusals = false
    }
    let reset = quota.resetsIn.map { now.advanced(by: $0) }
    if let reset, reset > now { inferWindow(fromReset: reset) }
    if let remaining = quota.remaining, !isAboutAnEndedWindow(reset: reset, now: now) {
      // Every other request in flight may not have been counted yet: count it against what is left.
      let left = max(0, remaining - inFlight)
      if let known = resetAt, known > now, reset.map({ isSameOrEarlierWindow($0, known: known) }) ?? true,
        let current = serverRemaining
      {
        // Responses overtake one another: a reset sooner than the one known is older news (or the
        // same window, rounded), which may lower what is left but never brings the reset closer.
        serverRemaining = min(current, left)
      } else {
        serverRemaining = left
        resetAt = reset
      }
    }
    if let stated = quota.window?.paceNanoseconds { statedWindowNanoseconds = stated }
    guard let window = statedWindowNanoseconds ?? inferredWindowNanoseconds, window > 0, let limit else {
      return
    }
    let allowed = min(limit, refusalCeiling ?? limit)
    let changed = windowNanoseconds != window || model?.burst != allowed
    let sameWindow = windowNanoseconds == window
    windowNanoseconds = window
    if changed, sameWindow, refusalCeiling != nil || limitFromRefusals, case .slidingWindow(let log)? = model {
      // Only the quota moved (a ceiling, or a quota learned from refusals): the grants keep
      // their instants.
      var resized = SlidingWindowLog(
        rate: WindowRate(permits: allowed, per: .nanoseconds(log.rate.nanoseconds)), now: log.updated)
      resized.grants = ContiguousArray(log.grants[log.head...])
      resized.used = log.used
      model = .slidingWindow(resized)
    } else if changed {
      model = makeModel(limit: allowed, window: window, now: now)
      modelMargin = localModel == .slidingWindow ? latencyMargin : 0
    }
  }

  /// A refusal while the local model of the quota told had room: the server allows fewer than it
  /// says. The requests it accepted in the model's window (those counted there, less this one and
  /// those still in flight, which the same wave may refuse) become the ceiling the model keeps to.
  private mutating func lowerCeiling(now: PaceInstant) {
    guard var model, let limit, !limitFromRefusals, var log = accepted else { return }
    model.refill(now: now)
    // Refused once the quota told was spent: an honest refusal. Under a ceiling, every refusal
    // says the ceiling is too high.
    guard refusalCeiling != nil || model.availablePermits > 0 else { return }
    log.refill(now: now)
    let seen = max(1, log.used)
    guard seen < limit else { return }
    // Refused at the ceiling: the server allows fewer still, at least one fewer.
    refusalCeiling = max(1, min(refusalCeiling.map { $0 - 1 } ?? limit, seen))
    nextRaiseAt = raiseTime(after: now, windows: Self.windowsBeforeRaising)
  }

  /// An answer that is not a refusal, a window or more after the ceiling last moved: the ceiling
  /// rises by one, probing upward slowly, and is dropped once it reaches the quota told.
  private mutating func raiseCeiling(now: PaceInstant) {
    guard let due = nextRaiseAt, now >= due else { return }
    if let ceiling = refusalCeiling {
      nextRaiseAt = raiseTime(after: now, windows: 1)
      refusalCeiling = limit.map { ceiling + 1 >= $0 } == true ? nil : ceiling + 1
    } else if limitFromRefusals, let learned = limit, learned < Int.max {
      nextRaiseAt = raiseTime(after: now, windows: 1)
      limit = learned + 1
    }
  }

  /// Counts an answer that was not a refusal in the log of the last window's.
  private mutating func noteAccepted(now: PaceInstant, window told: Int64?) {
    guard let window = told ?? statedWindowNanoseconds ?? inferredWindowNanoseconds, window > 0 else {
      return
    }
    var log =
      accepted.flatMap { $0.rate.nanoseconds == window ? $0 : nil }
      ?? SlidingWindowLog(rate: WindowRate(permits: Int.max, per: .nanoseconds(window)), now: now)
    log.refill(now: now)
    log.take(1)
    accepted = log
  }

  /// `windows` of the model's window (or the one learned) after `now`; nil while no window is known.
  private func raiseTime(after now: PaceInstant, windows: Int64) -> PaceInstant? {
    guard let window = windowNanoseconds ?? inferredWindowNanoseconds else { return nil }
    return now.advanced(
      byNanoseconds: window.multipliedReportingOverflow(by: windows).overflow ? .max : window * windows)
  }

  /// Learns the quota and window of a server that tells only `Retry-After`: the requests it
  /// answered between the end of one block and the next refusal are its quota, and the step
  /// between the two blocks' ends, to the nearest second, its window. A refusal comes only once a window's quota is spent,
  /// and nothing was sent while blocked, so the count is a whole quota.
  private mutating func learnFromRefusal(blockEnd: PaceInstant, now: PaceInstant) {
    defer {
      lastBlockEnd = blockEnd
      answeredSinceBlockEnd = 0
    }
    guard limit == nil || limitFromRefusals, let previous = lastBlockEnd, now >= previous, answeredSinceBlockEnd > 0
    else { return }
    if limitFromRefusals {
      // What the server accepted over the last window; answers that overtake one another make one
      // count short, so the larger of the last two.
      var seen = answeredSinceBlockEnd
      if var log = accepted {
        log.refill(now: now)
        seen = min(seen, log.used)
      }
      limit = max(1, seen, lastRefusalCount ?? 0)
      lastRefusalCount = seen
      nextRaiseAt = raiseTime(after: now, windows: Self.windowsBeforeRaising)
      return
    }
    let (step, overflow) = blockEnd.nanoseconds.subtractingReportingOverflow(previous.nanoseconds)
    guard !overflow, step >= Self.shortestInferredWindowNanoseconds else { return }
    limit = answeredSinceBlockEnd
    limitFromRefusals = true
    lastRefusalCount = answeredSinceBlockEnd
    // `Retry-After` counts whole seconds: a step of a second or more is a whole number of them,
    // the rest being how much sooner or later the quota was spent in one window than the other.
    let unit: Int64 = step >= 1_000_000_000 ? 1_000_000_000 : 1_000_000
    inferredWindowNanoseconds = (step + unit / 2) / unit * unit
    nextRaiseAt = raiseTime(after: now, windows: Self.windowsBeforeRaising)
  }

  /// Whether `reset` is the known window's (or an earlier one's): not later than the known reset by
  /// half a window, since two responses of one window may read its end apart by the rounding of
  /// their fields (whole seconds from now) and the clocks' reading.
  /// Once a local model counts the window, it keeps the client under the server's count, and the
  /// estimate may follow each response (a token bucket's remaining rises as it refills).
  private func isSameOrEarlierWindow(_ reset: PaceInstant, known: PaceInstant) -> Bool {
    guard model == nil else { return reset < known }
    let window = windowNanoseconds ?? inferredWindowNanoseconds ?? 0
    let tolerance = max(Self.shortestInferredWindowNanoseconds / 2, window / 2)
    return reset <= known.advanced(byNanoseconds: tolerance)
  }

  /// Whether a response's `remaining` is about a window that has ended: its reset is not after
  /// `now` (a reset in the past reads as `now`), and the limit is known, so the quota whole again
  /// at the reset already counted everything it could say. Such a response, overtaken on its way
  /// by the window's end, would hand out the old window's remainder a second time (a local model,
  /// once there is one, holds that remainder back itself).
  private func isAboutAnEndedWindow(reset: PaceInstant?, now: PaceInstant) -> Bool {
    guard let reset, limit != nil, model == nil else { return false }
    return reset <= now
  }

  /// Learns the window of a server that says when its quota is whole again but not its window
  /// (`X-RateLimit-Reset` without a policy): the shortest step between two resets it told. Two
  /// resets of one window differ by no more than the clocks' reading, far below a millisecond.
  private mutating func inferWindow(fromReset reset: PaceInstant) {
    defer { lastToldReset = max(lastToldReset ?? reset, reset) }
    guard let last = lastToldReset else { return }
    let (step, overflow) = reset.nanoseconds.subtractingReportingOverflow(last.nanoseconds)
    guard !overflow, step >= Self.shortestInferredWindowNanoseconds else { return }
    // Whole milliseconds: the step between two resets read from whole seconds, less the jitter.
    let rounded = (step + 500_000) / 1_000_000 * 1_000_000
    inferredWindowNanoseconds = min(inferredWindowNanoseconds ?? rounded, rounded)
  }

  /// A local model of `limit` per `window` at `now`, holding what the server counts already.
  private func makeModel(limit: Int, window: Int64, now: PaceInstant) -> RateLimitCounter {
    let rateLimit: RateLimit
    switch localModel {
    case .tokenBucket: rateLimit = RateLimit(permits: limit, per: .nanoseconds(window))
    case .slidingWindow:
      rateLimit = .slidingWindow(permits: limit, per: .nanoseconds(window.addingSaturating(latencyMargin)))
    case .fixedWindow: rateLimit = .fixedWindow(permits: limit, per: .nanoseconds(window))
    }
    // A fixed window ends where the server said its quota is whole again: windows start at
    // `resetAt + k * window`, so the origin is at minus that in the model's Unix time.
    let origin = resetAt.map { 0 &- $0.nanoseconds }
    var counter = RateLimitCounter(limit: rateLimit, now: now, unixNanosecondsAtOrigin: origin)
    // What is left, within 0...limit whatever the server said: `limit - left` cannot overflow.
    let left = max(0, min(limit, serverRemaining ?? limit))
    // A model rebuilt under a refusal ceiling keeps what the one it replaces counted: the
    // server's `remaining` is what it advertises, not what it enforces.
    let carried: Int
    if refusalCeiling != nil, var previous = model {
      previous.refill(now: now)
      carried = min(limit, previous.burst - previous.availablePermits)
    } else {
      carried = 0
    }
    let used = max(limit - left, carried)
    if used > 0 { counter.take(used) }
    return counter
  }

  /// What the machine believes at `now`.
  func knowledge(now: PaceInstant) -> ServerPacingKnowledge {
    func until(_ instant: PaceInstant?) -> Duration? {
      guard let instant, instant > now else { return nil }
      return now.duration(to: instant)
    }
    return ServerPacingKnowledge(
      hasAnswered: learned, quota: limit,
      window: (windowNanoseconds ?? inferredWindowNanoseconds).map { .nanoseconds($0) },
      remaining: serverRemaining.map { max(0, $0) }, resetsIn: until(resetAt), blockedFor: until(blockedUntil),
      probeIn: probeAt.map { until($0) ?? .zero }, isProbing: probing, inFlight: inFlight, waiting: queue.count)
  }

  // MARK: Deciding

  /// Brings the counts up to `now`: a quota whole again, a window moved on.
  private mutating func refresh(now: PaceInstant) {
    model?.refill(now: now)
    if let reset = resetAt, now >= reset {
      resetAt = nil
      if let limit {
        serverRemaining = max(0, limit - inFlight)
      } else {
        // Nothing says what is left now: probe again.
        serverRemaining = nil
        if model == nil { learned = false }
      }
    }
  }

  /// When the head of the queue could start, the counts being up to date at `now`: what was told
  /// allows, or a probe of a key it holds too long.
  func readiness(now: PaceInstant) -> Readiness {
    let held = heldReadiness(now: now)
    if held == .now { return .now }
    // Held by what was told, and a probe is out: its answer may free the key.
    if probing { return .afterResponse }
    guard let probeAt else { return held }
    if case .at(let ready) = held, ready <= probeAt { return held }
    if inFlight > 0 { return .afterResponse }
    return probeAt <= now ? .now : .at(probeAt)
  }

  /// When the head of the queue could start by what was told, the counts being up to date at
  /// `now`.
  func heldReadiness(now: PaceInstant) -> Readiness {
    var at = max(now, blockedUntil)
    if !learned, inFlight > 0 { return .afterResponse }
    if let remaining = serverRemaining, remaining <= 0 {
      if let reset = resetAt {
        // A `Retry-After` sooner than a spent quota's effective window does not end the window:
        // the later of the two holds (draft-ietf-httpapi-ratelimit-headers-11, sections 6 and 7).
        at = max(at, reset)
      } else if inFlight > 0 {
        return .afterResponse
      }
      // Else nothing in flight can tell more: one request may probe.
    }
    if let model {
      guard let ready = model.readyTime(for: 1) else { return .never }
      at = max(at, ready)
    }
    return at <= now ? .now : .at(at)
  }

  /// Starts what may start, refuses what waited too long or would, and says when to look again.
  private mutating func advance(now: PaceInstant) -> Action {
    refresh(now: now)
    var action = Action()
    while let head = queue.first {
      let readiness = readiness(now: now)
      if readiness == .now {
        queue.removeFirst()
        start(now: now)
        action.granted.append(head.id)
        continue
      }
      // Waited the maximum already (at most until now: every event looks).
      if head.deadline <= now {
        queue.removeFirst()
        action.refused.append(Refusal(id: head.id, required: nil))
        continue
      }
      switch readiness {
      case .now:
        break
      case .at(let ready):
        guard ready <= head.deadline else {
          queue.removeFirst()
          action.refused.append(Refusal(id: head.id, required: now.duration(to: ready)))
          continue
        }
        action.wakeAt = ready
        return action
      case .afterResponse:
        action.wakeAt = head.deadline
        return action
      case .never:
        queue.removeFirst()
        action.refused.append(Refusal(id: head.id, required: .seconds(Int64.max)))
      }
    }
    return action
  }

  /// Counts a request that starts now.
  private mutating func start(now: PaceInstant) {
    if probeAt != nil, heldReadiness(now: now) != .now {
      probing = true
      probeAt = nil
    }
    inFlight += 1
    sendTimes.append(now)
    if let remaining = serverRemaining { serverRemaining = remaining - 1 }
    model?.take(1)
  }
}
