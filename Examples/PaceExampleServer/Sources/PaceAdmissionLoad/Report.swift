import Pace

/// The figures of the runs: goodput is the requests answered `200` within the client's timeout,
/// per second of the run; the latency of admitted requests is that of those not refused (`200`,
/// or no answer within the timeout, counted at the timeout), from the instant each was due.
enum Report {
  struct Figures {
    var offered = 0
    var succeeded = 0
    var refused = 0
    var timedOut = 0
    var failed = 0
    /// The admitted requests' latencies, sorted.
    var latencies: [Duration] = []

    init(_ samples: some Sequence<LoadGenerator.Sample>) {
      for sample in samples {
        offered += 1
        switch sample.outcome {
        case .succeeded:
          succeeded += 1
          latencies.append(sample.latency)
        case .timedOut:
          timedOut += 1
          latencies.append(sample.latency)
        case .refused: refused += 1
        case .failed: failed += 1
        }
      }
      latencies.sort()
    }

    func percentile(_ p: Double) -> Duration? { Report.percentile(p, of: latencies) }

    var successPercent: Double { offered == 0 ? 0 : Double(succeeded) * 100 / Double(offered) }
  }

  static func line(stand: Stand, result: LoadGenerator.Result) -> String {
    let figures = Figures(result.samples)
    let seconds = result.duration.seconds
    let served = stand.service.counts
    var line =
      "  \(figures.offered) offered, \(figures.succeeded) succeeded (\(format(Double(figures.succeeded) / seconds))/s), "
      + "\(figures.refused) refused, \(figures.timedOut) timed out, \(figures.failed) failed; "
      + "p50 \(milliseconds(figures.percentile(50))), p99 \(milliseconds(figures.percentile(99))); "
      + "the service served \(served.served), at most \(served.maximumBusy) at once, its time p50 "
      + "\(milliseconds(percentile(50, of: served.times))), p99 \(milliseconds(percentile(99, of: served.times)))"
      + "; load average \(result.loadAverage), CPU \(format(result.cpu.seconds)) s"
    let lags = result.samples.map(\.lag).sorted()
    if let lag = lags.last {
      line += "; generator late by p99 \(milliseconds(lags[lags.count * 99 / 100])), at most \(milliseconds(lag))"
    }
    if !result.limits.isEmpty {
      let limits = result.limits.sorted()
      line += "; limit min \(limits[0]), median \(limits[limits.count / 2]), max \(limits[limits.count - 1])"
    }
    return line
  }

  /// The table of every run, in Markdown.
  static func table(
    _ results: [(Stand, LoadGenerator.Result)], capacity: Double, clientTimeout: Duration
  ) -> String {
    let unloaded = results.first { $0.0.run == .baseline }.flatMap { Figures($0.1.samples).percentile(99) }
    var rows = [
      "| Run | Offered/s | Goodput/s | % of capacity | p50 (ms) | p99 (ms) | Timed out | 503 critical / default / sheddable | Critical succeeded | Limit min / median / max |",
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    var verdicts: [String] = []
    for (stand, result) in results {
      let seconds = result.duration.seconds
      let all = Figures(result.samples)
      let byClass = Dictionary(grouping: result.samples, by: \.priority).mapValues(Figures.init)
      let refused = [AdmissionPriority.critical, .default, .sheddable].map { String(byClass[$0]?.refused ?? 0) }
      let critical = byClass[.critical].map { format($0.successPercent) + " %" } ?? "–"
      let goodput = Double(all.succeeded) / seconds
      let limits = result.limits.sorted()
      let limit = limits.isEmpty ? "–" : "\(limits[0]) / \(limits[limits.count / 2]) / \(limits[limits.count - 1])"
      rows.append(
        "| \(stand.run.rawValue) | \(format(Double(all.offered) / seconds)) | \(format(goodput)) | "
          + "\(format(goodput * 100 / capacity)) | \(milliseconds(all.percentile(50), cap: clientTimeout)) | "
          + "\(milliseconds(all.percentile(99), cap: clientTimeout)) | \(all.timedOut) | "
          + "\(refused.joined(separator: " / ")) | \(critical) | \(limit) |")
      guard stand.run != .baseline else { continue }
      var verdict = "\(stand.run.rawValue): goodput \(format(goodput * 100 / capacity)) % of capacity"
      verdict += goodput >= 0.9 * capacity ? " (>= 90 %: yes)" : " (>= 90 %: no)"
      if let unloaded, let p99 = all.percentile(99) {
        verdict += "; p99 \(milliseconds(p99)) against 2x the unloaded p99, \(milliseconds(unloaded * 2))"
        verdict += p99 <= unloaded * 2 ? " (yes)" : " (no)"
      }
      if stand.run == .priority, let critical = byClass[.critical], let sheddable = byClass[.sheddable] {
        verdict += "; critical succeeded \(format(critical.successPercent)) %"
        verdict += critical.successPercent >= 99 ? " (>= 99 %: yes)" : " (>= 99 %: no)"
        verdict +=
          "; sheddable refused \(format(Double(sheddable.refused) * 100 / Double(max(1, sheddable.offered)))) %"
        if let others = byClass[.default] {
          verdict += "; default succeeded \(format(others.successPercent)) %"
        }
      }
      verdicts.append(verdict)
    }
    var classes: [String] = []
    for (stand, result) in results where stand.run == .priority {
      let seconds = result.duration.seconds
      let byClass = Dictionary(grouping: result.samples, by: \.priority).mapValues(Figures.init)
      classes += [
        "",
        "| Class (\(stand.run.rawValue) run) | Offered/s | Succeeded/s | Succeeded | 503 | p50 (ms) | p99 (ms) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
      ]
      for priority in [AdmissionPriority.critical, .default, .sheddable] {
        guard let figures = byClass[priority] else { continue }
        classes.append(
          "| \(priority) | \(format(Double(figures.offered) / seconds)) | "
            + "\(format(Double(figures.succeeded) / seconds)) | \(format(figures.successPercent)) % | "
            + "\(figures.refused) | \(milliseconds(figures.percentile(50), cap: clientTimeout)) | "
            + "\(milliseconds(figures.percentile(99), cap: clientTimeout)) |")
      }
    }
    return (rows + classes + [""] + verdicts).joined(separator: "\n")
  }

  /// The nearest-rank percentile of `sorted`.
  static func percentile(_ p: Double, of sorted: [Duration]) -> Duration? {
    guard !sorted.isEmpty else { return nil }
    let rank = Int((p / 100 * Double(sorted.count)).rounded(.up))
    return sorted[max(0, min(sorted.count - 1, rank - 1))]
  }

  static func format(_ value: Double) -> String {
    let tenths = Int((value * 10).rounded())
    return "\(tenths / 10).\(abs(tenths % 10))"
  }

  /// In milliseconds with one decimal; `≥ timeout` for a latency at the client's timeout.
  static func milliseconds(_ duration: Duration?, cap: Duration? = nil) -> String {
    guard let duration else { return "–" }
    if let cap, duration >= cap { return "≥ \(format(cap.milliseconds))" }
    return format(duration.milliseconds)
  }
}
