// KeyedSharedWork and Batcher beside the snippets apps write for them: an actor with a dictionary
// of tasks, one per key, and an actor that collects items and flushes them from a timer task
// (issue 34, "Proof").
//
// Each iteration makes 1k calls (`scalingFactor: .kilo`); the rows marked `*` are per call.
// - "one caller a run": calls one after another, each starting (and ending) a run of an operation
//   that returns at once: the cost of a run, its task included.
// - "8 callers a run": 125 rounds of 8 concurrent callers on one key, whose operation yields once,
//   so that the callers after the first join its run (how many join depends on the scheduling).
// - "reuse hit": every call is answered from a result reused for an hour: no task at all.
// - Batching, 100 items a batch, `maxWait` an hour (never reached): "submit" buffers items one
//   after another (fire-and-forget); "trySubmit" does the same from synchronous code (no
//   suspension point at all; the buffer never fills, so every item is buffered); "load" makes 100
//   concurrent loads a batch and awaits each item's output. The `send` returns at once.
// - "from the main actor": the same calls made by code on the main actor (an app's), where the
//   snippets' actors are another actor to hop to and back from; each load is a task that hops to
//   the main actor and calls from there, on both sides.

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

/// The snippet for batching: an actor that collects items and sends them when `maxCount` wait,
/// or from a timer task `maxWait` after the first; a loader waits on a continuation per item.
actor NaiveBatcher {
  private var items: [Int] = []
  private var loaders: [(Int, CheckedContinuation<Int, any Error>)] = []
  private var timer: Task<Void, Never>?
  let maxCount: Int
  let maxWait: Duration
  let send: @Sendable ([Int]) async throws -> [Int: Int]

  init(maxCount: Int, maxWait: Duration, send: @escaping @Sendable ([Int]) async throws -> [Int: Int]) {
    self.maxCount = maxCount
    self.maxWait = maxWait
    self.send = send
  }

  func submit(_ item: Int) {
    items.append(item)
    arrangeSending()
  }

  func load(_ item: Int) async throws -> Int {
    try await withCheckedThrowingContinuation { continuation in
      items.append(item)
      loaders.append((item, continuation))
      arrangeSending()
    }
  }

  private func arrangeSending() {
    if items.count >= maxCount {
      flush()
    } else if timer == nil {
      let maxWait = self.maxWait
      timer = Task {
        // Cancelled: its batch went at `maxCount`. (Flushing anyway would send the next batch's
        // first items alone, and leave the rest waiting for `maxWait`.)
        do { try await Task.sleep(for: maxWait) } catch { return }
        self.flush()
      }
    }
  }

  func flush() {
    timer?.cancel()
    timer = nil
    let batch = items
    let waiting = loaders
    items = []
    loaders = []
    let send = self.send
    Task {
      let outputs = try? await send(batch)
      for (item, loader) in waiting { loader.resume(returning: outputs?[item] ?? 0) }
    }
  }
}

// MARK: From the main actor

/// `count` calls, one after another, each starting a run, made on the main actor.
@MainActor func runOneCallerARunOnMain(_ work: RequestDeduplicator<Int, Int>, count: Int) async throws {
  var sum = 0
  for index in 0..<count { sum &+= try await work.run(index & 7) { index } }
  blackHole(sum)
}

@MainActor func runOneCallerARunOnMain(_ work: KeyedSharedWork<Int, Int>, count: Int) async throws {
  var sum = 0
  for index in 0..<count { sum &+= try await work.run(index & 7) { index } }
  blackHole(sum)
}

@MainActor func submitOnMain(_ batcher: NaiveBatcher, count: Int) async {
  for index in 0..<count { await batcher.submit(index) }
  await batcher.flush()
}

@MainActor func submitOnMain(_ batcher: Batcher<Int, Int>, count: Int) async throws {
  for index in 0..<count { try await batcher.submit(index) }
  batcher.flush()
}

/// `trySubmit` from synchronous code on the main actor, as a tap's handler calls it: no task.
@MainActor func trySubmitOnMain(_ batcher: Batcher<Int, Int>, count: Int) {
  var buffered = 0
  for index in 0..<count where batcher.trySubmit(index) { buffered += 1 }
  batcher.flush()
  blackHole(buffered)
}

@MainActor func loadOnMain(_ batcher: NaiveBatcher, _ item: Int) async throws -> Int {
  try await batcher.load(item)
}

@MainActor func loadOnMain(_ batcher: Batcher<Int, Int>, _ item: Int) async throws -> Int {
  try await batcher.load(item)
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

  Benchmark("Naive actor + [Key: Task]: one caller a run, from the main actor") { benchmark in
    try await runOneCallerARunOnMain(RequestDeduplicator<Int, Int>(), count: benchmark.scaledIterations.count)
  }

  Benchmark("KeyedSharedWork.run: one caller a run, from the main actor") { benchmark in
    try await runOneCallerARunOnMain(KeyedSharedWork<Int, Int>(), count: benchmark.scaledIterations.count)
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

  let sendNothing: @Sendable ([Int]) async throws -> [Int: Int] = { _ in [:] }
  let echo: @Sendable ([Int]) async throws -> [Int: Int] = { items in
    Dictionary(items.map { ($0, $0) }, uniquingKeysWith: { first, _ in first })
  }

  Benchmark("Naive actor batcher: submit (batches of 100)") { benchmark in
    let batcher = NaiveBatcher(maxCount: 100, maxWait: .seconds(3600), send: sendNothing)
    for index in benchmark.scaledIterations { await batcher.submit(index) }
    await batcher.flush()
  }

  Benchmark("Batcher.submit (batches of 100)") { benchmark in
    let batcher = Batcher<Int, Int>(maximumCount: 100, maximumWait: .seconds(3600), send: sendNothing)
    for index in benchmark.scaledIterations { try await batcher.submit(index) }
    batcher.flush()
  }

  // `async`, as the other rows are: the benchmark then runs in a task of its own, as they do,
  // rather than on the runner's thread.
  Benchmark("Batcher.trySubmit (batches of 100)") { (benchmark: Benchmark) async in
    let batcher = Batcher<Int, Int>(maximumCount: 100, maximumWait: .seconds(3600), send: sendNothing)
    var buffered = 0
    for index in benchmark.scaledIterations where batcher.trySubmit(index) { buffered += 1 }
    batcher.flush()
    blackHole(buffered)
  }

  Benchmark("Naive actor batcher: load (100 concurrent loads a batch)") { benchmark in
    let batcher = NaiveBatcher(maxCount: 100, maxWait: .seconds(3600), send: echo)
    for round in 0..<(benchmark.scaledIterations.count / 100) {
      try await withThrowingTaskGroup(of: Int.self) { group in
        for item in 0..<100 { group.addTask { try await batcher.load(round * 100 + item) } }
        for try await value in group { blackHole(value) }
      }
    }
  }

  Benchmark("Batcher.load (100 concurrent loads a batch)") { benchmark in
    let batcher = Batcher<Int, Int>(maximumCount: 100, maximumWait: .seconds(3600), send: echo)
    for round in 0..<(benchmark.scaledIterations.count / 100) {
      try await withThrowingTaskGroup(of: Int.self) { group in
        for item in 0..<100 { group.addTask { try await batcher.load(round * 100 + item) } }
        for try await value in group { blackHole(value) }
      }
    }
  }

  Benchmark("Naive actor batcher: submit, from the main actor") { benchmark in
    let batcher = NaiveBatcher(maxCount: 100, maxWait: .seconds(3600), send: sendNothing)
    await submitOnMain(batcher, count: benchmark.scaledIterations.count)
  }

  Benchmark("Batcher.submit, from the main actor") { benchmark in
    let batcher = Batcher<Int, Int>(maximumCount: 100, maximumWait: .seconds(3600), send: sendNothing)
    try await submitOnMain(batcher, count: benchmark.scaledIterations.count)
  }

  Benchmark("Batcher.trySubmit, from the main actor") { benchmark in
    let batcher = Batcher<Int, Int>(maximumCount: 100, maximumWait: .seconds(3600), send: sendNothing)
    await trySubmitOnMain(batcher, count: benchmark.scaledIterations.count)
  }

  Benchmark("Naive actor batcher: load, from the main actor") { benchmark in
    let batcher = NaiveBatcher(maxCount: 100, maxWait: .seconds(3600), send: echo)
    for round in 0..<(benchmark.scaledIterations.count / 100) {
      try await withThrowingTaskGroup(of: Int.self) { group in
        for item in 0..<100 { group.addTask { try await loadOnMain(batcher, round * 100 + item) } }
        for try await value in group { blackHole(value) }
      }
    }
  }

  Benchmark("Batcher.load, from the main actor") { benchmark in
    let batcher = Batcher<Int, Int>(maximumCount: 100, maximumWait: .seconds(3600), send: echo)
    for round in 0..<(benchmark.scaledIterations.count / 100) {
      try await withThrowingTaskGroup(of: Int.self) { group in
        for item in 0..<100 { group.addTask { try await loadOnMain(batcher, round * 100 + item) } }
        for try await value in group { blackHole(value) }
      }
    }
  }
}
