// Keyed pacing at server scale (issue 11): KeyedDebouncer and KeyedRateLimiter beside the naive
// pattern, a dictionary of Debouncers (RateLimiters) behind one lock, in the same run.
//
// Every benchmark makes 1M calls per iteration (`scalingFactor: .mega`), so the rows marked `*`
// read per call. "1M keys" calls 1M distinct keys, each once, on a fresh instance: the cost of
// a call that creates a key's state and arms its deadline. "1M active keys again" calls them
// once more, measured after the population: a call on one of a million keys that have state. "hot set, N threads" has N threads
// call 1,000 keys round-robin: wall clock per call shows how the locks scale.
// Resident bytes per key and memory after quiet come from the KeyedMemory executable beside
// this one (see its header), which reads /proc/self/statm.

import Benchmark
import BenchmarkSupport
import Dispatch
import Foundation
import Pace

/// Long enough that no trailing edge fires during an iteration.
let quietInterval = Duration.seconds(3600)
let queue = DispatchQueue(label: "pace.benchmarks.keyed")
let hotKeys = 1_000

/// The naive pattern: a dictionary of debouncers behind one lock, never evicted.
final class DictionaryOfDebouncers: Sendable {
  let debouncers = Locked<[Int: Debouncer<Int>]>([:])

  func call(_ key: Int, _ value: Int) {
    let debouncer = debouncers.withLock { debouncers in
      if let debouncer = debouncers[key] { return debouncer }
      let debouncer = Debouncer<Int>(for: quietInterval, scheduler: .queue(queue)) { _ in }
      debouncers[key] = debouncer
      return debouncer
    }
    debouncer.call(value)
  }

  func cancelAll() {
    for debouncer in debouncers.withLock({ Array($0.values) }) { debouncer.cancel() }
  }
}

/// The naive pattern for rate limits: a dictionary of rate limiters behind one lock.
final class DictionaryOfRateLimiters: Sendable {
  let limiters = Locked<[Int: RateLimiter]>([:])

  func tryAcquire(_ key: Int) -> Bool {
    let limiter = limiters.withLock { limiters in
      if let limiter = limiters[key] { return limiter }
      let limiter = RateLimiter(permits: 100, per: .seconds(60), burst: 20)
      limiters[key] = limiter
      return limiter
    }
    return limiter.tryAcquire().isAllowed
  }
}

/// Runs `body(thread, calls)` on `threads` threads at once, `total` calls between them.
func onThreads(_ threads: Int, total: Int, _ body: @escaping @Sendable (Int, Int) -> Void) {
  let group = DispatchGroup()
  for thread in 0..<threads {
    group.enter()
    Thread.detachNewThread {
      body(thread, total / threads)
      group.leave()
    }
  }
  group.wait()
}

let benchmarks: @Sendable () -> Void = {
  Benchmark.defaultConfiguration = .init(
    metrics: [.wallClock, .cpuTotal, .mallocCountTotal, .peakMemoryResident],
    warmupIterations: 1,
    scalingFactor: .mega,
    maxDuration: .seconds(5),
    maxIterations: 5
  )

  existingKeyBenchmarks()

  // MARK: 1M distinct keys, one thread

  Benchmark("Debounce, 1M keys: dictionary of Debouncers + lock") { benchmark in
    let naive = DictionaryOfDebouncers()
    benchmark.startMeasurement()
    for key in benchmark.scaledIterations { naive.call(key, key) }
    benchmark.stopMeasurement()
    naive.cancelAll()
  }

  Benchmark("Debounce, 1M keys: KeyedDebouncer") { benchmark in
    let keyed = KeyedDebouncer<Int, Int>(for: quietInterval, scheduler: .queue(queue)) { _, _ in }
    benchmark.startMeasurement()
    for key in benchmark.scaledIterations { keyed.call(key, key) }
    benchmark.stopMeasurement()
    keyed.cancelAll()
  }

  Benchmark("Rate limit, 1M keys: dictionary of RateLimiters + lock") { benchmark in
    let naive = DictionaryOfRateLimiters()
    for key in benchmark.scaledIterations { blackHole(naive.tryAcquire(key)) }
  }

  Benchmark("Rate limit, 1M keys: KeyedRateLimiter") { benchmark in
    let keyed = KeyedRateLimiter<Int>(permits: 100, per: .seconds(60), burst: 20)
    for key in benchmark.scaledIterations { blackHole(keyed.tryAcquire(key).isAllowed) }
  }

  // MARK: 1M active keys, each called again, one thread

  // The population is made before the measurement starts: these read what a call costs on one
  // of a million keys that already have state, the steady state of a server.
  Benchmark("Debounce, 1M active keys again: dictionary of Debouncers + lock") { benchmark in
    let naive = DictionaryOfDebouncers()
    for key in benchmark.scaledIterations { naive.call(key, key) }
    benchmark.startMeasurement()
    for key in benchmark.scaledIterations { naive.call(key, key) }
    benchmark.stopMeasurement()
    naive.cancelAll()
  }

  Benchmark("Debounce, 1M active keys again: KeyedDebouncer") { benchmark in
    let keyed = KeyedDebouncer<Int, Int>(for: quietInterval, scheduler: .queue(queue)) { _, _ in }
    for key in benchmark.scaledIterations { keyed.call(key, key) }
    benchmark.startMeasurement()
    for key in benchmark.scaledIterations { keyed.call(key, key) }
    benchmark.stopMeasurement()
    keyed.cancelAll()
  }

  Benchmark("Rate limit, 1M active keys again: dictionary of RateLimiters + lock") { benchmark in
    let naive = DictionaryOfRateLimiters()
    for key in benchmark.scaledIterations { blackHole(naive.tryAcquire(key)) }
    benchmark.startMeasurement()
    for key in benchmark.scaledIterations { blackHole(naive.tryAcquire(key)) }
    benchmark.stopMeasurement()
  }

  Benchmark("Rate limit, 1M active keys again: KeyedRateLimiter") { benchmark in
    let keyed = KeyedRateLimiter<Int>(permits: 100, per: .seconds(60), burst: 20)
    for key in benchmark.scaledIterations { blackHole(keyed.tryAcquire(key).isAllowed) }
    benchmark.startMeasurement()
    for key in benchmark.scaledIterations { blackHole(keyed.tryAcquire(key).isAllowed) }
    benchmark.stopMeasurement()
  }

  // MARK: A hot set of 1,000 keys from 1, 2, 4 and 8 threads

  for threads in [1, 2, 4, 8] {
    Benchmark("Debounce, hot set, \(threads) threads: dictionary of Debouncers + lock") { benchmark in
      let naive = DictionaryOfDebouncers()
      for key in 0..<hotKeys { naive.call(key, key) }
      benchmark.startMeasurement()
      onThreads(threads, total: benchmark.scaledIterations.count) { thread, calls in
        for call in 0..<calls { naive.call((thread &* 7919 &+ call) % hotKeys, call) }
      }
      benchmark.stopMeasurement()
      naive.cancelAll()
    }

    Benchmark("Debounce, hot set, \(threads) threads: KeyedDebouncer") { benchmark in
      let keyed = KeyedDebouncer<Int, Int>(for: quietInterval, scheduler: .queue(queue)) { _, _ in }
      for key in 0..<hotKeys { keyed.call(key, key) }
      benchmark.startMeasurement()
      onThreads(threads, total: benchmark.scaledIterations.count) { thread, calls in
        for call in 0..<calls { keyed.call((thread &* 7919 &+ call) % hotKeys, call) }
      }
      benchmark.stopMeasurement()
      keyed.cancelAll()
    }

    Benchmark("Rate limit, hot set, \(threads) threads: dictionary of RateLimiters + lock") { benchmark in
      let naive = DictionaryOfRateLimiters()
      benchmark.startMeasurement()
      onThreads(threads, total: benchmark.scaledIterations.count) { thread, calls in
        for call in 0..<calls { blackHole(naive.tryAcquire((thread &* 7919 &+ call) % hotKeys)) }
      }
    }

    Benchmark("Rate limit, hot set, \(threads) threads: KeyedRateLimiter") { benchmark in
      let keyed = KeyedRateLimiter<Int>(permits: 100, per: .seconds(60), burst: 20)
      benchmark.startMeasurement()
      onThreads(threads, total: benchmark.scaledIterations.count) { thread, calls in
        for call in 0..<calls { blackHole(keyed.tryAcquire((thread &* 7919 &+ call) % hotKeys).isAllowed) }
      }
    }
  }
}
