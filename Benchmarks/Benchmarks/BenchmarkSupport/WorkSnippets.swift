// The snippets apps write instead of KeyedSharedWork and Batcher, and the calls that measure both
// side by side, shared by WorkBenchmarks (the benchmark runner's rows) and WorkRounds (a plain
// process, as issue 44 measured from outside).

import Pace

/// The snippet: one shared `Task` per key in an actor's dictionary. Every caller awaits the
/// task's value, so a cancelled caller keeps waiting and the run is never cancelled.
public actor RequestDeduplicator<Key: Hashable & Sendable, Value: Sendable> {
  private var tasks: [Key: Task<Value, any Error>] = [:]

  public init() {}

  public func run(_ key: Key, _ operation: @escaping @Sendable () async throws -> Value) async throws -> Value {
    if let task = tasks[key] { return try await task.value }
    let task = Task { try await operation() }
    tasks[key] = task
    defer { tasks[key] = nil }
    return try await task.value
  }
}

/// The snippet for batching: an actor that collects items and sends them when `maxCount` wait,
/// or from a timer task `maxWait` after the first; a loader waits on a continuation per item.
public actor NaiveBatcher {
  private var items: [Int] = []
  private var loaders: [(Int, CheckedContinuation<Int, any Error>)] = []
  private var timer: Task<Void, Never>?
  let maxCount: Int
  let maxWait: Duration
  let send: @Sendable ([Int]) async throws -> [Int: Int]

  public init(maxCount: Int, maxWait: Duration, send: @escaping @Sendable ([Int]) async throws -> [Int: Int]) {
    self.maxCount = maxCount
    self.maxWait = maxWait
    self.send = send
  }

  public func submit(_ item: Int) {
    items.append(item)
    arrangeSending()
  }

  public func load(_ item: Int) async throws -> Int {
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

  public func flush() {
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

/// The calls measured, each `count` calls (a multiple of 100), on both sides. "One caller a run":
/// calls one after another, each starting (and ending) a run of an operation that returns at
/// once. Batching, 100 items a batch, `maxWait` an hour (never reached): "submit" buffers items
/// one after another; "trySubmit" does the same from synchronous code; "load" makes 100
/// concurrent loads a batch and awaits each item's output. The `send` returns at once.
///
/// Each call runs on its caller's executor: in ``onMain(_:)``, the same calls made by code on the
/// main actor (an app's), where the snippets' actors are another actor to hop to and back from.
public enum WorkCalls {
  /// A batch's `send` that answers nothing: for submitted items.
  public static let sendNothing: @Sendable ([Int]) async throws -> [Int: Int] = { _ in [:] }
  /// A batch's `send` that answers each item with itself: for loaded items.
  public static let echo: @Sendable ([Int]) async throws -> [Int: Int] = { items in
    Dictionary(items.map { ($0, $0) }, uniquingKeysWith: { first, _ in first })
  }

  /// The snippet's batcher, 100 items a batch.
  public static func naiveBatcher(loading: Bool) -> NaiveBatcher {
    NaiveBatcher(maxCount: 100, maxWait: .seconds(3600), send: loading ? echo : sendNothing)
  }

  /// Pace's batcher, 100 items a batch.
  public static func batcher(loading: Bool) -> Batcher<Int, Int> {
    Batcher<Int, Int>(maximumCount: 100, maximumWait: .seconds(3600), send: loading ? echo : sendNothing)
  }

  // MARK: The calls, made on the caller's executor

  nonisolated(nonsending) public static func runOneCallerARun(
    _ work: RequestDeduplicator<Int, Int>, count: Int
  ) async throws -> Int {
    var sum = 0
    for index in 0..<count { sum &+= try await work.run(index & 7) { index } }
    return sum
  }

  nonisolated(nonsending) public static func runOneCallerARun(
    _ work: KeyedSharedWork<Int, Int>, count: Int
  ) async throws -> Int {
    var sum = 0
    for index in 0..<count { sum &+= try await work.run(index & 7) { index } }
    return sum
  }

  nonisolated(nonsending) public static func submit(_ batcher: NaiveBatcher, count: Int) async {
    for index in 0..<count { await batcher.submit(index) }
    await batcher.flush()
  }

  nonisolated(nonsending) public static func submit(_ batcher: Batcher<Int, Int>, count: Int) async throws {
    for index in 0..<count { try await batcher.submit(index) }
    batcher.flush()
  }

  /// Returns how many were buffered: all of them, as the buffer never fills.
  public static func trySubmit(_ batcher: Batcher<Int, Int>, count: Int) -> Int {
    var buffered = 0
    for index in 0..<count where batcher.trySubmit(index) { buffered += 1 }
    batcher.flush()
    return buffered
  }

  /// Rounds of 100 concurrent loads, each in a task of a group; the sum of the outputs.
  public static func load(_ batcher: NaiveBatcher, count: Int) async throws -> Int {
    try await loadInRounds(count) { try await batcher.load($0) }
  }

  /// Rounds of 100 concurrent loads, each in a task of a group; the sum of the outputs.
  public static func load(_ batcher: Batcher<Int, Int>, count: Int) async throws -> Int {
    try await loadInRounds(count) { try await batcher.load($0) }
  }

  /// Rounds of 100 concurrent loads, each in a task of a group; the sum of the outputs. The
  /// groups are made and awaited on the caller's executor (the tasks themselves on the global
  /// one).
  nonisolated(nonsending) static func loadInRounds(
    _ count: Int, _ load: @escaping @Sendable (Int) async throws -> Int
  ) async throws -> Int {
    var sum = 0
    for round in 0..<(count / 100) {
      sum &+= try await withThrowingTaskGroup(of: Int.self) { group in
        for item in 0..<100 { group.addTask { try await load(round * 100 + item) } }
        // `next()` keeps the caller's isolation; `reduce` would send the group off the main actor.
        var outputs = 0
        while let output = try await group.next() { outputs &+= output }
        return outputs
      }
    }
    return sum
  }

  // MARK: From the main actor

  /// Runs `body` on the main actor, as an app's code calls.
  @MainActor public static func onMain<Result: Sendable>(
    _ body: @MainActor () async throws -> Result
  ) async rethrows -> Result {
    try await body()
  }

  /// ``load(_:count:)``, each load a task that hops to the main actor and calls from there.
  public static func loadOnMain(_ batcher: NaiveBatcher, count: Int) async throws -> Int {
    try await loadInRounds(count) { item in try await onMain { try await batcher.load(item) } }
  }

  /// ``load(_:count:)``, each load a task that hops to the main actor and calls from there.
  public static func loadOnMain(_ batcher: Batcher<Int, Int>, count: Int) async throws -> Int {
    try await loadInRounds(count) { item in try await onMain { try await batcher.load(item) } }
  }

  /// ``loadOnMain(_:count:)`` where the main actor's code reads and writes its own state before
  /// and after each load, as an app's view model does (`isLoading`, then the result).
  public static func loadOnMainAroundState(_ batcher: NaiveBatcher, count: Int) async throws -> Int {
    let model = MainActorModel()
    return try await loadInRounds(count) { item in try await model.show(item, from: batcher) }
  }

  /// ``loadOnMain(_:count:)`` where the main actor's code reads and writes its own state before
  /// and after each load, as an app's view model does (`isLoading`, then the result).
  public static func loadOnMainAroundState(_ batcher: Batcher<Int, Int>, count: Int) async throws -> Int {
    let model = MainActorModel()
    return try await loadInRounds(count) { item in try await model.show(item, from: batcher) }
  }

  /// ``load(_:count:)`` from tasks the main actor starts, as an app's `Task {}` in a view model
  /// or SwiftUI's `.task` do: rounds of 100 `Task`s made on the main actor, each running there
  /// from its start and loading one item; the main actor then awaits their values.
  @MainActor public static func loadFromMainActorTasks(_ batcher: NaiveBatcher, count: Int) async throws -> Int {
    try await loadInMainActorTasks(count) { try await batcher.load($0) }
  }

  /// ``load(_:count:)`` from tasks the main actor starts, as an app's `Task {}` in a view model
  /// or SwiftUI's `.task` do: rounds of 100 `Task`s made on the main actor, each running there
  /// from its start and loading one item; the main actor then awaits their values.
  @MainActor public static func loadFromMainActorTasks(_ batcher: Batcher<Int, Int>, count: Int) async throws -> Int {
    try await loadInMainActorTasks(count) { try await batcher.load($0) }
  }

  /// ``loadFromMainActorTasks(_:count:)`` where each task counts its load in flight and shows its
  /// output in a main-actor model, as a view model's task does.
  @MainActor public static func loadFromMainActorTasksAroundState(
    _ batcher: NaiveBatcher, count: Int
  ) async throws -> Int {
    let model = MainActorModel()
    return try await loadInMainActorTasks(count) { try await model.show($0, from: batcher) }
  }

  /// ``loadFromMainActorTasks(_:count:)`` where each task counts its load in flight and shows its
  /// output in a main-actor model, as a view model's task does.
  @MainActor public static func loadFromMainActorTasksAroundState(
    _ batcher: Batcher<Int, Int>, count: Int
  ) async throws -> Int {
    let model = MainActorModel()
    return try await loadInMainActorTasks(count) { try await model.show($0, from: batcher) }
  }

  /// Rounds of 100 tasks started on the main actor, each making one `load`; the sum of the outputs.
  @MainActor static func loadInMainActorTasks(
    _ count: Int, _ load: @escaping @MainActor (Int) async throws -> Int
  ) async throws -> Int {
    var sum = 0
    var tasks: [Task<Int, any Error>] = []
    tasks.reserveCapacity(100)
    for round in 0..<(count / 100) {
      for item in 0..<100 { tasks.append(Task { try await load(round * 100 + item) }) }
      for task in tasks { sum &+= try await task.value }
      tasks.removeAll(keepingCapacity: true)
    }
    return sum
  }

  /// ``load(_:count:)`` from a task group that the main actor makes and awaits, as main-actor
  /// code that loads 100 items at once writes it: the group's tasks are not isolated to the main
  /// actor (their closures do not inherit it), so each load runs on the global executor, and the
  /// main actor adds the outputs up.
  @MainActor public static func loadFromMainActorGroup(_ batcher: NaiveBatcher, count: Int) async throws -> Int {
    try await loadInRounds(count) { try await batcher.load($0) }
  }

  /// ``load(_:count:)`` from a task group that the main actor makes and awaits, as main-actor
  /// code that loads 100 items at once writes it: the group's tasks are not isolated to the main
  /// actor (their closures do not inherit it), so each load runs on the global executor, and the
  /// main actor adds the outputs up.
  @MainActor public static func loadFromMainActorGroup(_ batcher: Batcher<Int, Int>, count: Int) async throws -> Int {
    try await loadInRounds(count) { try await batcher.load($0) }
  }

  /// ``loadOnMain(_:count:)`` with `isolation: nil`: each load's bookkeeping off the main actor.
  public static func loadOnMainWithNilIsolation(_ batcher: Batcher<Int, Int>, count: Int) async throws -> Int {
    try await loadInRounds(count) { item in try await onMain { try await batcher.load(item, isolation: nil) } }
  }
}

/// The main actor's state around a load: what an app's view model touches before it awaits a
/// result and after.
@MainActor final class MainActorModel {
  var loading = 0
  var shown = 0

  /// Counts a load in flight, loads `item` from the snippet, and shows its output.
  func show(_ item: Int, from batcher: NaiveBatcher) async throws -> Int {
    loading += 1
    let output = try await batcher.load(item)
    loading -= 1
    shown &+= output
    return output
  }

  /// Counts a load in flight, loads `item` from the batcher (its bookkeeping on the main actor,
  /// the default `isolation`), and shows its output.
  func show(_ item: Int, from batcher: Batcher<Int, Int>) async throws -> Int {
    loading += 1
    let output = try await batcher.load(item)
    loading -= 1
    shown &+= output
    return output
  }
}
