@testable import Pace

/// A milliseconds instant, so expectations read like the timelines in the docs.
func ms(_ value: Int64) -> PaceInstant {
  PaceInstant(nanoseconds: value * 1_000_000)
}

/// A small seeded generator (SplitMix64), so every random timeline can be replayed by its seed.
struct SeededGenerator: RandomNumberGenerator {
  private var state: UInt64

  init(seed: UInt64) {
    state = seed
  }

  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}

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
