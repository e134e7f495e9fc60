// Resident memory and call cost of keyed pacing at server scale, beside the naive pattern, in
// one run (issue 11). A plain release executable rather than a Benchmark target, because
// resident memory per key is a before/after difference of /proc/self/statm around one big
// population of keys, which the harness's per-iteration metrics do not give.
//
//   cd Benchmarks && swift run -c release KeyedMemory
//
// For each of "a dictionary of Debouncers behind one lock", KeyedDebouncer, "a dictionary of
// RateLimiters behind one lock" and KeyedRateLimiter (with `Int` keys, then the keyed two again
// with keys of a struct type), phases 1 and 2 in a fresh process, phase 3 in another:
//   1. resident bytes per key and ns per call for `keys` (1M) distinct active keys, one thread,
//      then ns per call on those same keys again;
//   2. calls per second on a hot set of 1,000 keys from 1, 2, 4 and 8 threads;
//   3. resident memory once 1M keys have gone quiet, against the baseline of a process that has
//      already used the same contender once (1,000 keys, released), so that the threads,
//      malloc arenas and library code pages any process that paces keeps are in the baseline;
//      split into anonymous memory (the heap) and file-backed pages (library code); and once the
//      instance is released too; and the CPU time the scheduler's threads spend per key while
//      the population goes quiet (timers firing, trailing invocations, keys forgotten).
// Then the floor: the same keys inserted into a bare dictionary, with no lock, clock or deadline.
// The debouncers wait 50 ms on a DispatchQueue; the rate limiters allow 100 per 60 s, burst 20
// (a key that took one permit is full again after 600 ms).
// ns per call is the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), so that it means
// something on a loaded machine; calls per second from threads is wall clock.

import BenchmarkSupport
import Dispatch
import Foundation
import Pace

#if canImport(Glibc)
import Glibc

/// glibc's `malloc_trim`, which the Glibc module does not export.
@_silgen_name("malloc_trim")
func mallocTrim(_ pad: Int) -> Int32
#endif

let keyCount = 1_000_000
/// With no argument, the run: each contender in a fresh process of its own (resident memory is
/// per process, and a contender's leftovers must not count for the next), then the locks.
/// With an argument, phases 1 and 2 of the contender of that index only; with `N quiet`, its
/// phase 3.
let only = CommandLine.arguments.dropFirst().first.flatMap(Int.init)
let hotKeys = 1_000
let hotCallsPerRun = 2_000_000
let queue = DispatchQueue(label: "pace.benchmarks.keyed")
let interval = Duration.milliseconds(50)

/// Resident anonymous and file-backed bytes, from /proc/self/status (`RssAnon`, `RssFile`).
func residentParts() -> (anonymous: Int, file: Int) {
  #if canImport(Glibc)
  _ = mallocTrim(0)
  #endif
  guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return (0, 0) }
  var parts = (anonymous: 0, file: 0)
  for line in text.split(separator: "\n") {
    let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
    guard fields.count >= 2, let kilobytes = Int(fields[1]) else { continue }
    if fields[0] == "RssAnon:" { parts.anonymous = kilobytes * 1024 }
    if fields[0] == "RssFile:" { parts.file = kilobytes * 1024 }
  }
  return parts
}

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

/// The whole process's CPU time, in seconds: while the main thread sleeps, the work of the
/// scheduler's threads.
func processCPUSeconds() -> Double {
  var time = timespec()
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
  return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
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
  let debouncers = Locked<[Int: Debouncer<Int>]>([:])
  let interval: Duration

  init(interval: Duration) {
    self.interval = interval
  }

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
  let limiters = Locked<[Int: RateLimiter]>([:])
  let long: Bool

  init(long: Bool) {
    self.long = long
  }

  func tryAcquire(_ key: Int) -> Bool {
    let limiter = limiters.withLock { limiters in
      if let limiter = limiters[key] { return limiter }
      let limiter =
        long
        ? RateLimiter(permits: 1, per: .seconds(3600), burst: 20)
        : RateLimiter(permits: 100, per: .seconds(60), burst: 20)
      limiters[key] = limiter
      return limiter
    }
    return limiter.tryAcquire().isAllowed
  }
}

/// One contender. `make(true)` builds it with timing long enough that no key goes idle during a
/// run (a 1 h debounce, 1 permit per hour), for resident memory per active key; `make(false)`
/// with a 50 ms debounce and 100 permits per 60 s (a key that took one permit is full again after
/// 600 ms), for memory once everything has gone quiet.
struct Subject {
  var name: String
  var make: (_ long: Bool) -> any AnyObject & Sendable
  var call: @Sendable (any AnyObject & Sendable, Int) -> Void
}

func debounceInterval(_ long: Bool) -> Duration { long ? .seconds(3600) : interval }

let subjects = [
  Subject(
    name: "Dictionary of Debouncers + lock", make: { DictionaryOfDebouncers(interval: debounceInterval($0)) },
    call: { unsafeDowncast($0, to: DictionaryOfDebouncers.self).call($1, $1) }),
  Subject(
    name: "KeyedDebouncer",
    make: { KeyedDebouncer<Int, Int>(for: debounceInterval($0), scheduler: .queue(queue)) { _, _ in } },
    call: { unsafeDowncast($0, to: KeyedDebouncer<Int, Int>.self).call($1, $1) }),
  Subject(
    name: "Dictionary of RateLimiters + lock", make: { DictionaryOfRateLimiters(long: $0) },
    call: { _ = unsafeDowncast($0, to: DictionaryOfRateLimiters.self).tryAcquire($1) }),
  Subject(
    name: "KeyedRateLimiter",
    make: { long in
      long
        ? KeyedRateLimiter<Int>(permits: 1, per: .seconds(3600), burst: 20)
        : KeyedRateLimiter<Int>(permits: 100, per: .seconds(60), burst: 20)
    },
    call: { _ = unsafeDowncast($0, to: KeyedRateLimiter<Int>.self).tryAcquire($1) }),
  // A key type of the caller's own, as most servers have: the keyed primitives are specialised
  // for it in this module, as for `Int`.
  Subject(
    name: "KeyedDebouncer, struct keys",
    make: { KeyedDebouncer<UserID, Int>(for: debounceInterval($0), scheduler: .queue(queue)) { _, _ in } },
    call: { unsafeDowncast($0, to: KeyedDebouncer<UserID, Int>.self).call(UserID(raw: $1), $1) }),
  Subject(
    name: "KeyedRateLimiter, struct keys",
    make: { long in
      long
        ? KeyedRateLimiter<UserID>(permits: 1, per: .seconds(3600), burst: 20)
        : KeyedRateLimiter<UserID>(permits: 100, per: .seconds(60), burst: 20)
    },
    call: { _ = unsafeDowncast($0, to: KeyedRateLimiter<UserID>.self).tryAcquire(UserID(raw: $1)) }),
]

/// A key of the caller's own type, with synthesised `Hashable`.
struct UserID: Hashable, Sendable {
  var raw: Int
}

/// The floor under a call that creates a key: inserting `keyCount` distinct Int keys into a bare
/// dictionary of a 16-byte state (no lock, clock or deadline), in one table and spread over 64
/// tables as the keyed primitives' shards are; then updating them all once more.
func measureFloor() {
  struct State {
    var first: Int64
    var second: Int64
  }
  var table: [Int: State] = [:]
  let insert = cpuSeconds {
    for key in 0..<keyCount { table[key] = State(first: Int64(key), second: 0) }
  }
  let update = cpuSeconds {
    for key in 0..<keyCount { table[key]?.second += 1 }
  }
  withExtendedLifetime(table) {}
  table = [:]
  var shards = [[Int: State]](repeating: [:], count: 64)
  let sharded = cpuSeconds {
    for key in 0..<keyCount { shards[key.hashValue & 63][key] = State(first: Int64(key), second: 0) }
  }
  withExtendedLifetime(shards) {}
  let ns = { (seconds: Double) in String(format: "%.0f", seconds * 1e9 / Double(keyCount)) }
  print(
    """

    Floor: a bare Dictionary<Int, 16-byte struct>
      \(keyCount) distinct keys: \(ns(insert)) ns CPU per insert (1 table), \(ns(sharded)) ns (64 tables), \
    \(ns(update)) ns per update of an existing key
    """)
}

if only == nil {
  print("keys: \(keyCount), hot set: \(hotKeys) keys, \(hotCallsPerRun) calls per thread count")
  print("load average: \((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "?")", terminator: "")
  fflush(nil)  // every stream, so the header comes before the children's output
  for index in subjects.indices {
    for phases in [[String(index)], [String(index), "quiet"]] {
      let process = Process()
      process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
      process.arguments = phases
      try process.run()
      process.waitUntilExit()
    }
  }
  measureFloor()
}
/// Phases 1 and 2 of one contender, printed.
func measureActiveKeys(_ subject: Subject) {
  let call = subject.call

  // 1. Active keys: resident bytes per key and CPU per call.
  let baseline = residentBytes()
  var instance: (any AnyObject & Sendable)? = subject.make(true)
  let elapsed = cpuSeconds {
    for key in 0..<keyCount { call(instance!, key) }
  }
  let active = residentBytes()
  let bytesPerKey = Double(active - baseline) / Double(keyCount)
  let nsPerCall = elapsed * 1e9 / Double(keyCount)
  // The same keys again: each call finds its key's state among a million.
  let nsPerExistingCall =
    cpuSeconds {
      for key in 0..<keyCount { call(instance!, key) }
    } * 1e9 / Double(keyCount)
  instance = nil

  // 2. A hot set from threads.
  let hot = subject.make(true)
  var throughput: [String] = []
  for threads in [1, 2, 4, 8] {
    let perThread = hotCallsPerRun / threads
    let wall = onThreads(threads) { thread in
      var key = thread &* 7919
      for _ in 0..<perThread {
        key = (key &+ 1) % hotKeys
        call(hot, key)
      }
    }
    throughput.append("\(threads): \(String(format: "%.1f", Double(hotCallsPerRun) / wall / 1e6)) M/s")
  }
  print(
    """

    \(subject.name)
      \(keyCount) distinct active keys: \(String(format: "%.0f", bytesPerKey)) resident bytes per key, \
    \(String(format: "%.0f", nsPerCall)) ns CPU per call (1 thread), \
    \(String(format: "%.0f", nsPerExistingCall)) ns on the same keys again
      hot set, calls per second by threads: \(throughput.joined(separator: ", "))
    """)
}

/// Phase 3 of one contender, printed: in a process of its own, so that the baseline is a process
/// that has paced nothing but the warm-up (the threads of phase 2 leave allocations in their
/// malloc arenas that would count here).
func measureQuiet(_ subject: Subject) {
  let call = subject.call
  // Warm-up: the same contender once, on 1,000 keys, gone quiet and released.
  do {
    let warmUp = subject.make(false)
    for key in 0..<hotKeys { call(warmUp, key) }
    Thread.sleep(forTimeInterval: 1.0)
  }
  Thread.sleep(forTimeInterval: 0.2)
  let baseline = residentBytes()
  let baselineParts = residentParts()
  var instance: (any AnyObject & Sendable)? = subject.make(false)
  // The scheduler's threads start firing while the calls still go on: their CPU time is the
  // process's less the calling thread's.
  let processStart = processCPUSeconds()
  let callingCPU = cpuSeconds {
    for key in 0..<keyCount { call(instance!, key) }
  }
  // The debouncers' trailing edges fire after 50 ms, the buckets are full again after 600 ms.
  Thread.sleep(forTimeInterval: 3.0)
  let quietCPU = processCPUSeconds() - processStart - callingCPU
  let quiet = residentBytes()
  let quietParts = residentParts()
  // What the process keeps once the instance is gone too: the difference with `quiet` is what
  // the quiet instance itself holds.
  instance = nil
  Thread.sleep(forTimeInterval: 0.2)
  let released = residentBytes()
  print(
    """
      quiet: resident \(String(format: "%+.1f", Double(quiet - baseline) / 1e6)) MB over the warmed-up baseline \
    (\(String(format: "%.1f", Double(baseline) / 1e6)) MB; \(String(format: "%+.1f", Double(quiet - baseline) / Double(baseline) * 100)) %): \
    anonymous \(String(format: "%+.1f", Double(quietParts.anonymous - baselineParts.anonymous) / 1e6)) MB, \
    file-backed \(String(format: "%+.1f", Double(quietParts.file - baselineParts.file) / 1e6)) MB; \
    \(String(format: "%+.1f", Double(released - baseline) / 1e6)) MB once released
      going quiet: \(String(format: "%.0f", quietCPU * 1e9 / Double(keyCount))) ns CPU per key on the scheduler's \
    threads (timers firing, trailing invocations, keys forgotten)
    """)
}

if let only {
  if CommandLine.arguments.dropFirst(2).first == "quiet" {
    measureQuiet(subjects[only])
  } else {
    measureActiveKeys(subjects[only])
  }
}

// MARK: The lock

// Linux's locks: the futex behind `Mutex` there is what this compares (and `Mutex` needs macOS 15).
#if os(Linux)
import Synchronization

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

if only != nil { exit(0) }
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
#endif
