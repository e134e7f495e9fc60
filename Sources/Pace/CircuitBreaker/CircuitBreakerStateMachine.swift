/// One key's circuit breaker, apart from any clock or lock: `now` comes in, admissions and
/// transitions come out. ``KeyedCircuitBreaker`` keeps one per key.
package struct CircuitBreakerStateMachine: Sendable {
  /// The breaker's settings, checked by ``KeyedCircuitBreaker``'s initialiser.
  package struct Configuration: Sendable, Hashable {
    /// The share of failures among the window's calls that opens the breaker, in `0 < ratio <= 1`.
    package var failureRatio: Double
    /// How many calls the window must hold before the ratio counts. Positive.
    package var minimumCalls: Int
    /// How far back outcomes count: an outcome reported at `t` counts while `now < t + window`.
    package var window: Duration
    /// How long the breaker stays open.
    package var coolDown: Duration
    /// How many probe calls half-open lets through; all must succeed to close.
    package var probes: Int

    package init(failureRatio: Double, minimumCalls: Int, window: Duration, coolDown: Duration, probes: Int) {
      self.failureRatio = failureRatio
      self.minimumCalls = minimumCalls
      self.window = window
      self.coolDown = coolDown
      self.probes = probes
    }
  }

  /// What a call asking for a permit does.
  package enum Admission: Sendable, Hashable {
    /// Go ahead (closed); report the outcome with `generation`.
    case call(generation: UInt64)
    /// Go ahead as a probe (half-open); report the outcome with `generation`.
    case probe(generation: UInt64)
    /// Refused.
    case reject(CircuitBreakerError)
  }

  /// A change of state, for the driver's hook.
  package struct Transition: Sendable, Hashable {
    package var from: CircuitBreakerState
    package var to: CircuitBreakerState

    package init(from: CircuitBreakerState, to: CircuitBreakerState) {
      self.from = from
      self.to = to
    }
  }

  private enum Phase: Sendable, Hashable {
    /// Calls go through; `outcomes` holds the window's reports, oldest first, from `start`.
    case closed
    /// Refused until `until`.
    case open(until: PaceInstant)
    /// `issued` probes are out or succeeded, `succeeded` of them succeeded.
    case halfOpen(issued: Int, succeeded: Int)
  }

  package let configuration: Configuration
  private var phase = Phase.closed
  /// Bumped at every change of state, so that an outcome of a call let through before it (a
  /// call from before the breaker opened, a probe of an earlier half-open) is not counted.
  package private(set) var generation: UInt64 = 0
  /// The closed window's outcomes as (reported at, failed), oldest first from `start`.
  private var outcomes: [(at: PaceInstant, failed: Bool)] = []
  private var start = 0
  private var failures = 0
  /// Calls admitted and not yet reported, of any generation: the key is kept while there are.
  private(set) var outstanding = 0

  /// A closed breaker with an empty window.
  package init(_ configuration: Configuration) {
    self.configuration = configuration
  }

  /// The state at `now` (open until an instant before `now` reads as half-open).
  package func state(now: PaceInstant) -> CircuitBreakerState {
    switch phase {
    case .closed: return .closed
    case .open(let until): return now < until ? .open(until: until) : .halfOpen
    case .halfOpen: return .halfOpen
    }
  }

  /// How many calls and failures the window holds at `now`.
  package func windowCounts(now: PaceInstant) -> (calls: Int, failures: Int) {
    guard case .closed = phase else { return (0, 0) }
    var calls = outcomes.count - start
    var failed = failures
    for entry in outcomes[start...] {
      guard entry.at.advanced(by: configuration.window) <= now else { break }
      calls -= 1
      if entry.failed { failed -= 1 }
    }
    return (calls, failed)
  }

  /// Whether the key holds nothing worth keeping at `now`: closed with an empty window, and no
  /// call out whose outcome would count.
  package func isIdle(now: PaceInstant) -> Bool {
    phase == .closed && outstanding == 0 && windowCounts(now: now).calls == 0
  }

  /// A call asks to go through at `now`.
  package mutating func permit(now: PaceInstant) -> (Admission, Transition?) {
    switch phase {
    case .closed:
      outstanding += 1
      return (.call(generation: generation), nil)
    case .open(let until):
      guard now >= until else {
        return (.reject(.open(until: until, retryAfter: now.duration(to: until))), nil)
      }
      enter(.halfOpen(issued: 1, succeeded: 0))
      outstanding += 1
      return (.probe(generation: generation), Transition(from: .open(until: until), to: .halfOpen))
    case .halfOpen(let issued, let succeeded):
      guard issued < configuration.probes else { return (.reject(.probesInFlight), nil) }
      phase = .halfOpen(issued: issued + 1, succeeded: succeeded)
      outstanding += 1
      return (.probe(generation: generation), nil)
    }
  }

  /// The outcome of a call admitted with `generation` (as a probe if `probe`) is reported at `now`.
  package mutating func record(
    _ outcome: CircuitBreakerOutcome, probe: Bool, generation: UInt64, now: PaceInstant
  ) -> Transition? {
    outstanding = Swift.max(0, outstanding - 1)
    guard generation == self.generation else { return nil }  // from before a change of state
    switch phase {
    case .closed:
      guard !probe, outcome != .ignored else { return nil }
      return recordClosed(failed: outcome == .failure, now: now)
    case .halfOpen(let issued, let succeeded):
      guard probe else { return nil }
      switch outcome {
      case .success:
        guard succeeded + 1 >= configuration.probes else {
          phase = .halfOpen(issued: issued, succeeded: succeeded + 1)
          return nil
        }
        enter(.closed)
        return Transition(from: .halfOpen, to: .closed)
      case .failure:
        let until = now.advanced(by: configuration.coolDown)
        enter(.open(until: until))
        return Transition(from: .halfOpen, to: .open(until: until))
      case .ignored:
        phase = .halfOpen(issued: issued - 1, succeeded: succeeded)
        return nil
      }
    case .open:
      return nil
    }
  }

  private mutating func recordClosed(failed: Bool, now: PaceInstant) -> Transition? {
    dropExpired(now: now)
    outcomes.append((now, failed))
    if failed { failures += 1 }
    let calls = outcomes.count - start
    guard failed, calls >= configuration.minimumCalls,
      Double(failures) >= configuration.failureRatio * Double(calls)
    else { return nil }
    let until = now.advanced(by: configuration.coolDown)
    enter(.open(until: until))
    return Transition(from: .closed, to: .open(until: until))
  }

  /// Forgets the outcomes that have left the window at `now`.
  private mutating func dropExpired(now: PaceInstant) {
    while start < outcomes.count, outcomes[start].at.advanced(by: configuration.window) <= now {
      if outcomes[start].failed { failures -= 1 }
      start += 1
    }
    // Compacted once half is dead: amortised O(1) per outcome.
    if start > 32, start * 2 > outcomes.count {
      outcomes.removeFirst(start)
      start = 0
    }
  }

  private mutating func enter(_ phase: Phase) {
    self.phase = phase
    generation &+= 1
    outcomes = []
    start = 0
    failures = 0
  }
}
