import Pace
import PaceHTTPClient
import PaceTestSupport
import PaceTesting
import Testing

/// An upstream of fixed capacity on a ``TestScheduler``, called through `PacedRequests.send`: it
/// works on `workers` requests at a time, `serviceTime` each, and queues the rest in order of
/// arrival, so a request's latency grows with the queue in front of it (as the service of
/// AdaptiveLimitSimulationTests). It completes one request at a time, in the order of its
/// completion instants (arrival order breaking ties), and only when every caller is parked (in
/// the upstream, waiting for a place, or done): the run is the same every time.
final class SimulatedUpstream: Sendable {
  let workers = 8
  let serviceTime = Duration.milliseconds(20)
  let scheduler: TestScheduler

  private struct Call {
    var number: Int
    var arrivedAt: PaceInstant
    var continuation: CheckedContinuation<Void, Never>
  }

  private struct State {
    /// Calls being worked on, with their completion instants.
    var working: [(at: PaceInstant, call: Call)] = []
    var queue: [Call] = []
    var arrivals = 0
    /// The calls in the upstream as each arrived, itself included.
    var inFlightAtArrivals: [(at: PaceInstant, inFlight: Int)] = []
    var roundTrips: [Duration] = []
    var inFlight: Int { working.count + queue.count }
  }

  private let state = LockedState(State())

  init(scheduler: TestScheduler) {
    self.scheduler = scheduler
  }

  /// One call: returns when the upstream has worked on it.
  func call() async -> ResponseHead {
    await withCheckedContinuation { continuation in
      state.withLock { s in
        s.arrivals += 1
        let call = Call(number: s.arrivals, arrivedAt: scheduler.now, continuation: continuation)
        if s.working.count < workers {
          s.working.append((scheduler.now.advanced(by: serviceTime), call))
        } else {
          s.queue.append(call)
        }
        s.inFlightAtArrivals.append((scheduler.now, s.inFlight))
      }
    }
    return ResponseHead(status: 200, headerFields: [])
  }

  /// Calls in the upstream now.
  var inFlight: Int { state.withLock { $0.inFlight } }
  /// The most calls in the upstream at once, counted from `start`.
  func maximumInFlight(from start: PaceInstant = .zero) -> Int {
    state.withLock { $0.inFlightAtArrivals.filter { $0.at >= start }.map(\.inFlight).max() ?? 0 }
  }
  /// Each completed call's time in the upstream, in order of completion.
  var roundTrips: [Duration] { state.withLock { $0.roundTrips } }

  /// Completes the next call if it is due now; else the instant it is due, if any.
  func completeNext() -> (completed: Bool, next: PaceInstant?) {
    let now = scheduler.now
    let done = state.withLock { s -> Call? in
      guard
        let index = s.working.indices.min(by: {
          (s.working[$0].at, s.working[$0].call.number) < (s.working[$1].at, s.working[$1].call.number)
        }),
        s.working[index].at <= now
      else { return nil }
      let call = s.working.remove(at: index).call
      s.roundTrips.append(call.arrivedAt.duration(to: now))
      if !s.queue.isEmpty { s.working.append((now.advanced(by: serviceTime), s.queue.removeFirst())) }
      return call
    }
    if let done {
      done.continuation.resume()
      return (true, nil)
    }
    return (false, state.withLock { $0.working.map(\.at).min() })
  }
}

/// `PacedRequests.send` by 100 callers, each sending 12 requests one after another, to an upstream
/// that does 8 at a time, 20 ms each: with an adaptive concurrency limit the calls in the upstream
/// stay near its capacity and their latency near its service time; without one, every caller is
/// in the upstream at once and each call waits behind all the others.
@Suite(.timeLimit(.minutes(2))) struct PacedRequestsAdaptiveSimulationTests {
  static let callers = 100
  static let requestsPerCaller = 12
  static let key = "https://upstream.example"

  struct Run {
    var maximumInFlight: Int
    /// The most in the upstream at once from 300 ms on, once the limit has moved.
    var maximumInFlightFrom300ms: Int
    var roundTrips: [Duration]
    var end: PaceInstant
    /// Each change of the key's limit, read whenever every caller is parked: when, and the new limit.
    var limits: [(at: PaceInstant, limit: Int)]
    /// Keys the concurrency limit holds once every caller is done: none, all idle.
    var keysHeldAtEnd: Int

    /// The nearest-rank percentile of the calls' time in the upstream.
    func percentile(_ p: Int) -> Duration {
      let sorted = roundTrips.sorted()
      let rank = (sorted.count * p + 99) / 100
      return sorted[max(rank, 1) - 1]
    }
  }

  func run(_ limit: AdaptiveLimit?) async throws -> Run {
    let scheduler = TestScheduler()
    let upstream = SimulatedUpstream(scheduler: scheduler)
    let requests = PacedRequests(
      budget: nil, concurrency: limit.map { .adaptive($0) }, clock: scheduler,
      unixTime: { .seconds(1_700_000_000) + scheduler.now.offset })
    let finished = LockedState(0)
    let tasks = (0..<Self.callers).map { _ in
      Task {
        for _ in 0..<Self.requestsPerCaller {
          _ = try await requests.send(key: Self.key, idempotent: true) { ((), await upstream.call()) }
        }
        finished.withLock { $0 += 1 }
      }
    }
    var limits: [(at: PaceInstant, limit: Int)] = []
    // Every caller parked: in the upstream, waiting for the key's turn or a place, or done.
    func parked() -> Bool {
      upstream.inFlight + requests.limiter.waitingCount(for: Self.key)
        + (requests.concurrency?.waitingCount(for: Self.key) ?? 0) + finished.withLock { $0 } == Self.callers
    }
    while finished.withLock({ $0 }) < Self.callers {
      await waitUntil("every caller is parked") { parked() }
      // Read once every caller is parked, so that each completion's sample is in.
      if let limit = requests.concurrency?.limit(for: Self.key)?.limit, limit != limits.last?.limit {
        limits.append((scheduler.now, limit))
      }
      let (completed, next) = upstream.completeNext()
      if completed { continue }
      guard let next else { break }
      scheduler.advance(to: next)
    }
    for task in tasks { try await task.value }
    return Run(
      maximumInFlight: upstream.maximumInFlight(), maximumInFlightFrom300ms: upstream.maximumInFlight(from: ms(300)),
      roundTrips: upstream.roundTrips, end: scheduler.now, limits: limits,
      keysHeldAtEnd: requests.concurrency?.keyCount ?? 0)
  }

  /// The three runs beside each other, exact: with no limit every caller is in the upstream at
  /// once; Gradient2, started below the capacity (its first window is the baseline), rises to a
  /// limit just above it; AIMD, started above it, comes down within its first rounds and holds
  /// near it. The callers send one request after another, so they wait in front of the upstream
  /// instead of in it.
  @Test func anAdaptiveLimitKeepsTheUpstreamNearItsCapacity() async throws {
    let total = Self.callers * Self.requestsPerCaller

    let unlimited = try await run(nil)
    #expect(unlimited.roundTrips.count == total)
    #expect(unlimited.maximumInFlight == Self.callers)
    #expect(unlimited.percentile(50) == .milliseconds(240))
    #expect(unlimited.percentile(99) == .milliseconds(260))
    #expect(unlimited.end == ms(3_020))  // 1,200 calls at 400 a second

    let gradient2 = try await run(
      .gradient2(initialLimit: 6, tolerance: 1.25, queueSize: 2, window: .milliseconds(100)))
    #expect(gradient2.roundTrips.count == total)
    #expect(gradient2.maximumInFlight == 12)
    #expect(gradient2.percentile(50) == .milliseconds(20))
    #expect(gradient2.percentile(99) == .milliseconds(40))
    #expect(gradient2.roundTrips.max() == .milliseconds(40))
    #expect(gradient2.end == ms(3_140))
    #expect(
      gradient2.limits.map { "\($0.at)=\($0.limit)" } == [
        "0 ms=6", "340 ms=7", "540 ms=8", "840 ms=9", "1.04 s=10", "1.34 s=11", "1.74 s=12",
      ])

    let aimd = try await run(.aimd(initialLimit: 20, timeout: .milliseconds(30)))
    #expect(aimd.roundTrips.count == total)
    #expect(aimd.maximumInFlight == 20)
    #expect(aimd.maximumInFlightFrom300ms == 10)
    #expect(aimd.percentile(50) == .milliseconds(20))
    #expect(aimd.percentile(99) == .milliseconds(40))
    #expect(aimd.roundTrips.max() == .milliseconds(60))
    #expect(aimd.end == ms(3_020))
    #expect(
      aimd.limits.prefix(7).map { "\($0.at)=\($0.limit)" } == [
        "0 ms=20", "60 ms=18", "100 ms=16", "160 ms=14", "200 ms=12", "240 ms=10", "280 ms=9",
      ])
    #expect(aimd.limits.dropFirst(7).allSatisfy { (9...10).contains($0.limit) })
    #expect([unlimited, gradient2, aimd].map(\.keysHeldAtEnd) == [0, 0, 0])
  }
}
