// KeyedSharedWork beside the snippet apps write for it: an actor with a dictionary of tasks, one
// per key (issue 34, "Proof").
//
// Each iteration makes 1k calls (`scalingFactor: .kilo`); the rows marked `*` are per call.
// - "one caller a run": calls one after another, each starting (and ending) a run of an operation
//   that returns at once: the cost of a run, its task included.
// - "8 callers a run": 125 rounds of 8 concurrent callers on one key, whose operation yields once,
//   so that the callers after the first join its run (how many join depends on the scheduling).
// - "reuse hit": every call is answered from a result reused for an hour: no task at all.

import Benchmark
import Pace

/// The snippet: one shared `Task` per key in an actor's dictionary. Every caller awaits the
/// task's value, so a cancelled caller keeps waiting and the run is never cancelled.
actor RequestDeduplicator<Key: Hashable & Sendable, Value: Sendable> {
  private var tasks: [Key: Task<Value, any Error>] = [:]

  func run(_ key: Key, _ operation: @escaping @Sendable () async throws -> Value) async throws -> Value {
    if let task = tasks[key] { return try await task.value }
    let task = Task { try await operation() }
    tasks[key] = task
    defer { tasks[key] = nil }
    return try await task.value
  }
}

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
    let work = RequestDeduplicator<Int, Int>()
    var sum = 0
    for index in benchmark.scaledIterations { sum &+= try await work.run(index & 7) { index } }
    blackHole(sum)
  }

  Benchmark("KeyedSharedWork.run: one caller a run") { benchmark in
    let work = KeyedSharedWork<Int, Int>()
    var sum = 0
    for index in benchmark.scaledIterations { sum &+= try await work.run(index & 7) { index } }
    blackHole(sum)
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
}
