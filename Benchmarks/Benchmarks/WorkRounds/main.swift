// KeyedSharedWork and Batcher beside their snippets in a plain release process, as issue 44
// measured them from outside: rounds of `calls` calls, each contender in turn within a round, the
// median and the range of the rounds' ns per call (wall clock). The benchmark runner's main actor
// makes hops that cost a fraction of a plain process's (see README.md); here the main actor is
// the process's own, as in an app.
//
//   cd Benchmarks && swift run -c release WorkRounds [rounds] [calls] [filter]
//
// 7 rounds of 100,000 calls by default; `filter` keeps the pairs whose Pace row's name contains it.
// `WORK_ROUNDS_SIDE=snippet` (or `pace`) runs that side of each pair alone, for a profiler.
//
// The calls and the snippets are `WorkCalls`' (BenchmarkSupport/WorkSnippets.swift), the ones the
// WorkBenchmarks rows make.

import BenchmarkSupport
import Foundation
import Pace

let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
let rounds = max(1, arguments.first ?? 7)
let calls = max(100, (arguments.dropFirst().first ?? 100_000) / 100 * 100)
let filter = CommandLine.arguments.dropFirst(3).first
/// `WORK_ROUNDS_SIDE=snippet` or `pace` runs that side alone, for a profiler (no ratio then).
let only: Int? =
  switch ProcessInfo.processInfo.environment["WORK_ROUNDS_SIDE"] {
  case nil: nil
  case "snippet": 0
  case "pace": 1
  case let other?:
    {
      FileHandle.standardError.write(Data("WORK_ROUNDS_SIDE is snippet or pace, not \(other)\n".utf8))
      exit(2)
    }()
  }

/// A row: its name, and one measurement of `calls` calls (the result keeps the work alive).
struct Row {
  let name: String
  let measure: () async throws -> Int
}

/// Each pair is a snippet and Pace's call that replaces it, measured in turn in every round.
let allPairs: [(snippet: Row, pace: Row)] = [
  (
    Row(name: "actor + [Key: Task] run, one caller a run, from a task") {
      try await Task.detached { try await WorkCalls.runOneCallerARun(RequestDeduplicator(), count: calls) }.value
    },
    Row(name: "KeyedSharedWork.run, one caller a run, from a task") {
      try await Task.detached { try await WorkCalls.runOneCallerARun(KeyedSharedWork(), count: calls) }.value
    }
  ),
  (
    Row(name: "actor + [Key: Task] run, one caller a run, from the main actor") {
      try await WorkCalls.onMain { try await WorkCalls.runOneCallerARun(RequestDeduplicator(), count: calls) }
    },
    Row(name: "KeyedSharedWork.run, one caller a run, from the main actor") {
      try await WorkCalls.onMain { try await WorkCalls.runOneCallerARun(KeyedSharedWork(), count: calls) }
    }
  ),
  (
    Row(name: "actor append, from a task") {
      await Task.detached { await WorkCalls.submit(WorkCalls.naiveBatcher(loading: false), count: calls) }.value
      return 0
    },
    Row(name: "Batcher.submit, from a task") {
      try await Task.detached { try await WorkCalls.submit(WorkCalls.batcher(loading: false), count: calls) }.value
      return 0
    }
  ),
  (
    Row(name: "actor append, from a task") {
      await Task.detached { await WorkCalls.submit(WorkCalls.naiveBatcher(loading: false), count: calls) }.value
      return 0
    },
    Row(name: "Batcher.trySubmit, from a task") {
      await Task.detached { WorkCalls.trySubmit(WorkCalls.batcher(loading: false), count: calls) }.value
    }
  ),
  (
    Row(name: "actor append, from the main actor") {
      await WorkCalls.onMain { await WorkCalls.submit(WorkCalls.naiveBatcher(loading: false), count: calls) }
      return 0
    },
    Row(name: "Batcher.submit, from the main actor") {
      try await WorkCalls.onMain { try await WorkCalls.submit(WorkCalls.batcher(loading: false), count: calls) }
      return 0
    }
  ),
  (
    Row(name: "actor append, from the main actor") {
      await WorkCalls.onMain { await WorkCalls.submit(WorkCalls.naiveBatcher(loading: false), count: calls) }
      return 0
    },
    Row(name: "Batcher.trySubmit, from the main actor") {
      await WorkCalls.onMain { WorkCalls.trySubmit(WorkCalls.batcher(loading: false), count: calls) }
    }
  ),
  (
    Row(name: "actor + continuation load, 100 concurrent, from tasks") {
      try await Task.detached { try await WorkCalls.load(WorkCalls.naiveBatcher(loading: true), count: calls) }.value
    },
    Row(name: "Batcher.load, 100 concurrent, from tasks") {
      try await Task.detached { try await WorkCalls.load(WorkCalls.batcher(loading: true), count: calls) }.value
    }
  ),
  (
    Row(name: "actor + continuation load, 100 concurrent, from the main actor") {
      try await WorkCalls.loadOnMain(WorkCalls.naiveBatcher(loading: true), count: calls)
    },
    Row(name: "Batcher.load, 100 concurrent, from the main actor") {
      try await WorkCalls.loadOnMain(WorkCalls.batcher(loading: true), count: calls)
    }
  ),
  (
    Row(name: "actor + continuation load, 100 concurrent, from the main actor, beside isolation: nil") {
      try await WorkCalls.loadOnMain(WorkCalls.naiveBatcher(loading: true), count: calls)
    },
    Row(name: "Batcher.load(_:isolation: nil), 100 concurrent, from the main actor") {
      try await WorkCalls.loadOnMainWithNilIsolation(WorkCalls.batcher(loading: true), count: calls)
    }
  ),
  (
    Row(name: "actor + continuation load, 100 concurrent, from a task group on the main actor") {
      try await WorkCalls.loadFromMainActorGroup(WorkCalls.naiveBatcher(loading: true), count: calls)
    },
    Row(name: "Batcher.load, 100 concurrent, from a task group on the main actor") {
      try await WorkCalls.loadFromMainActorGroup(WorkCalls.batcher(loading: true), count: calls)
    }
  ),
  (
    Row(name: "actor + continuation load, 100 concurrent, from tasks on the main actor") {
      try await WorkCalls.loadFromMainActorTasks(WorkCalls.naiveBatcher(loading: true), count: calls)
    },
    Row(name: "Batcher.load, 100 concurrent, from tasks on the main actor") {
      try await WorkCalls.loadFromMainActorTasks(WorkCalls.batcher(loading: true), count: calls)
    }
  ),
  (
    Row(name: "actor + continuation load, 100 concurrent, from tasks on the main actor, around its state") {
      try await WorkCalls.loadFromMainActorTasksAroundState(WorkCalls.naiveBatcher(loading: true), count: calls)
    },
    Row(name: "Batcher.load, 100 concurrent, from tasks on the main actor, around its state") {
      try await WorkCalls.loadFromMainActorTasksAroundState(WorkCalls.batcher(loading: true), count: calls)
    }
  ),
  (
    Row(name: "actor + continuation load, 100 concurrent, from the main actor's state") {
      try await WorkCalls.loadOnMainAroundState(WorkCalls.naiveBatcher(loading: true), count: calls)
    },
    Row(name: "Batcher.load, 100 concurrent, from the main actor's state") {
      try await WorkCalls.loadOnMainAroundState(WorkCalls.batcher(loading: true), count: calls)
    }
  ),
]

let pairs = allPairs.filter { filter == nil || $0.pace.name.contains(filter!) }

/// ns per call of each round, by row index (`2 * pair + side`).
var samples = [[Double]](repeating: [], count: pairs.count * 2)
let clock = ContinuousClock()
var kept = 0
for _ in 0..<rounds {
  for (index, pair) in pairs.enumerated() {
    for (side, row) in [pair.snippet, pair.pace].enumerated() where only == nil || only == side {
      var result = 0
      let elapsed = try await clock.measure { result = try await row.measure() }
      kept &+= result
      let (seconds, attoseconds) = elapsed.components
      let nanoseconds = Double(seconds) * 1e9 + Double(attoseconds) / 1e9
      samples[2 * index + side].append(nanoseconds / Double(calls))
    }
  }
}

func median(_ values: [Double]) -> Double {
  let sorted = values.sorted()
  return sorted.count % 2 == 1
    ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

func format(_ value: Double) -> String {
  value >= 1000 ? String(Int(value.rounded())) : String(Double(Int((value * 10).rounded())) / 10)
}

let ratios = only == nil ? "; Pace / snippet by medians" : ""
print("\(rounds) rounds of \(calls) calls; ns per call, median (range)\(ratios)")
for (index, pair) in pairs.enumerated() {
  if let only {
    let side = samples[2 * index + only]
    let name = only == 1 ? pair.pace.name : pair.snippet.name
    print("\(name): \(format(median(side))) (\(format(side.min()!))-\(format(side.max()!)))")
    continue
  }
  let snippet = samples[2 * index]
  let pace = samples[2 * index + 1]
  let ratio = median(pace) / median(snippet)
  print(
    """
    \(pair.pace.name): \(format(median(pace))) (\(format(pace.min()!))-\(format(pace.max()!))) \
    beside \(pair.snippet.name): \(format(median(snippet))) (\(format(snippet.min()!))-\(format(snippet.max()!))): \
    \(Double(Int((ratio * 100).rounded())) / 100)x
    """)
}
if kept == 42 { print("") }  // keeps the results alive
