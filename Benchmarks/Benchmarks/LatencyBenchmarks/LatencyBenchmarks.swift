// How late a trailing invocation fires on a real DispatchQueue (issue 2: within 2 ms of its
// deadline on an idle machine).
//
// Each iteration makes one debounced call and waits for its trailing invocation. The lateness
// is the invocation's time minus the deadline, both read from the same `DispatchScheduler`.
// The deadline is taken as `now` just before the call plus the interval, which is at most the
// debouncer's own deadline, so the figure errs on the late side by the cost of one call.

import Benchmark
import BenchmarkSupport
import Dispatch
import Pace

let interval = Duration.milliseconds(5)
let samples = 200

let benchmarks: @Sendable () -> Void = {
  /// Lateness in microseconds; p50 and p99 are read off its percentiles.
  let lateness = BenchmarkMetric.custom("Lateness (µs)", polarity: .prefersSmaller, useScalingFactor: false)

  Benchmark(
    "Debouncer trailing fire − deadline (5 ms, DispatchQueue)",
    configuration: .init(
      metrics: [lateness],
      warmupIterations: 5,
      maxDuration: .seconds(30),
      maxIterations: samples
    )
  ) { benchmark in
    let scheduler = DispatchScheduler.queue(DispatchQueue(label: "pace.benchmarks.latency"))
    let fired = DispatchSemaphore(value: 0)
    let fireTime = Locked<PaceInstant?>(nil)
    let debouncer = Debouncer<Int>(for: interval, scheduler: scheduler) { _ in
      fireTime.withLock { $0 = scheduler.now }
      fired.signal()
    }

    let deadline = scheduler.now.advanced(by: interval)
    debouncer.call(1)
    fired.wait()

    let late = deadline.duration(to: fireTime.withLock { $0! })
    benchmark.measurement(lateness, Int(late / .microseconds(1)))
  }
}
