import PaceTestSupport
import Testing

@testable import Pace

/// Invocations with their scheduler time in `unit` nanoseconds (milliseconds by default), per key.
final class KeyedRecorder<Key: Hashable & Sendable, Value: Sendable>: Sendable {
  private let entries = LockedState<[Key: [(Int64, Value)]]>([:])
  private let clock: any PaceScheduler
  private let unit: Int64

  init(clock: any PaceScheduler, unit: Int64 = 1_000_000) {
    self.clock = clock
    self.unit = unit
  }

  func record(_ key: Key, _ value: Value) {
    let now = clock.now.nanoseconds / unit
    entries.withLock { $0[key, default: []].append((now, value)) }
  }

  func invocations(of key: Key) -> [(Int64, Value)] {
    entries.withLock { $0[key] ?? [] }
  }

  var all: [Key: [(Int64, Value)]] { entries.withLock { $0 } }
}

/// Renders a key's invocations as a marble line: one character per step, the value's letter at
/// the step it was invoked, `-` elsewhere.
func marbles(_ invocations: [(Int64, String)], stepMilliseconds: Int64, length: Int) -> String {
  var line = Array(repeating: Character("-"), count: length)
  for (time, value) in invocations {
    let step = Int(time / stepMilliseconds)
    if step < length { line[step] = value.last ?? "?" }
  }
  return String(line)
}

/// `count` distinct `Int` keys that all fall in one shard of a keyed primitive, so that they
/// share its heap and its one scheduler timer. Hashing is seeded per process, so they are found
/// at run time: about 64 × `count` keys are tried.
func keysSharingAShard(_ count: Int) -> [Int] {
  let shard = { (key: Int) in KeyedPacer<Int, DebounceStateMachine<Int>>.shardIndex(hash: key.hashValue) }
  let first = shard(0)
  return Array((0...).lazy.filter { shard($0) == first }.prefix(count))
}

/// Starts `acquire` in a task, and returns the task once the limiter has taken the request in:
/// granted at once (the task has returned), or waiting (`waitingCount` has grown). The task is
/// waited for rather than assumed to have started (a plain `Task`, not `Task.immediate`, which
/// needs Swift 6.2 and macOS 26), so requests join their queues in the order they are made, at
/// the instant the caller is at.
func startRequest(
  waitingCount: () -> Int, _ acquire: @escaping @Sendable () async throws -> Void
) async -> Task<Void, any Error> {
  let waitingBefore = waitingCount()
  let returned = LockedState(false)
  let task = Task {
    defer { returned.withLock { $0 = true } }
    try await acquire()
  }
  await waitUntil("the request returned or queued") { returned.withLock({ $0 }) || waitingCount() != waitingBefore }
  return task
}
