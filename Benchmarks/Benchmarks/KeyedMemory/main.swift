// Resident memory and call cost of keyed pacing at server scale, beside the naive pattern, in
// one run (issue 11). A plain release executable rather than a Benchmark target, because
// resident memory per key is a before/after difference of /proc/self/statm around one big
// population of keys, which the harness's per-iteration metrics do not give.
//
//   cd Benchmarks && swift run -c release KeyedMemory [keys]
//
// For each of "a dictionary of Debouncers behind one lock", KeyedDebouncer, "a dictionary of
// RateLimiters behind one lock" and KeyedRateLimiter, in a fresh state:
//   1. resident bytes per key and ns per call for `keys` (1M) distinct active keys, one thread;
//   2. calls per second on a hot set of 1,000 keys from 1, 2, 4 and 8 threads;
//   3. resident memory once everything has gone quiet, against the empty baseline.
// The debouncers wait 50 ms on a DispatchQueue; the rate limiters allow 10 per 100 ms.

import Dispatch
import Foundation
import Pace
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

let keyCount = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 1_000_000
let hotKeys = 1_000
let hotCallsPerRun = 2_000_000
let queue = DispatchQueue(label: "pace.benchmarks.keyed")
let interval = Duration.milliseconds(50)

/// Resident set size in bytes, from /proc/self/statm (pages).
func residentBytes() -> Int {
  #if canImport(Glibc)
  malloc_trim(0)  // give freed heap pages back, so "resident" means "in use"
  #endif
  guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
  let fields = text.split(separator: " ")
  return (Int(fields[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE)))
}

func seconds(_ body: () -> Void) -> Double {
  let start = ContinuousClock.now
  body()
  let elapsed = start.duration(to: .now)
  return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
}

/// Runs `body(thread)` on `threads` threads at once; returns the wall time.
func onThreads(_ threads: Int, _ body: @escaping @Sendable (Int) -> Void) -> Double {
  let ready = DispatchGroup()
  let done = DispatchGroup()
  let start = DispatchSemaphore(value: 0)
  for thread in 0..<threads {
    ready.enter()
    done.enter()
    Thread.detachNewThread {
      ready.leave()
      start.wait()
      body(thread)
      done.leave()
    }
  }
  ready.wait()
  return seconds {
    for _ in 0..<threads { start.signal() }
    done.wait()
  }
}

/// The naive pattern: a dictionary of debouncers behind one lock, never evicted.
final class DictionaryOfDebouncers: Sendable {
  let debouncers = Mutex<[Int: Debouncer<Int>]>([:])

  func call(_ key: Int, _ value: Int) {
    let debouncer = debouncers.withLock { debouncers in
      if let debouncer = debouncers[key] { return debouncer }
      let debouncer = Debouncer<Int>(for: interval, scheduler: .queue(queue)) { _ in }
      debouncers[key] = debouncer
      return debouncer
    }
    debouncer.call(value)
  }
}

/// The naive pattern for rate limits: a dictionary of rate limiters behind one lock.
final class DictionaryOfRateLimiters: Sendable {
  let limiters = Mutex<[Int: RateLimiter]>([:])

  func tryAcquire(_ key: Int) -> Bool {
    let limiter = limiters.withLock { limiters in
      if let limiter = limiters[key] { return limiter }
      let limiter = RateLimiter(permits: 10, per: .milliseconds(100))
      limiters[key] = limiter
      return limiter
    }
    return limiter.tryAcquire()
  }
}

struct Subject {
  var name: String
  var make: () -> AnyObject
  var call: @Sendable (AnyObject, Int) -> Void
}

let subjects = [
  Subject(
    name: "Dictionary of Debouncers + lock", make: { DictionaryOfDebouncers() },
    call: { ($0 as! DictionaryOfDebouncers).call($1, $1) }),
  Subject(
    name: "KeyedDebouncer", make: { KeyedDebouncer<Int, Int>(for: interval, scheduler: .queue(queue)) { _, _ in } },
    call: { ($0 as! KeyedDebouncer<Int, Int>).call($1, $1) }),
  Subject(
    name: "Dictionary of RateLimiters + lock", make: { DictionaryOfRateLimiters() },
    call: { _ = ($0 as! DictionaryOfRateLimiters).tryAcquire($1) }),
  Subject(
    name: "KeyedRateLimiter", make: { KeyedRateLimiter<Int>(permits: 10, per: .milliseconds(100)) },
    call: { _ = ($0 as! KeyedRateLimiter<Int>).tryAcquire($1) }),
]

print("keys: \(keyCount), hot set: \(hotKeys) keys, \(hotCallsPerRun) calls per thread count")
print("load average: \((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "?")", terminator: "")
for subject in subjects {
  let baseline = residentBytes()
  var instance: AnyObject? = subject.make()
  let call = subject.call
  let object = instance!
  let elapsed = seconds {
    for key in 0..<keyCount { call(object, key) }
  }
  let active = residentBytes()
  let bytesPerKey = Double(active - baseline) / Double(keyCount)
  let nsPerCall = elapsed * 1e9 / Double(keyCount)

  var throughput: [String] = []
  for threads in [1, 2, 4, 8] {
    let perThread = hotCallsPerRun / threads
    let wall = onThreads(threads) { thread in
      var key = thread &* 7919
      for _ in 0..<perThread {
        key = (key &+ 1) % hotKeys
        call(object, key)
      }
    }
    throughput.append("\(threads): \(String(format: "%.1f", Double(hotCallsPerRun) / wall / 1e6)) M/s")
  }

  // Quiet: the debouncers' trailing edges fire after 50 ms, the buckets refill within 100 ms.
  Thread.sleep(forTimeInterval: 1.0)
  let quiet = residentBytes()
  print(
    """

    \(subject.name)
      \(keyCount) distinct keys: \(String(format: "%.0f", bytesPerKey)) resident bytes per key, \
    \(String(format: "%.0f", nsPerCall)) ns per call (1 thread)
      hot set, calls per second by threads: \(throughput.joined(separator: ", "))
      quiet: resident \(String(format: "%+.1f", Double(quiet - baseline) / 1e6)) MB over the empty baseline \
    (\(String(format: "%.1f", Double(baseline) / 1e6)) MB)
    """)
  withExtendedLifetime(instance) {}
  instance = nil
  Thread.sleep(forTimeInterval: 0.2)
}
