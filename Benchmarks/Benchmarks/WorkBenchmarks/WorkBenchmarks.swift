// KeyedSharedWork and Batcher beside the snippets apps write for them: an actor with a dictionary
// of tasks, one per key, and an actor that collects items and flushes them from a timer task
// (issue 34, "Proof"). The snippets and the calls are in BenchmarkSupport's WorkSnippets.swift,
// which WorkRounds measures too, in a plain process.
//
// Each iteration makes 1k calls (`scalingFactor: .kilo`); the rows marked `*` are per call.
// - "one caller a run": calls one after another, each starting (and ending) a run of an operation
//   that returns at once: the cost of a run, its task included.
// - "8 callers a run": 125 rounds of 8 concurrent callers on one key, whose operation yields once,
//   so that the callers after the first join its run (how many join depends on the scheduling).
// - "reuse hit": every call is answered from a result reused for an hour: no task at all.
// - Batching: see `WorkCalls`.
// - "from the main actor": the same calls made by code on the main actor (an app's). The runner's
//   main actor makes hops that cost a fraction of a plain process's; WorkRounds measures those.

import Benchmark
import BenchmarkSupport
import Pace

let benchmarks: @Sendable () -> Void = {
  Benchmark.defaultConfiguration = .init(
    metrics: [.wallClock, .cpuTotal, .mallocCountTotal],
    warmupIterations: 1,
    scalingFactor: .kilo,  // 1k calls per iteration; the `*` figures are per call
    maxDuration: .seconds(5),
    maxIterations: 50
  )

  // MARK: One caller a run

  Benchmark("Naive actor + [Key: Task]: one caller a run") { benchmark in
    blackHole(try await WorkCalls.runOneCallerARun(RequestDeduplicator(), count: benchmark.scaledIterations.count))
  }

  Benchmark("KeyedSharedWork.run: one caller a run") { benchmark in
    blackHole(try await WorkCalls.runOneCallerARun(KeyedSharedWork(), count: benchmark.scaledIterations.count))
  }

  Benchmark("Naive actor + [Key: Task]: one caller a run, from the main actor") { benchmark in
    let count = benchmark.scaledIterations.count
    blackHole(
      try await WorkCalls.onMain {
        try await WorkCalls.runOneCallerARun(RequestDeduplicator(), count: count)
      })
  }

  Benchmark("KeyedSharedWork.run: one caller a run, from the main actor") { benchmark in
    let count = benchmark.scaledIterations.count
    blackHole(
      try await WorkCalls.onMain {
        try await WorkCalls.runOneCallerARun(KeyedSharedWork(), count: count)
      })
  }

  // MARK: 8 callers a run

  Benchmark("Naive actor + [Key: Task]: 8 callers a run") { benchmark in
    let work = RequestDeduplicator<Int, Int>()
    for round in 0..<(benchmark.scaledIterations.count / 8) {
      try await withThrowingTaskGroup(of: Int.self) { group in
        for _ in 0..<8 {
          group.addTask {
            try await work.run(round) {
              await Task.yield()
              return round
            }
          }
        }
        for try await value in group { blackHole(value) }
      }
    }
  }

  Benchmark("KeyedSharedWork.run: 8 callers a run") { benchmark in
    let work = KeyedSharedWork<Int, Int>()
    for round in 0..<(benchmark.scaledIterations.count / 8) {
      try await withThrowingTaskGroup(of: Int.self) { group in
        for _ in 0..<8 {
          group.addTask {
            try await work.run(round) {
              await Task.yield()
              return round
            }
          }
        }
        for try await value in group { blackHole(value) }
      }
    }
  }

  // MARK: Reuse

  Benchmark("KeyedSharedWork.run: reuse hit") { benchmark in
    let work = KeyedSharedWork<Int, Int>(reusingResultsFor: .seconds(3600))
    var sum = try await work.run(0) { 1 }
    for _ in benchmark.scaledIterations { sum &+= try await work.run(0) { 2 } }
    blackHole(sum)
  }

  // MARK: Batching

  Benchmark("Naive actor batcher: submit (batches of 100)") { benchmark in
    await WorkCalls.submit(WorkCalls.naiveBatcher(loading: false), count: benchmark.scaledIterations.count)
  }

  Benchmark("Batcher.submit (batches of 100)") { benchmark in
    try await WorkCalls.submit(WorkCalls.batcher(loading: false), count: benchmark.scaledIterations.count)
  }

  // `async`, as the other rows are: the benchmark then runs in a task of its own, as they do,
  // rather than on the runner's thread.
  Benchmark("Batcher.trySubmit (batches of 100)") { (benchmark: Benchmark) async in
    blackHole(WorkCalls.trySubmit(WorkCalls.batcher(loading: false), count: benchmark.scaledIterations.count))
  }

  Benchmark("Naive actor batcher: load (100 concurrent loads a batch)") { benchmark in
    blackHole(try await WorkCalls.load(WorkCalls.naiveBatcher(loading: true), count: benchmark.scaledIterations.count))
  }

  Benchmark("Batcher.load (100 concurrent loads a batch)") { benchmark in
    blackHole(try await WorkCalls.load(WorkCalls.batcher(loading: true), count: benchmark.scaledIterations.count))
  }

  Benchmark("Naive actor batcher: submit, from the main actor") { benchmark in
    let count = benchmark.scaledIterations.count
    await WorkCalls.onMain {
      await WorkCalls.submit(WorkCalls.naiveBatcher(loading: false), count: count)
    }
  }

  Benchmark("Batcher.submit, from the main actor") { benchmark in
    let count = benchmark.scaledIterations.count
    try await WorkCalls.onMain {
      try await WorkCalls.submit(WorkCalls.batcher(loading: false), count: count)
    }
  }

  Benchmark("Batcher.trySubmit, from the main actor") { benchmark in
    let count = benchmark.scaledIterations.count
    blackHole(
      await WorkCalls.onMain {
        WorkCalls.trySubmit(WorkCalls.batcher(loading: false), count: count)
      })
  }

  Benchmark("Naive actor batcher: load, from the main actor") { benchmark in
    blackHole(
      try await WorkCalls.loadOnMain(WorkCalls.naiveBatcher(loading: true), count: benchmark.scaledIterations.count))
  }

  Benchmark("Batcher.load, from the main actor") { benchmark in
    blackHole(try await WorkCalls.loadOnMain(WorkCalls.batcher(loading: true), count: benchmark.scaledIterations.count))
  }
}
