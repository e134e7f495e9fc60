// Elements per second through Pace's `.debounced` and `.throttled`, beside swift-async-algorithms'
// `debounce` (and `_throttle`) in the same run (issue 4, "Speed and reliability").
//
// Each iteration pushes 1M elements of `(0..<1M).async` (a base sequence that never suspends)
// through the operator and reads what comes out. The printed figures marked `*` are per element:
// ns per element, mallocs per element, and the throughput in elements per second. The debounce
// interval (10 ms) never elapses within a burst, so the timer re-arms every 10 ms and the last
// element comes out when the base sequence finishes; the throttle emits every 10 ms.

import AsyncAlgorithms
import Benchmark
import Pace

let interval = Duration.milliseconds(10)

let benchmarks: @Sendable () -> Void = {
  Benchmark.defaultConfiguration = .init(
    metrics: [.throughput, .wallClock, .cpuTotal, .mallocCountTotal],
    warmupIterations: 1,
    scalingFactor: .mega,  // 1M elements per iteration; the `*` figures are per element
    maxDuration: .seconds(5),
    maxIterations: 12
  )

  // MARK: Floor

  Benchmark("Floor: (0..<1M).async read") { benchmark in
    var last = 0
    for await element in (0..<benchmark.scaledIterations.count).async { last = element }
    blackHole(last)
  }

  // MARK: swift-async-algorithms

  Benchmark("AsyncAlgorithms debounce (10 ms)") { benchmark in
    var last = 0
    for await element in (0..<benchmark.scaledIterations.count).async.debounce(for: interval) { last = element }
    precondition(last == benchmark.scaledIterations.count - 1)
    blackHole(last)
  }

  Benchmark("AsyncAlgorithms _throttle (10 ms)") { benchmark in
    // Pulled by the consumer, with no task of its own: a different design (see AsyncOperators.md).
    var last = 0
    for await element in (0..<benchmark.scaledIterations.count).async._throttle(for: interval) { last = element }
    blackHole(last)
  }

  // MARK: Pace

  Benchmark("Pace debounced (10 ms)") { benchmark in
    var last = 0
    for await element in (0..<benchmark.scaledIterations.count).async.debounced(for: interval) { last = element }
    precondition(last == benchmark.scaledIterations.count - 1)
    blackHole(last)
  }

  Benchmark("Pace throttled (10 ms)") { benchmark in
    var last = 0
    for await element in (0..<benchmark.scaledIterations.count).async.throttled(for: interval) { last = element }
    precondition(last == benchmark.scaledIterations.count - 1)
    blackHole(last)
  }
}
