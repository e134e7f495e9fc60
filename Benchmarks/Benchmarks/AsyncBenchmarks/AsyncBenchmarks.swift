// Placeholder: the async operators' benchmarks replace this file.
import AsyncAlgorithms
import Benchmark
import Pace

let benchmarks: @Sendable () -> Void = {
  Benchmark("Placeholder", configuration: .init(metrics: [.wallClock], maxIterations: 1)) { _ in
    blackHole(0)
  }
}
