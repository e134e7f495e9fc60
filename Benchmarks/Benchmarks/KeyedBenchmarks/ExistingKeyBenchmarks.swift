// An existing key's call with 1M keys held (issue 44): KeyedDebouncer.call and
// KeyedRateLimiter.tryAcquire beside the floor, a bare `Dictionary<Int, 16-byte struct>` update
// of the same key with no lock, clock or deadline, beside the same update with the time read, and
// beside the thread-safe snippet (that update behind an `NSLock`), in the same run. Two orders: every one of the
// 1M keys in turn (each call misses the cache), and a hot set of 1,000 of them, round-robin, while
// the other 999,000 stay held (the tables are as large; the keys' slots stay in the cache).
//
// Self-contained (Pace's public API and Foundation only), so that the same file measures an
// older build of Pace, in a worktree, beside this one.

import Benchmark
import Foundation
import Pace

/// The floor's per-key state: 16 bytes, as the keyed primitives' smallest.
struct FloorState {
  var first: Int64
  var second: Int64
}

/// The snippets' per-key state: when the key was last seen, and a count (a token bucket's last
/// refill and its tokens).
struct SnippetState {
  var last: ContinuousClock.Instant
  var count: Int64
}

/// The thread-safe snippet's table: a dictionary that its lock guards. `@unchecked Sendable`:
/// `lock` guards `values` (the setup fills it before the measured calls, on the same thread).
final class LockedSnippetTable: @unchecked Sendable {
  let lock = NSLock()
  /// Guarded by `lock`.
  var values: [Int: SnippetState] = [:]
}

/// The order of the measured calls over the 1M keys held.
enum ExistingKeyOrder: String, CaseIterable {
  /// Each of the 1M keys once.
  case everyKey = "each of 1M keys"
  /// 1M calls round-robin over 1,000 of the 1M keys.
  case hotSet = "1,000 hot of 1M keys"

  func key(_ call: Int) -> Int { self == .everyKey ? call : call % 1_000 }
}

let existingKeyBenchmarks: @Sendable () -> Void = {
  for order in ExistingKeyOrder.allCases {
    Benchmark("Existing key, \(order.rawValue): bare Dictionary update") { benchmark in
      var table: [Int: FloorState] = [:]
      for key in benchmark.scaledIterations { table[key] = FloorState(first: Int64(key), second: 0) }
      benchmark.startMeasurement()
      for call in benchmark.scaledIterations {
        table[order.key(call), default: FloorState(first: 0, second: 0)].second += 1
      }
      benchmark.stopMeasurement()
      blackHole(table.count)
    }

    Benchmark("Existing key, \(order.rawValue): Dictionary update with a clock read") { benchmark in
      // The bare update, and the time it would keep: what reading a clock adds by itself.
      var table: [Int: SnippetState] = [:]
      let start = ContinuousClock.now
      for key in benchmark.scaledIterations { table[key] = SnippetState(last: start, count: 0) }
      benchmark.startMeasurement()
      for call in benchmark.scaledIterations {
        let now = ContinuousClock.now
        table[order.key(call), default: SnippetState(last: now, count: 0)].last = now
      }
      benchmark.stopMeasurement()
      blackHole(table.count)
    }

    Benchmark("Existing key, \(order.rawValue): Dictionary behind NSLock, with a clock read") { benchmark in
      // The snippet a server writes for a key's pacing shared by its request handlers: the time
      // read, a lock taken, the key's state updated with it (a token bucket's last refill).
      let table = LockedSnippetTable()
      let start = ContinuousClock.now
      for key in benchmark.scaledIterations { table.values[key] = SnippetState(last: start, count: 0) }
      benchmark.startMeasurement()
      for call in benchmark.scaledIterations {
        let now = ContinuousClock.now
        let key = order.key(call)
        table.lock.withLock { table.values[key, default: SnippetState(last: now, count: 0)].last = now }
      }
      benchmark.stopMeasurement()
      blackHole(table.values.count)
    }

    Benchmark("Existing key, \(order.rawValue): KeyedDebouncer") { benchmark in
      let keyed = KeyedDebouncer<Int, Int>(for: .seconds(3600), scheduler: .queue(DispatchQueue(label: "keyed"))) {
        _, _ in
      }
      for key in benchmark.scaledIterations { keyed.call(key, key) }
      benchmark.startMeasurement()
      for call in benchmark.scaledIterations { keyed.call(order.key(call), call) }
      benchmark.stopMeasurement()
      keyed.cancelAll()
    }

    Benchmark("Existing key, \(order.rawValue): KeyedRateLimiter") { benchmark in
      // A bucket that neither runs out nor fills again during the run: every call is allowed,
      // and every key stays held.
      let keyed = KeyedRateLimiter<Int>(permits: 1, per: .seconds(3600), burst: 1_000_000)
      for key in benchmark.scaledIterations { blackHole(keyed.tryAcquire(key).isAllowed) }
      benchmark.startMeasurement()
      for call in benchmark.scaledIterations { blackHole(keyed.tryAcquire(order.key(call)).isAllowed) }
      benchmark.stopMeasurement()
    }

    Benchmark("Existing key, \(order.rawValue): KeyedRateLimiter, fixed window") { benchmark in
      // The window policies' path: a window that neither fills nor ends during the run (windows
      // start on the hour in Unix time; a run that crosses one starts every key's count again,
      // and every call is still allowed).
      let keyed = KeyedRateLimiter<Int>(limit: .fixedWindow(permits: 1_000_000, per: .seconds(3600)))
      for key in benchmark.scaledIterations { blackHole(keyed.tryAcquire(key).isAllowed) }
      benchmark.startMeasurement()
      for call in benchmark.scaledIterations { blackHole(keyed.tryAcquire(order.key(call)).isAllowed) }
      benchmark.stopMeasurement()
    }
  }
}
