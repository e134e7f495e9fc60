// One instance of a service behind a PostgresConcurrencyLimiter, for
// Scripts/shared-concurrency-kill.py, which runs three, kills one with `kill -9` while it holds
// permits, and reads what each instance says it ran when:
//
//   pace-postgres-benchmark lease-instance TABLE KEY MAXIMUM LEASE_MS WORKERS HOLD_MS SECONDS
//
// WORKERS tasks each take a permit of KEY (waiting up to a minute), hold it HOLD_MS, give it back,
// and again, for SECONDS. Each work's start and end is a line, `+ NS` and `- NS`, NS the
// monotonic clock's nanoseconds (CLOCK_MONOTONIC: one clock for every process of the machine),
// written as the work starts (after its permit is taken) and as it ends (before its permit is
// released): so what the lines say is in flight was in flight, counted by the service itself.
import Foundation
import Pace
import PacePostgres
import PostgresNIO

#if canImport(Glibc)
import Glibc
#endif

/// Nanoseconds of CLOCK_MONOTONIC, which every process of the machine shares.
func monotonicNanoseconds() -> Int64 {
  var time = timespec()
  clock_gettime(CLOCK_MONOTONIC, &time)
  return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
}

/// Standard output, a whole line at a time, from any task.
final class LineWriter: Sendable {
  private let lock = NSLock()

  func write(_ line: String) {
    lock.lock()
    defer { lock.unlock() }
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
  }
}

func runLeaseInstance(_ arguments: [String], url: URL) async throws {
  guard arguments.count == 8, let maximum = Int(arguments[3]), let leaseMilliseconds = Int(arguments[4]),
    let workers = Int(arguments[5]), let holdMilliseconds = Int(arguments[6]), let seconds = Double(arguments[7])
  else { fail("usage: lease-instance TABLE KEY MAXIMUM LEASE_MS WORKERS HOLD_MS SECONDS") }
  let (table, key) = (arguments[1], arguments[2])
  let client = makeClient(url: url, connections: 4, plain: true)
  let output = LineWriter()
  try await withThrowingTaskGroup(of: Void.self) { group in
    group.addTask { await client.run() }
    let limiter = try PostgresConcurrencyLimiter(
      client: client, table: table, maximumInFlight: maximum, maximumWait: .seconds(60),
      lease: .milliseconds(leaseMilliseconds), timeout: .seconds(5))
    try await limiter.migrate()
    let running = Task { try await limiter.run() }
    output.write("ready")
    let end = ContinuousClock.now + .seconds(seconds)
    try await withThrowingTaskGroup(of: Void.self) { workersGroup in
      for _ in 0..<workers {
        workersGroup.addTask {
          while ContinuousClock.now < end {
            do {
              try await limiter.withPermit(key) {
                output.write("+ \(monotonicNanoseconds())")
                try await Task.sleep(for: .milliseconds(holdMilliseconds))
                output.write("- \(monotonicNanoseconds())")
              }
            } catch is ConcurrencyLimiterError {
              continue  // waited a minute: ask again
            }
          }
        }
      }
      try await workersGroup.waitForAll()
    }
    running.cancel()
    try await running.value
    group.cancelAll()
  }
}
