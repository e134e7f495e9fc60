// Coalescer.signal beside DispatchSourceUserDataAdd, the Dispatch primitive it generalises
// (issue 3): 1M signals per iteration (`scalingFactor: .mega`), so the figures printed with a
// `*` are per signal. Both run their handler on a real serial queue, which drains the merged
// data on the other core while the signals go on, as in an app.

import Benchmark
import Dispatch
import Pace

let benchmarks: @Sendable () -> Void = {
  Benchmark.defaultConfiguration = .init(
    metrics: [.wallClock, .cpuTotal, .mallocCountTotal],
    warmupIterations: 2,
    scalingFactor: .mega,
    maxDuration: .seconds(3),
    maxIterations: 40
  )

  Benchmark("Coalescer<Int>.signal (.sum, DispatchQueue)") { benchmark in
    let queue = DispatchQueue(label: "pace.benchmarks.coalescer")
    let coalescer = Coalescer<Int>(merge: .sum, scheduler: .queue(queue)) { blackHole($0) }
    for _ in benchmark.scaledIterations {
      coalescer.signal(1)
    }
    coalescer.cancel()
    queue.sync {}
  }

  Benchmark("DispatchSourceUserDataAdd.add(data:)") { benchmark in
    let queue = DispatchQueue(label: "pace.benchmarks.user-data")
    let source = DispatchSource.makeUserDataAddSource(queue: queue)
    // The cycle through the handler ends with `cancel()`, which releases the handler.
    source.setEventHandler { blackHole(source.data) }
    source.activate()
    for _ in benchmark.scaledIterations {
      source.add(data: 1)
    }
    source.cancel()
    queue.sync {}
  }
}
