import Pace
import PaceTestSupport
import Testing

@testable import Pace

/// The breaker's machine driven directly: exact transitions at exact instants.
@Suite struct CircuitBreakerStateMachineTests {
  typealias Machine = CircuitBreakerStateMachine

  /// Opens at half failures over 10 s with at least 4 calls, for 5 s, with 2 probes.
  func machine(probes: Int = 2) -> Machine {
    Machine(
      .init(failureRatio: 0.5, minimumCalls: 4, window: .seconds(10), coolDown: .seconds(5), probes: probes))
  }

  /// Records `outcome` for a call admitted at `now`.
  @discardableResult
  func call(_ m: inout Machine, _ outcome: CircuitBreakerOutcome, at now: PaceInstant) -> Machine.Transition? {
    let (admission, _) = m.permit(now: now)
    guard case .call(let generation) = admission else {
      Issue.record("not admitted as a call at \(now): \(admission)")
      return nil
    }
    return m.record(outcome, probe: false, generation: generation, now: now)
  }

  @Test func opensExactlyWhenTheRatioIsReachedWithTheMinimumOfCalls() {
    var m = machine()
    // Three failures in a row do not open: fewer than the minimum of 4 calls.
    #expect(call(&m, .failure, at: ms(0)) == nil)
    #expect(call(&m, .failure, at: ms(10)) == nil)
    #expect(call(&m, .failure, at: ms(20)) == nil)
    #expect(m.state(now: ms(20)) == .closed)
    // The fourth call is a success: 3 of 4 failed, but a success never opens.
    #expect(call(&m, .success, at: ms(30)) == nil)
    #expect(m.windowCounts(now: ms(30)) == (4, 3))
    // The next failure: 4 of 5, at least half, with the minimum: open until 40 ms + 5 s.
    #expect(
      call(&m, .failure, at: ms(40))
        == Machine.Transition(from: .closed, to: .open(until: ms(5040))))
    #expect(m.state(now: ms(40)) == .open(until: ms(5040)))
  }

  @Test func aRatioJustBelowTheThresholdStaysClosed() {
    var m = machine()
    for t in 0..<3 { call(&m, .success, at: ms(Int64(t))) }
    call(&m, .failure, at: ms(3))
    #expect(call(&m, .failure, at: ms(4)) == nil)  // 2 of 5: below half
    #expect(call(&m, .success, at: ms(5)) == nil)
    #expect(call(&m, .failure, at: ms(6)) == nil)  // 3 of 7
    #expect(call(&m, .failure, at: ms(7)) != nil)  // 4 of 8: exactly half opens
  }

  @Test func outcomesLeaveTheWindowExactlyAfterIt() {
    var m = machine()
    call(&m, .failure, at: ms(0))
    call(&m, .failure, at: ms(1))
    call(&m, .success, at: ms(2))
    #expect(m.windowCounts(now: ms(9_999)) == (3, 2))
    // At 10 s the failure of 0 ms has left: 1 failure of 2 calls at 10 000 ms.
    #expect(m.windowCounts(now: ms(10_000)) == (2, 1))
    // 10 001 ms: the failure of 1 ms has left as well.
    #expect(call(&m, .failure, at: ms(10_001)) == nil)
    #expect(m.windowCounts(now: ms(10_001)) == (2, 1))
    // 10 002 ms: the success of 2 ms leaves; failures only, but fewer than the minimum of 4.
    #expect(call(&m, .failure, at: ms(10_002)) == nil)
    #expect(m.windowCounts(now: ms(10_002)) == (2, 2))
    #expect(call(&m, .failure, at: ms(10_003)) == nil)
    #expect(call(&m, .failure, at: ms(10_004)) != nil)  // 4 of 4
  }

  @Test func ignoredOutcomesDoNotCount() {
    var m = machine()
    for t in 0..<10 { call(&m, .ignored, at: ms(Int64(t))) }
    #expect(m.windowCounts(now: ms(10)) == (0, 0))
    #expect(m.isIdle(now: ms(10)))
  }

  /// Opens at 0 ms until 5 s: four failures at 0 ms.
  func opened() -> Machine {
    var m = machine()
    for _ in 0..<4 { call(&m, .failure, at: ms(0)) }
    #expect(m.state(now: ms(0)) == .open(until: ms(5000)))
    return m
  }

  @Test func staysOpenUntilTheExactInstantAndSaysSo() {
    var m = opened()
    #expect(m.permit(now: ms(0)) == (.reject(.open(until: ms(5000), retryAfter: .seconds(5))), nil))
    #expect(
      m.permit(now: PaceInstant(nanoseconds: 4_999_999_999))
        == (.reject(.open(until: ms(5000), retryAfter: .nanoseconds(1))), nil))
    #expect(m.state(now: ms(5000)) == .halfOpen)
    let generation = m.generation
    #expect(
      m.permit(now: ms(5000))
        == (.probe(generation: generation + 1), Machine.Transition(from: .open(until: ms(5000)), to: .halfOpen)))
  }

  @Test func halfOpenLetsTheSetNumberOfProbesThroughAndClosesWhenAllSucceed() {
    var m = opened()
    let (first, _) = m.permit(now: ms(5000))
    let (second, _) = m.permit(now: ms(5001))
    guard case .probe(let generation) = first, second == .probe(generation: generation) else {
      Issue.record("two probes expected: \(first), \(second)")
      return
    }
    #expect(m.permit(now: ms(5002)) == (.reject(.probesInFlight), nil))
    #expect(m.record(.success, probe: true, generation: generation, now: ms(5100)) == nil)
    #expect(m.state(now: ms(5100)) == .halfOpen)
    #expect(m.permit(now: ms(5100)) == (.reject(.probesInFlight), nil))  // one out, one succeeded
    #expect(
      m.record(.success, probe: true, generation: generation, now: ms(5200))
        == Machine.Transition(from: .halfOpen, to: .closed))
    // Closed with an empty window: the failures from before the opening are gone.
    #expect(m.windowCounts(now: ms(5200)) == (0, 0))
    #expect(m.permit(now: ms(5200)).0 == .call(generation: m.generation))
  }

  @Test func aFailedProbeReopensForAnotherCoolDownAndTheOtherProbeNoLongerCounts() {
    var m = opened()
    let (first, _) = m.permit(now: ms(5000))
    _ = m.permit(now: ms(5000))
    guard case .probe(let generation) = first else {
      Issue.record("a probe expected")
      return
    }
    #expect(
      m.record(.failure, probe: true, generation: generation, now: ms(6000))
        == Machine.Transition(from: .halfOpen, to: .open(until: ms(11_000))))
    // The other probe succeeds late: it is from the half-open that ended.
    #expect(m.record(.success, probe: true, generation: generation, now: ms(6500)) == nil)
    #expect(m.state(now: ms(10_999)) == .open(until: ms(11_000)))
    #expect(m.state(now: ms(11_000)) == .halfOpen)
  }

  @Test func anIgnoredProbeFreesItsPlace() {
    var m = opened()
    let (probe, _) = m.permit(now: ms(5000))
    _ = m.permit(now: ms(5000))
    guard case .probe(let generation) = probe else {
      Issue.record("a probe expected")
      return
    }
    #expect(m.permit(now: ms(5000)) == (.reject(.probesInFlight), nil))
    #expect(m.record(.ignored, probe: true, generation: generation, now: ms(5010)) == nil)
    #expect(m.permit(now: ms(5010)) == (.probe(generation: generation), nil))
  }

  @Test func aCallLetThroughBeforeTheBreakerOpenedDoesNotCountAfter() {
    var m = machine(probes: 1)
    let (late, _) = m.permit(now: ms(0))
    for _ in 0..<4 { call(&m, .failure, at: ms(0)) }
    guard case .call(let generation) = late else {
      Issue.record("a call expected")
      return
    }
    // Reported while open, then while half-open: neither counts, nor closes.
    #expect(m.record(.success, probe: false, generation: generation, now: ms(100)) == nil)
    _ = m.permit(now: ms(5000))
    #expect(m.record(.success, probe: false, generation: generation, now: ms(5001)) == nil)
    #expect(m.state(now: ms(5001)) == .halfOpen)
  }
}

/// `KeyedCircuitBreaker` on virtual time: the same transitions through the public API, the
/// hook, per-key state, forgetting idle keys, and `run`.
@Suite struct KeyedCircuitBreakerTests {
  let scheduler = TestScheduler()

  struct Change: Equatable {
    let key: String
    let from: CircuitBreakerState
    let to: CircuitBreakerState
  }

  func breaker(probes: Int = 1, changes: LockedBox<[Change]>? = nil) -> KeyedCircuitBreaker<String> {
    KeyedCircuitBreaker(
      failureRatio: 0.5, minimumCalls: 4, window: .seconds(10), coolDown: .seconds(5), probes: probes,
      clock: scheduler
    ) { key, from, to in changes?.withLock { $0.append(Change(key: key, from: from, to: to)) } }
  }

  func fail(_ breaker: KeyedCircuitBreaker<String>, _ key: String, times: Int) throws {
    for _ in 0..<times { breaker.record(.failure, for: try breaker.permit(key)) }
  }

  @Test func opensForTheCoolDownThenProbesAndClosesOnItsKeyOnly() throws {
    let changes = LockedBox<[Change]>([])
    let breaker = breaker(changes: changes)
    scheduler.advance(by: .seconds(1))
    try fail(breaker, "a", times: 4)
    #expect(breaker.state(for: "a") == .open(until: ms(6000)))
    #expect(breaker.state(for: "b") == .closed)
    _ = try breaker.permit("b")

    scheduler.advance(to: PaceInstant(nanoseconds: 5_999_999_999))
    #expect(throws: CircuitBreakerError.open(until: ms(6000), retryAfter: .nanoseconds(1))) {
      try breaker.permit("a")
    }
    scheduler.advance(by: .nanoseconds(1))
    let probe = try breaker.permit("a")
    #expect(probe.isProbe)
    #expect(throws: CircuitBreakerError.probesInFlight) { try breaker.permit("a") }
    scheduler.advance(by: .milliseconds(300))
    breaker.record(.success, for: probe)
    #expect(breaker.state(for: "a") == .closed)
    #expect(
      changes.withLock { $0 } == [
        Change(key: "a", from: .closed, to: .open(until: ms(6000))),
        Change(key: "a", from: .open(until: ms(6000)), to: .halfOpen),
        Change(key: "a", from: .halfOpen, to: .closed),
      ])
  }

  /// `record` answers the state it moved the key to, and `nil` for an outcome that moved nothing:
  /// a caller counts openings and closings without reading the state before and after.
  @Test func recordAnswersTheStateItMovedTheKeyTo() throws {
    let breaker = breaker(probes: 1)
    for _ in 0..<3 { #expect(breaker.record(.failure, for: try breaker.permit("a")) == nil) }
    #expect(breaker.record(.failure, for: try breaker.permit("a")) == .open(until: ms(5000)))
    scheduler.advance(to: ms(5000))
    let failedProbe = try breaker.permit("a")
    scheduler.advance(by: .seconds(1))
    #expect(breaker.record(.failure, for: failedProbe) == .open(until: ms(11000)))
    scheduler.advance(to: ms(11000))
    let probe = try breaker.permit("a")
    #expect(breaker.record(.success, for: probe) == .closed)
    #expect(breaker.record(.success, for: try breaker.permit("a")) == nil)
  }

  @Test func theHookIsCalledWithNoLockHeld() throws {
    // The hook reads the breaker's state: it would deadlock under the breaker's lock.
    let seen = LockedBox<[CircuitBreakerState]>([])
    let box = LockedBox<KeyedCircuitBreaker<String>?>(nil)
    let breaker = KeyedCircuitBreaker<String>(minimumCalls: 1, clock: scheduler) { key, _, _ in
      if let breaker = box.withLock({ $0 }) { seen.withLock { $0.append(breaker.state(for: key)) } }
    }
    box.withLock { $0 = breaker }
    try fail(breaker, "a", times: 1)
    #expect(seen.withLock { $0 } == [.open(until: ms(5000))])
  }

  @Test func runRecordsSuccessFailureAndIgnoresCancellation() async throws {
    let breaker = breaker()
    struct Refused: Error {}
    for _ in 0..<3 { #expect(try await breaker.run("a") { 42 } == 42) }
    for _ in 0..<2 {
      await #expect(throws: Refused.self) { try await breaker.run("a") { throw Refused() } }
    }
    // 2 failures of 5 calls; a cancellation is ignored, so the next failure makes 3 of 6.
    await #expect(throws: CancellationError.self) { try await breaker.run("a") { throw CancellationError() } }
    #expect(breaker.state(for: "a") == .closed)
    await #expect(throws: Refused.self) { try await breaker.run("a") { throw Refused() } }
    #expect(breaker.state(for: "a") == .open(until: ms(5000)))
    // Refused without running the operation.
    let ran = Counter()
    await #expect(throws: CircuitBreakerError.open(until: ms(5000), retryAfter: .seconds(5))) {
      try await breaker.run("a") { ran.increment() }
    }
    #expect(ran.count == 0)
  }

  @Test func runTakesTheCallersClassification() async throws {
    let breaker = breaker()
    struct NotFound: Error {}
    for _ in 0..<10 {
      await #expect(throws: NotFound.self) {
        try await breaker.run("a", isFailure: { !($0 is NotFound) }) { throw NotFound() }
      }
    }
    #expect(breaker.state(for: "a") == .closed)
  }

  @Test func closedIdleKeysAreForgotten() throws {
    let breaker = breaker()
    for key in 0..<1000 { breaker.record(.success, for: try breaker.permit("k\(key)")) }
    #expect(breaker.keyCount == 1000)
    try fail(breaker, "open", times: 4)
    scheduler.advance(by: .seconds(10))
    // Every window is empty now; only the open key (open until 5 s, half-open now) is kept.
    #expect(breaker.keyCount == 1)
    #expect(breaker.storedKeyCount == 1001)
    // A sweep comes within as many calls as there are keys: amortised, and the storage goes.
    for _ in 0..<600 { breaker.record(.ignored, for: try breaker.permit("other")) }
    #expect(breaker.storedKeyCount <= 2)
    #expect(breaker.state(for: "open") == .halfOpen)
    #expect(breaker.keyCount == 1)
  }

  @Test func aKeyWithPermitsOutIsKeptAndTheirOutcomesCount() throws {
    let breaker = breaker()
    let permits = try (0..<4).map { _ in try breaker.permit("a") }
    #expect(breaker.keyCount == 1)
    // Enough calls on other keys for sweeps: "a", closed and empty but with permits out, stays.
    for key in 0..<500 { breaker.record(.ignored, for: try breaker.permit("k\(key)")) }
    #expect(breaker.keyCount == 1)
    for permit in permits { breaker.record(.failure, for: permit) }
    #expect(breaker.state(for: "a") == .open(until: ms(0).advanced(by: .seconds(5))))
  }
}

/// The timeline of the CircuitBreaker article ("A timeline"), step by step. Keep them in sync.
@Suite struct KeyedCircuitBreakerDocTimelineTests {
  @Test func theArticlesTimeline() throws {
    let scheduler = TestScheduler()
    let breaker = KeyedCircuitBreaker<String>(
      failureRatio: 0.5, minimumCalls: 4, window: .seconds(10), coolDown: .seconds(5), probes: 2, clock: scheduler)
    let key = "api.example.com"
    breaker.record(.success, for: try breaker.permit(key))
    for second in 1...3 {
      scheduler.advance(to: ms(Int64(second) * 1000))
      #expect(breaker.state(for: key) == .closed)
      breaker.record(.failure, for: try breaker.permit(key))
    }
    #expect(breaker.state(for: key) == .open(until: ms(8000)))

    scheduler.advance(to: ms(7999))
    #expect(throws: CircuitBreakerError.open(until: ms(8000), retryAfter: .milliseconds(1))) {
      try breaker.permit(key)
    }
    scheduler.advance(to: ms(8000))
    let first = try breaker.permit(key)
    let second = try breaker.permit(key)
    #expect(first.isProbe && second.isProbe)
    #expect(breaker.state(for: key) == .halfOpen)
    #expect(throws: CircuitBreakerError.probesInFlight) { try breaker.permit(key) }

    scheduler.advance(to: ms(8500))
    breaker.record(.failure, for: first)
    #expect(breaker.state(for: key) == .open(until: ms(13_500)))
    scheduler.advance(to: ms(8600))
    breaker.record(.success, for: second)  // from the half-open that ended: not counted
    #expect(breaker.state(for: key) == .open(until: ms(13_500)))

    scheduler.advance(to: ms(13_500))
    let probes = [try breaker.permit(key), try breaker.permit(key)]
    #expect(breaker.state(for: key) == .halfOpen)
    scheduler.advance(to: ms(14_000))
    for probe in probes { breaker.record(.success, for: probe) }
    #expect(breaker.state(for: key) == .closed)
    #expect(breaker.keyCount == 0)  // closed with an empty window: forgotten
  }
}

/// The breaker defined the slow, obvious way: every outcome of the closed period kept and
/// filtered by time at each failure; keys never forgotten.
struct CircuitBreakerReferenceModel {
  enum Phase {
    case closed(log: [(at: PaceInstant, failed: Bool)])
    case open(until: PaceInstant)
    case halfOpen(issued: Int, succeeded: Int)
  }

  struct Key {
    var phase = Phase.closed(log: [])
    var epoch = 0
    var out = 0
  }

  let failureRatio: Double
  let minimumCalls: Int
  let window: Duration
  let coolDown: Duration
  let probes: Int
  var keys: [String: Key] = [:]

  func state(_ key: String, now: PaceInstant) -> CircuitBreakerState {
    switch keys[key]?.phase ?? .closed(log: []) {
    case .closed: return .closed
    case .open(let until): return now < until ? .open(until: until) : .halfOpen
    case .halfOpen: return .halfOpen
    }
  }

  /// The permit's epoch and whether it is a probe, or the error.
  mutating func permit(_ name: String, now: PaceInstant) -> Result<(epoch: Int, probe: Bool), CircuitBreakerError> {
    var key = keys[name] ?? Key()
    defer { keys[name] = key }
    switch key.phase {
    case .closed:
      key.out += 1
      return .success((key.epoch, false))
    case .open(let until) where now < until:
      return .failure(.open(until: until, retryAfter: now.duration(to: until)))
    case .open:
      key.phase = .halfOpen(issued: 1, succeeded: 0)
      key.epoch += 1
      key.out += 1
      return .success((key.epoch, true))
    case .halfOpen(let issued, let succeeded):
      guard issued < probes else { return .failure(.probesInFlight) }
      key.phase = .halfOpen(issued: issued + 1, succeeded: succeeded)
      key.out += 1
      return .success((key.epoch, true))
    }
  }

  mutating func record(_ outcome: CircuitBreakerOutcome, _ name: String, epoch: Int, probe: Bool, now: PaceInstant) {
    var key = keys[name]!
    defer { keys[name] = key }
    key.out -= 1
    guard epoch == key.epoch else { return }
    switch key.phase {
    case .closed(var log) where !probe && outcome != .ignored:
      log.append((now, outcome == .failure))
      let recent = log.filter { now < $0.at.advanced(by: window) }
      let failures = recent.filter(\.failed).count
      if outcome == .failure, recent.count >= minimumCalls, Double(failures) >= failureRatio * Double(recent.count) {
        key.phase = .open(until: now.advanced(by: coolDown))
        key.epoch += 1
      } else {
        key.phase = .closed(log: log)
      }
    case .halfOpen(let issued, let succeeded) where probe:
      switch outcome {
      case .success where succeeded + 1 == probes:
        key.phase = .closed(log: [])
        key.epoch += 1
      case .success: key.phase = .halfOpen(issued: issued, succeeded: succeeded + 1)
      case .failure:
        key.phase = .open(until: now.advanced(by: coolDown))
        key.epoch += 1
      case .ignored: key.phase = .halfOpen(issued: issued - 1, succeeded: succeeded)
      }
    default: break
    }
  }

  /// The keys that are not closed with an empty window and no permit out.
  func keyCount(now: PaceInstant) -> Int {
    keys.values.count { key in
      guard key.out == 0, case .closed(let log) = key.phase else { return true }
      return log.contains { now < $0.at.advanced(by: window) }
    }
  }
}

/// `KeyedCircuitBreaker` against the reference model on seeded random timelines: every answer,
/// every state, and the keys kept, at every step.
@Suite(.offThePool) struct KeyedCircuitBreakerReferenceModelTests {
  @Test(arguments: 0..<UInt64(fuzzRuns(40)))
  func agreesWithTheReferenceModel(seed: UInt64) throws {
    var random = SeededGenerator(seed: seed)
    let ratio = [0.25, 0.5, 0.75, 1.0].randomElement(using: &random)!
    let minimumCalls = Int.random(in: 1...5, using: &random)
    let window = Duration.milliseconds(Int.random(in: 1...20, using: &random) * 100)
    let coolDown = Duration.milliseconds(Int.random(in: 1...20, using: &random) * 100)
    let probes = Int.random(in: 1...3, using: &random)
    let scheduler = TestScheduler()
    let breaker = KeyedCircuitBreaker<String>(
      failureRatio: ratio, minimumCalls: minimumCalls, window: window, coolDown: coolDown, probes: probes,
      clock: scheduler)
    var model = CircuitBreakerReferenceModel(
      failureRatio: ratio, minimumCalls: minimumCalls, window: window, coolDown: coolDown, probes: probes)
    var out: [(KeyedCircuitBreaker<String>.Permit, epoch: Int)] = []
    let keys = ["a", "b", "c"]
    for step in 0..<2000 {
      let now = scheduler.now
      let context = "seed \(seed), step \(step), at \(now)"
      switch Int.random(in: 0..<10, using: &random) {
      case 0..<2:
        scheduler.advance(by: .milliseconds(Int.random(in: 0...300, using: &random)))
      case 2..<6:
        let key = keys.randomElement(using: &random)!
        let expected = model.permit(key, now: now)
        do throws(CircuitBreakerError) {
          let permit = try breaker.permit(key)
          guard case .success(let reference) = expected else {
            Issue.record("\(context): permitted, the model says \(expected)")
            return
          }
          #expect(permit.isProbe == reference.probe, "\(context)")
          out.append((permit, reference.epoch))
        } catch {
          guard case .failure(let reference) = expected else {
            Issue.record("\(context): refused with \(error), the model permits")
            return
          }
          #expect(error == reference, "\(context)")
        }
      default:
        guard !out.isEmpty else { continue }
        let (permit, epoch) = out.remove(at: Int.random(in: 0..<out.count, using: &random))
        let outcome = [CircuitBreakerOutcome.success, .failure, .failure, .ignored].randomElement(using: &random)!
        breaker.record(outcome, for: permit)
        model.record(outcome, permit.key, epoch: epoch, probe: permit.isProbe, now: now)
      }
      for key in keys {
        #expect(breaker.state(for: key) == model.state(key, now: scheduler.now), "\(context), key \(key)")
      }
      #expect(breaker.keyCount == model.keyCount(now: scheduler.now), "\(context)")
    }
  }
}

/// Bad settings stop the process with a message that names the parameter.
@Suite struct KeyedCircuitBreakerPreconditionTests {
  static func message(_ result: ExitTest.Result?) -> String {
    String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
  }

  @Test func aFailureRatioAboveOneNamesTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = KeyedCircuitBreaker<String>(failureRatio: 1.5, clock: TestScheduler())
    }
    #expect(Self.message(result).contains("KeyedCircuitBreaker: failureRatio must be above 0 and at most 1 (got 1.5)"))
  }

  @Test func zeroProbesNameTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = KeyedCircuitBreaker<String>(probes: 0, clock: TestScheduler())
    }
    #expect(Self.message(result).contains("KeyedCircuitBreaker: probes must be positive (got 0)"))
  }

  @Test func aZeroWindowNamesTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = KeyedCircuitBreaker<String>(window: .zero, clock: TestScheduler())
    }
    #expect(Self.message(result).contains("KeyedCircuitBreaker: window must be positive"))
  }
}
