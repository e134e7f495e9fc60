// The cost of one call to Debouncer and Throttler in a long burst, beside the naive
// `DispatchWorkItem` pattern and the floors they are held to (issue 2, "Speed").
//
// Every benchmark makes 1M calls per iteration (`scalingFactor: .mega`; the naive pattern, 1k),
// and the figures printed with a `*` are divided by it: ns per call and mallocs per call.

import Benchmark
import BenchmarkSupport
import Dispatch
import Pace

/// Long enough that a burst never reaches its trailing edge: the timer is armed once per burst.
let quietInterval = Duration.seconds(3600)
/// A debounce delay of the kind an app uses; the naive pattern needs one this short, since each
/// of its calls leaves a cancelled timer behind until the delay has passed.
let appInterval = Duration.milliseconds(10)

/// The queue that owns every timer and invocation in this file.
let queue = DispatchQueue(label: "pace.benchmarks.core")

let benchmarks: @Sendable () -> Void = {
  Benchmark.defaultConfiguration = .init(
    metrics: [.wallClock, .cpuTotal, .mallocCountTotal],
    warmupIterations: 2,
    // 1M calls per iteration; the figures marked `*` are divided by it: per call.
    scalingFactor: .mega,
    maxDuration: .seconds(3),
    maxIterations: 40
  )

  // MARK: Floors

  Benchmark("Floor: Mutex store + ContinuousClock.now") { benchmark in
    let floor = ClockedStore(clock: { ContinuousClock.now })
    for value in benchmark.scaledIterations {
      floor.store(value)
    }
    blackHole(floor.last)
  }

  Benchmark("Floor: Mutex store + DispatchTime.now") { benchmark in
    let floor = ClockedStore(clock: { DispatchTime.now() })
    for value in benchmark.scaledIterations {
      floor.store(value)
    }
    blackHole(floor.last)
  }

  Benchmark("Bare lock: Mutex store") { benchmark in
    let store = LockedStore()
    for value in benchmark.scaledIterations {
      store.store(value)
    }
    blackHole(store.last)
  }

  // MARK: Pace

  Benchmark("Debouncer.call (trailing, .latest, 1 h)") { benchmark in
    let debouncer = Debouncer<Int>(for: quietInterval, scheduler: .queue(queue)) { blackHole($0) }
    for value in benchmark.scaledIterations {
      debouncer.call(value)
    }
    debouncer.cancel()
  }

  Benchmark("Debouncer.call (trailing, .latest, 10 ms)") { benchmark in
    // The timer fires every 10 ms during the burst and re-arms for the burst's new end.
    let debouncer = Debouncer<Int>(for: appInterval, scheduler: .queue(queue)) { blackHole($0) }
    for value in benchmark.scaledIterations {
      debouncer.call(value)
    }
    debouncer.cancel()
  }

  Benchmark("Throttler.call (both edges, .latest, 1 h)") { benchmark in
    let throttler = Throttler<Int>(for: quietInterval, scheduler: .queue(queue)) { blackHole($0) }
    for value in benchmark.scaledIterations {
      throttler.call(value)
    }
    throttler.cancel()
  }

  // MARK: The naive pattern

  Benchmark(
    "Naive: cancel DispatchWorkItem + asyncAfter (10 ms)",
    // About 8 µs a call here: bursts of 1k calls, back to back, give enough samples in 5 s.
    configuration: .init(scalingFactor: .kilo, maxDuration: .seconds(5), maxIterations: 1_000)
  ) { benchmark in
    let naive = NaiveDebouncer(delay: .milliseconds(10), queue: queue)
    for value in benchmark.scaledIterations {
      naive.debounce { blackHole(value) }
    }
    naive.cancel()
  }
}

// MARK: - Floors

/// What any debouncer must do per call at least: read the clock and store under a lock.
final class ClockedStore<Instant: Sendable>: Sendable {
  private let clock: @Sendable () -> Instant
  private let state: Locked<(value: Int, time: Instant)?> = Locked(nil)

  init(clock: @escaping @Sendable () -> Instant) {
    self.clock = clock
  }

  func store(_ value: Int) {
    let now = clock()
    state.withLock { $0 = (value, now) }
  }

  var last: Int? { state.withLock { $0?.value } }
}

/// An uncontended lock around a store: what a throttle in an open window must pay.
final class LockedStore: Sendable {
  private let state = Locked<Int>(0)

  func store(_ value: Int) {
    state.withLock { $0 = value }
  }

  var last: Int { state.withLock { $0 } }
}

// MARK: - The naive pattern

/// The debouncer of countless blog posts and answers: cancel the previous work item, make a new
/// one, `asyncAfter`. Kept as written there (no lock, so not thread-safe either): this is what
/// Pace replaces.
final class NaiveDebouncer {
  private let delay: DispatchTimeInterval
  private let queue: DispatchQueue
  private var workItem: DispatchWorkItem?

  init(delay: DispatchTimeInterval, queue: DispatchQueue) {
    self.delay = delay
    self.queue = queue
  }

  func debounce(_ action: @escaping @Sendable () -> Void) {
    workItem?.cancel()
    let item = DispatchWorkItem(block: action)
    workItem = item
    queue.asyncAfter(deadline: .now() + delay, execute: item)
  }

  func cancel() {
    workItem?.cancel()
  }
}
