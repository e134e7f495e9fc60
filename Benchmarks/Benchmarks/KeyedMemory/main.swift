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
// The debouncers wait 50 ms on a DispatchQueue; the rate limiters allow 100 per 60 s, burst 20
// (a key that took one permit is full again after 600 ms).
// ns per call is the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), so that it means
// something on a loaded machine; calls per second from threads is wall clock.

import Dispatch
import Foundation
import Pace
import Synchronization

#if canImport(Glibc)
import Glibc

/// glibc's `malloc_trim`, which the Glibc module does not export.
@_silgen_name("malloc_trim")
func mallocTrim(_ pad: Int) -> Int32
#endif

let keyCount = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 1_000_000
let hotKeys = 1_000
let hotCallsPerRun = 2_000_000
let queue = DispatchQueue(label: "pace.benchmarks.keyed")
let interval = Duration.milliseconds(50)

/// Resident set size in bytes, from /proc/self/statm (pages).
func residentBytes() -> Int {
  #if canImport(Glibc)
  _ = mallocTrim(0)  // give freed heap pages back, so "resident" means "in use"
  #endif
  guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
  let fields = text.split(separator: " ")
  return (Int(fields[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE)))
}

/// The calling thread's CPU time for `body`, in seconds.
func cpuSeconds(_ body: () -> Void) -> Double {
  func now() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
  }
  let start = now()
  body()
  return now() - start
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
      let limiter = RateLimiter(permits: 100, per: .seconds(60), burst: 20)
      limiters[key] = limiter
      return limiter
    }
    return limiter.tryAcquire()
  }
}

struct Subject {
  var name: String
  var make: () -> any AnyObject & Sendable
  var call: @Sendable (any AnyObject & Sendable, Int) -> Void
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
    name: "KeyedRateLimiter", make: { KeyedRateLimiter<Int>(permits: 100, per: .seconds(60), burst: 20) },
    call: { _ = ($0 as! KeyedRateLimiter<Int>).tryAcquire($1) }),
]

print("keys: \(keyCount), hot set: \(hotKeys) keys, \(hotCallsPerRun) calls per thread count")
print("load average: \((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "?")", terminator: "")
for subject in subjects {
  let baseline = residentBytes()
  var instance: (any AnyObject & Sendable)? = subject.make()
  let call = subject.call
  let object = instance!
  let elapsed = cpuSeconds {
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
  Thread.sleep(forTimeInterval: 2.0)
  let quiet = residentBytes()
  print(
    """

    \(subject.name)
      \(keyCount) distinct keys: \(String(format: "%.0f", bytesPerKey)) resident bytes per key, \
    \(String(format: "%.0f", nsPerCall)) ns CPU per call (1 thread)
      hot set, calls per second by threads: \(throughput.joined(separator: ", "))
      quiet: resident \(String(format: "%+.1f", Double(quiet - baseline) / 1e6)) MB over the empty baseline \
    (\(String(format: "%.1f", Double(baseline) / 1e6)) MB)
    """)
  withExtendedLifetime(instance) {}
  instance = nil
  Thread.sleep(forTimeInterval: 0.2)
}

// MARK: The lock

// The shards' lock: `Synchronization.Mutex` (a priority-inheritance futex on Linux) beside a
// plain `pthread_mutex_t`, both striped over 64 shards as the keyed primitives are and with one
// lock for everything, each guarding a small table updated per call: calls per second by threads.

protocol Striped: Sendable {
  func update(_ key: Int)
}

final class MutexTable: Sendable {
  let counts = Mutex<[Int: Int]>([:])
}

final class MutexStripes: Striped {
  let shards: [MutexTable]
  init(_ count: Int) { shards = (0..<count).map { _ in MutexTable() } }
  func update(_ key: Int) {
    shards[key & (shards.count - 1)].counts.withLock { $0[key, default: 0] += 1 }
  }
}

final class Table {
  var counts: [Int: Int] = [:]
}

final class PthreadStripes: Striped, @unchecked Sendable {
  // @unchecked Sendable: each table is only touched under its `locks` entry.
  let locks: [UnsafeMutablePointer<pthread_mutex_t>]
  let tables: [Table]
  init(_ count: Int) {
    locks = (0..<count).map { _ in
      let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
      pthread_mutex_init(lock, nil)
      return lock
    }
    tables = (0..<count).map { _ in Table() }
  }
  func update(_ key: Int) {
    let shard = key & (locks.count - 1)
    pthread_mutex_lock(locks[shard])
    tables[shard].counts[key, default: 0] += 1
    pthread_mutex_unlock(locks[shard])
  }
}

print("\nLocks, hot set of \(hotKeys) keys, calls per second by threads:")
for (name, make) in [
  ("Mutex, 1 lock", { MutexStripes(1) as any Striped }), ("pthread_mutex, 1 lock", { PthreadStripes(1) }),
  ("Mutex, 64 shards", { MutexStripes(64) }), ("pthread_mutex, 64 shards", { PthreadStripes(64) }),
] as [(String, () -> any Striped)] {
  let striped = make()
  var line: [String] = []
  for threads in [1, 2, 4, 8] {
    let perThread = hotCallsPerRun / threads
    let wall = onThreads(threads) { thread in
      var key = thread &* 7919
      for _ in 0..<perThread {
        key = (key &+ 1) % hotKeys
        striped.update(key)
      }
    }
    line.append("\(threads): \(String(format: "%.1f", Double(hotCallsPerRun) / wall / 1e6)) M/s")
  }
  print("  \(name): \(line.joined(separator: ", "))")
}
