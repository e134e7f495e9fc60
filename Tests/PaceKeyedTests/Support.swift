import PaceTestSupport

@testable import Pace

/// Invocations with their scheduler time in milliseconds, per key.
final class KeyedRecorder<Key: Hashable & Sendable, Value: Sendable>: Sendable {
  private let entries = LockedState<[Key: [(Int64, Value)]]>([:])
  private let clock: any PaceScheduler

  init(clock: any PaceScheduler) {
    self.clock = clock
  }

  func record(_ key: Key, _ value: Value) {
    let now = clock.now.nanoseconds / 1_000_000
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
