import Foundation
import Pace

// Helpers shared by Pace's test targets, in one place rather than copied per target. A regular
// target that only test targets depend on: no product lists it, so it never ships. It imports
// Pace without `@testable`, so it builds in release too; white-box hooks stay in the targets.

/// A milliseconds instant, so expectations read like the timelines in the docs.
public func ms(_ value: Int64) -> PaceInstant {
  PaceInstant(nanoseconds: value * 1_000_000)
}

/// A value behind an `NSLock`, for the helpers below.
public final class LockedBox<Value>: @unchecked Sendable {
  // @unchecked Sendable: `value` is only read or written inside `withLock`, under `lock`.
  private let lock = NSLock()
  private var value: Value

  public init(_ value: Value) {
    self.value = value
  }

  public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
    lock.lock()
    defer { lock.unlock() }
    return try body(&value)
  }
}

/// Records values from any thread, with the scheduler time of each.
public final class Recorder<Value: Sendable>: Sendable {
  private let entries = LockedBox<[(PaceInstant, Value)]>([])
  private let clock: (any PaceScheduler)?

  /// A recorder that stamps each value with `clock`'s time (`.zero` without a clock).
  public init(clock: (any PaceScheduler)? = nil) {
    self.clock = clock
  }

  public func record(_ value: Value) {
    let now = clock?.now ?? .zero
    entries.withLock { $0.append((now, value)) }
  }

  public var values: [Value] { entries.withLock { $0.map(\.1) } }
  public var times: [PaceInstant] { entries.withLock { $0.map(\.0) } }
  public var count: Int { entries.withLock { $0.count } }
  /// The values with their times, in order.
  public var entriesWithTimes: [(time: PaceInstant, value: Value)] { entries.withLock { $0.map { ($0.0, $0.1) } } }
}

extension Recorder where Value == Void {
  public func record() { record(()) }
}

/// A thread-safe counter.
public final class Counter: Sendable {
  private let value = LockedBox(0)

  public init() {}

  public func increment() { value.withLock { $0 += 1 } }
  public var count: Int { value.withLock { $0 } }
}

/// SplitMix64: a small seeded generator, so random timelines are reproducible from their seed.
public struct SeededGenerator: RandomNumberGenerator {
  private var state: UInt64

  public init(seed: UInt64) {
    state = seed
  }

  public mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }

  /// A number in `0..<bound` (`bound` more than 0), by remainder: the fuzzers' cheap pick, whose
  /// slight bias does not matter to them.
  public mutating func next(upTo bound: Int) -> Int { Int(next() % UInt64(bound)) }
}
