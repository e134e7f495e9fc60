import Foundation
import Pace
import PaceTestSupport
import Testing

@testable import Pace

/// A service of fixed capacity on a ``TestScheduler``: it works on `workers` requests at a time,
/// `serviceTime` each, and queues the rest in order of arrival, so a request's latency grows
/// with the queue in front of it. Clients send `arrivalsPerSecond` evenly (arrival `k` at
/// `⌊k × 1 s / arrivalsPerSecond⌋`) and give up after `clientTimeout`; the service cannot tell,
/// and still works on a request whose client has gone.
///
/// In front of it, optionally, an ``AdaptiveLimit``: an arrival while `limit` requests are in
/// flight is refused at once, and each completion is a sample (its round trip from admission,
/// the in-flight count at its admission itself included, dropped if over `clientTimeout`).
struct SimulatedService {
  var workers = 8
  var serviceTime = Duration.milliseconds(20)
  var arrivalsPerSecond: Int64
  var clientTimeout = Duration.seconds(1)
  var duration = Duration.seconds(30)

  /// Requests per second the service completes at most.
  var capacityPerSecond: Int64 { Int64(workers) * 1_000_000_000 / serviceTime.paceNanoseconds }

  struct Request {
    var admittedAt: PaceInstant
    var inFlight: Int
    /// The permit of an ``AdaptiveConcurrencyLimiter`` run.
    var permit: AdaptiveConcurrencyPermit?
  }

  struct Completion {
    var at: PaceInstant
    var latency: Duration
  }

  /// What one run measured, over `duration` from instant 0.
  struct Result {
    var arrivals = 0
    var refused = 0
    /// Requests completed within the run, in order.
    var completions: [Completion] = []
    /// Each change of the limit: (when, the new limit), the initial one at 0.
    var limits: [(at: PaceInstant, limit: Int)] = []
    var clientTimeout = Duration.seconds(1)
    var capacityInRun = 0

    /// Completed within the client's timeout, and so of use to it.
    var good: Int { completions.count { $0.latency <= clientTimeout } }
    /// Good completions as a share of what the service can complete in the run.
    var goodput: Double { Double(good) / Double(capacityInRun) }
    /// The nearest-rank 99th percentile of the completed requests' latencies.
    var p99: Duration { percentile(99) }

    func percentile(_ p: Int) -> Duration {
      let sorted = completions.map(\.latency).sorted()
      guard !sorted.isEmpty else { return .zero }
      let rank = (sorted.count * p + 99) / 100  // ⌈count × p / 100⌉
      return sorted[Swift.max(rank, 1) - 1]
    }
  }

  private struct State {
    var limit: AdaptiveLimit?
    var inFlight = 0
    var busy = 0
    var queue: [Request] = []
    var queueHead = 0
    var result = Result()
  }

  /// Runs the service, with `limit` in front of it: fed by the simulation itself, or through an
  /// ``AdaptiveConcurrencyLimiter`` on the run's scheduler if `throughLimiter`.
  func run(limit: AdaptiveLimit?, throughLimiter: Bool = false) -> Result {
    let scheduler = TestScheduler()
    let state = LockedState(State(limit: throughLimiter ? nil : limit))
    let limiter = limit.flatMap { limit in
      throughLimiter
        ? AdaptiveConcurrencyLimiter(limit, clock: scheduler) { _, to in
          state.withLock { $0.result.limits.append((scheduler.now, to)) }
        } : nil
    }
    let end = PaceInstant.zero.advanced(by: duration)
    let arrivalCount = arrivalsPerSecond * duration.paceNanoseconds / 1_000_000_000
    let service = self
    state.withLock {
      $0.result.clientTimeout = clientTimeout
      $0.result.capacityInRun = Int(capacityPerSecond * duration.paceNanoseconds / 1_000_000_000)
      if let limit { $0.result.limits.append((.zero, limit.limit)) }
    }

    @Sendable func complete(_ request: Request) {
      let now = scheduler.now
      let latency = request.admittedAt.duration(to: now)
      request.permit?.release(latency > clientTimeout ? .dropped : .success)
      let next: Request? = state.withLock { s in
        s.inFlight -= 1
        s.result.completions.append(Completion(at: now, latency: latency))
        if var limit = s.limit {
          let before = limit.limit
          let sample = AdaptiveLimitSample(
            roundTrip: latency, inFlight: request.inFlight, dropped: latency > service.clientTimeout)
          if limit.record(sample, now: now) != before { s.result.limits.append((now, limit.limit)) }
          s.limit = limit
        }
        guard s.queueHead < s.queue.count else {
          s.busy -= 1
          return nil
        }
        defer { s.queueHead += 1 }
        return s.queue[s.queueHead]
      }
      if let next { start(next) }
    }

    @Sendable func start(_ request: Request) {
      _ = scheduler.schedule(at: scheduler.now.advanced(by: serviceTime)) { complete(request) }
    }

    @Sendable func arrive(_ k: Int64) {
      if k + 1 < arrivalCount {
        let at = PaceInstant(nanoseconds: (k + 1) * 1_000_000_000 / arrivalsPerSecond)
        _ = scheduler.schedule(at: at) { arrive(k + 1) }
      }
      let now = scheduler.now
      let permit = limiter?.tryAcquire()
      let toStart: Request? = state.withLock { s in
        s.result.arrivals += 1
        if let limit = s.limit, s.inFlight >= limit.limit {
          s.result.refused += 1
          return nil
        }
        if limiter != nil, permit == nil {
          s.result.refused += 1
          return nil
        }
        s.inFlight += 1
        let request = Request(admittedAt: now, inFlight: s.inFlight, permit: permit)
        guard s.busy < service.workers else {
          s.queue.append(request)
          return nil
        }
        s.busy += 1
        return request
      }
      if let toStart { start(toStart) }
    }

    _ = scheduler.schedule(at: .zero) { arrive(0) }
    scheduler.advance(to: end)
    return state.withLock { $0.result }
  }
}

/// The adaptive limits in front of a service offered three times its capacity, against the same
/// service with no limit and unloaded, on virtual time: exact figures, the same every run.
@Suite struct AdaptiveLimitSimulationTests {
  /// 8 at a time, 20 ms each: 400 a second.
  static let unloaded = SimulatedService(arrivalsPerSecond: 200)
  static let overloaded = SimulatedService(arrivalsPerSecond: 1_200)

  /// Finds the service's queueing point from above: starts at 20, over twice what it can do.
  static let aimd = AdaptiveLimit.aimd(initialLimit: 20, timeout: .milliseconds(30))
  /// Starts below the service's capacity (the first window's mean is the baseline) and keeps the
  /// latency within a quarter over it, with room for 2 in the queue.
  static let gradient2 = AdaptiveLimit.gradient2(initialLimit: 6, tolerance: 1.25, queueSize: 2)

  @Test func theServiceUnloadedAnswersInItsServiceTime() {
    let run = Self.unloaded.run(limit: nil)
    #expect(Self.unloaded.capacityPerSecond == 400)
    #expect(run.arrivals == 6_000)
    #expect(run.completions.count == 5_997)  // the last 3 complete after the 30 s
    #expect(run.p99 == .milliseconds(20))
  }

  @Test func withNoLimitTheLatencyCollapses() {
    let unloadedP99 = Self.unloaded.run(limit: nil).p99
    let run = Self.overloaded.run(limit: nil)
    #expect(run.arrivals == 36_000)
    #expect(run.refused == 0)
    // The service completes all it can in the 30 s, but each waits behind a queue that grows by
    // 800 a second: only those of the first 1.5 s or so are answered before their client gives up.
    #expect(run.completions.count == 11_993)
    #expect(run.good == 592)
    #expect(run.goodput < 0.05)
    #expect(run.p99 > unloadedP99 * 500)
  }

  @Test(arguments: [
    ("aimd", aimd), ("gradient2", gradient2),
    ("aimd from below", AdaptiveLimit.aimd(initialLimit: 2, timeout: .milliseconds(30))),
  ])
  func anAdaptiveLimitKeepsGoodputAndLatency(name: String, limit: AdaptiveLimit) {
    let unloadedP99 = Self.unloaded.run(limit: nil).p99
    let unlimited = Self.overloaded.run(limit: nil)
    let limited = Self.overloaded.run(limit: limit)

    #expect(limited.goodput >= 0.9, "\(name): goodput \(limited.goodput)")
    #expect(limited.p99 <= unloadedP99 * 2, "\(name): p99 \(limited.p99)")
    // Beside it, in the same run of the same service, with no limit:
    #expect(unlimited.goodput < 0.05)
    #expect(unlimited.p99 > unloadedP99 * 500)
    // The limit stays within its floor and ceiling, and settles near the capacity of 8.
    #expect(limited.limits.allSatisfy { (1...200).contains($0.limit) })
    let settled = limited.limits.filter { $0.at >= .init(.seconds(20)) }.map(\.limit)
    #expect(settled.allSatisfy { (8...16).contains($0) }, "\(name): \(Set(settled).sorted())")
  }

  /// Gradient2's limit, started far above the capacity, learns the overloaded first window as
  /// its baseline and keeps the latency there: the article says to start below.
  @Test func gradient2StartedFarAboveTheCapacityKeepsAnOverloadedBaseline() {
    let unloadedP99 = Self.unloaded.run(limit: nil).p99
    let run = Self.overloaded.run(limit: .gradient2(initialLimit: 20, tolerance: 1.25, queueSize: 2))
    #expect(run.goodput >= 0.9)
    #expect(run.p99 > unloadedP99 * 2)
  }

  @Test func theExactFigures() {
    let aimd = Self.overloaded.run(limit: Self.aimd)
    let gradient2 = Self.overloaded.run(limit: Self.gradient2)
    #expect((aimd.good, aimd.refused, aimd.p99) == (11_993, 23_999, .nanoseconds(34_166_667)))
    #expect((gradient2.good, gradient2.refused, gradient2.p99) == (11_591, 24_398, .nanoseconds(36_666_667)))
    let unlimited = Self.overloaded.run(limit: nil)
    #expect((unlimited.good, unlimited.refused, unlimited.p99) == (592, 0, .nanoseconds(19_806_666_666)))
  }

  /// The same runs through an ``AdaptiveConcurrencyLimiter`` (its ``ConcurrencyLimiter`` admits,
  /// its permits' releases are the samples): the same figures and the same limits at the same
  /// instants as the value fed directly.
  @Test(arguments: [("aimd", aimd), ("gradient2", gradient2)])
  func anAdaptiveConcurrencyLimiterRunsTheSame(name: String, limit: AdaptiveLimit) {
    let direct = Self.overloaded.run(limit: limit)
    let through = Self.overloaded.run(limit: limit, throughLimiter: true)
    #expect((through.good, through.refused, through.p99) == (direct.good, direct.refused, direct.p99), "\(name)")
    #expect(through.completions.map(\.latency) == direct.completions.map(\.latency), "\(name)")
    let changes = { (run: SimulatedService.Result) in run.limits.map { "\($0.at)=\($0.limit)" } }
    #expect(changes(through) == changes(direct), "\(name)")
    #expect(through.limits.count > 5, "\(name)")
  }

  /// The timeline the AdaptiveLimits article shows, rendered from these runs: the test fails if
  /// the checked-in image differs. `PACE_RENDER_PLOTS=1 swift test --filter AdaptiveLimitSimulationTests`
  /// writes it instead.
  @Test func theArticlesTimelineIsThisRun() throws {
    let svg = TimelinePlot(
      noLimit: Self.overloaded.run(limit: nil),
      aimd: Self.overloaded.run(limit: Self.aimd),
      gradient2: Self.overloaded.run(limit: Self.gradient2),
      duration: Self.overloaded.duration
    ).svg
    let url = URL(fileURLWithPath: #filePath)
      .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
      .appendingPathComponent("Sources/Pace/Pace.docc/Resources/adaptive-limit-timeline.svg")
    if ProcessInfo.processInfo.environment["PACE_RENDER_PLOTS"] == "1" {
      try svg.write(to: url, atomically: true, encoding: .utf8)
    }
    let checkedIn = try String(contentsOf: url, encoding: .utf8)
    #expect(
      checkedIn == svg,
      "adaptive-limit-timeline.svg is stale: PACE_RENDER_PLOTS=1 swift test --filter AdaptiveLimitSimulationTests")
  }
}

/// Limit and latency over time as an SVG: the limits of both algorithms above, the worst latency
/// of each 100 ms on a log scale below, with the service unlimited beside them.
struct TimelinePlot {
  var noLimit: SimulatedService.Result
  var aimd: SimulatedService.Result
  var gradient2: SimulatedService.Result
  var duration: Duration

  static let width = 720.0
  static let left = 60.0
  static let right = 700.0
  static let limitPanel = (top: 50.0, bottom: 210.0, maximum: 24.0)
  static let latencyPanel = (top: 260.0, bottom: 420.0, decades: (from: -2.0, to: 2.0))
  static let bucket = Duration.milliseconds(100)
  static let colors = (aimd: "#1f77b4", gradient2: "#ff7f0e", noLimit: "#d62728", guide: "#888888")

  var seconds: Double { Double(duration.paceNanoseconds) / 1e9 }

  func x(_ at: PaceInstant) -> Double {
    Self.left + (Self.right - Self.left) * Double(at.nanoseconds) / Double(duration.paceNanoseconds)
  }

  func yLimit(_ limit: Double) -> Double {
    let p = Self.limitPanel
    return p.bottom - (p.bottom - p.top) * Swift.min(limit, p.maximum) / p.maximum
  }

  func yLatency(_ latency: Duration) -> Double {
    let p = Self.latencyPanel
    let decades = log10(Swift.max(Double(latency.paceNanoseconds) / 1e9, 1e-9))
    let clamped = Swift.min(Swift.max(decades, p.decades.from), p.decades.to)
    return p.bottom - (p.bottom - p.top) * (clamped - p.decades.from) / (p.decades.to - p.decades.from)
  }

  /// The limit as a step line: every change.
  func limitPoints(_ result: SimulatedService.Result) -> [(Double, Double)] {
    var points: [(Double, Double)] = []
    for (index, change) in result.limits.enumerated() {
      if index > 0 { points.append((x(change.at), yLimit(Double(result.limits[index - 1].limit)))) }
      points.append((x(change.at), yLimit(Double(change.limit))))
    }
    if let last = result.limits.last { points.append((x(PaceInstant(duration)), yLimit(Double(last.limit)))) }
    return points
  }

  /// The worst latency of the requests completed in each bucket (none: no point).
  func latencyPoints(_ result: SimulatedService.Result) -> [(Double, Double)] {
    var worst: [Int64: Duration] = [:]
    for completion in result.completions {
      let index = completion.at.nanoseconds / Self.bucket.paceNanoseconds
      worst[index] = Swift.max(worst[index] ?? .zero, completion.latency)
    }
    return worst.sorted { $0.key < $1.key }.map { index, latency in
      (x(PaceInstant(nanoseconds: (index + 1) * Self.bucket.paceNanoseconds)), yLatency(latency))
    }
  }

  func format(_ value: Double) -> String {
    let tenths = Int((value * 10).rounded())
    return "\(tenths / 10).\(tenths % 10)"
  }

  /// Milliseconds below a second, else seconds to a tenth.
  func describe(_ latency: Duration) -> String {
    let milliseconds = latency.paceNanoseconds / 1_000_000
    guard milliseconds >= 1_000 else { return "\(milliseconds) ms" }
    return "\(milliseconds / 1_000).\(milliseconds % 1_000 / 100) s"
  }

  func polyline(_ points: [(Double, Double)], color: String, dashed: Bool = false) -> String {
    let list = points.map { "\(format($0.0)),\(format($0.1))" }.joined(separator: " ")
    let dash = dashed ? " stroke-dasharray=\"6 4\"" : ""
    return "<polyline fill=\"none\" stroke=\"\(color)\" stroke-width=\"1.5\"\(dash) points=\"\(list)\"/>"
  }

  func text(_ s: String, x: Double, y: Double, anchor: String = "start", color: String = "#333333") -> String {
    "<text x=\"\(format(x))\" y=\"\(format(y))\" text-anchor=\"\(anchor)\" fill=\"\(color)\">\(s)</text>"
  }

  func line(_ x1: Double, _ y1: Double, _ x2: Double, _ y2: Double, color: String = "#dddddd") -> String {
    "<line x1=\"\(format(x1))\" y1=\"\(format(y1))\" x2=\"\(format(x2))\" y2=\"\(format(y2))\" stroke=\"\(color)\"/>"
  }

  var svg: String {
    let c = Self.colors
    let end = PaceInstant(duration)
    var body: [String] = []
    body.append(
      "<rect width=\"\(format(Self.width))\" height=\"500.0\" fill=\"#ffffff\"/>")
    body.append(
      text(
        "A service of 8 at a time, 20 ms each, offered 3 times its capacity for 30 s",
        x: Self.left, y: 24, color: "#000000"))
    // Grids, axes and their labels.
    for second in stride(from: 0, through: Int(seconds), by: 5) {
      let gx = x(PaceInstant(.seconds(second)))
      body.append(line(gx, Self.limitPanel.top, gx, Self.limitPanel.bottom))
      body.append(line(gx, Self.latencyPanel.top, gx, Self.latencyPanel.bottom))
      body.append(text("\(second) s", x: gx, y: Self.latencyPanel.bottom + 16, anchor: "middle"))
    }
    for limit in stride(from: 0, through: Int(Self.limitPanel.maximum), by: 4) {
      let gy = yLimit(Double(limit))
      body.append(line(Self.left, gy, Self.right, gy))
      body.append(text("\(limit)", x: Self.left - 8, y: gy + 4, anchor: "end"))
    }
    for (label, latency) in [
      ("10 ms", Duration.milliseconds(10)), ("100 ms", .milliseconds(100)), ("1 s", .seconds(1)),
      ("10 s", .seconds(10)), ("100 s", .seconds(100)),
    ] {
      let gy = yLatency(latency)
      body.append(line(Self.left, gy, Self.right, gy))
      body.append(text(label, x: Self.left - 8, y: gy + 4, anchor: "end"))
    }
    body.append(text("limit", x: Self.left, y: Self.limitPanel.top - 8))
    body.append(text("worst latency of each 100 ms (log)", x: Self.left, y: Self.latencyPanel.top - 8))
    // Guides: the capacity, and twice the unloaded latency.
    body.append(
      polyline([(x(.zero), yLimit(8)), (x(end), yLimit(8))], color: c.guide, dashed: true))
    body.append(text("capacity 8", x: Self.right - 4, y: yLimit(8) + 14, anchor: "end", color: c.guide))
    let twice = Duration.milliseconds(40)
    body.append(polyline([(x(.zero), yLatency(twice)), (x(end), yLatency(twice))], color: c.guide, dashed: true))
    body.append(text("40 ms: twice unloaded", x: Self.right - 4, y: yLatency(twice) - 4, anchor: "end", color: c.guide))
    // The runs.
    body.append(polyline(limitPoints(aimd), color: c.aimd))
    body.append(polyline(limitPoints(gradient2), color: c.gradient2))
    body.append(polyline(latencyPoints(noLimit), color: c.noLimit))
    body.append(polyline(latencyPoints(aimd), color: c.aimd))
    body.append(polyline(latencyPoints(gradient2), color: c.gradient2))
    // The legend, with each run's figures.
    let legend: [(String, String, SimulatedService.Result)] = [
      ("AIMD", c.aimd, aimd), ("Gradient2", c.gradient2, gradient2), ("no limit", c.noLimit, noLimit),
    ]
    for (index, entry) in legend.enumerated() {
      let ly = 458.0 + Double(index) * 16
      let percent = Int((entry.2.goodput * 100).rounded(.down))
      body.append(line(Self.left, ly - 4, Self.left + 20, ly - 4, color: entry.1))
      body.append(
        text(
          "\(entry.0): goodput \(percent) % of capacity, p99 latency \(describe(entry.2.p99))",
          x: Self.left + 26, y: ly))
    }
    return """
      <svg xmlns="http://www.w3.org/2000/svg" width="720" height="500" viewBox="0 0 720 500" \
      font-family="Helvetica, Arial, sans-serif" font-size="12">
      \(body.joined(separator: "\n"))
      </svg>

      """
  }
}
