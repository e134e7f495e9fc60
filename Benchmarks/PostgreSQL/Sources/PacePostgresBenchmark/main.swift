// One cell of the PostgreSQL benchmark at a time, for Scripts/postgres-benchmark.py, which starts
// the database, interleaves these cells with pgbench and Redis, and prints the tables:
//
//   pace-postgres-benchmark sql TABLE                          the store's decision statement
//   pace-postgres-benchmark setup TABLE [logged|unlogged] [FILLFACTOR]
//                                                              migrate, and seed the naive rows
//   pace-postgres-benchmark store|naive CALLERS hot|random SECONDS TABLE
//                                                              decisions/s p50 p99 (ms), then this
//                                                              process's CPU µs and context switches
//                                                              per decision, and (store) decisions
//                                                              per round trip
//   pace-postgres-benchmark plain CALLERS hot|random SECONDS TABLE [unrun]
//                                                              the store as a user writes it: a client
//                                                              of CALLERS connections opened on demand,
//                                                              the store's default timeout, no warm-up;
//                                                              unrun: the store's run() not started
//   pace-postgres-benchmark driver CALLERS hot|random SECONDS TABLE [on-loop]
//                                                              the same figures for PostgresNIO alone:
//                                                              each caller on a connection of its own
//                                                              runs the single-decision statement,
//                                                              prepared, as pgbench's clients do;
//                                                              on-loop: each caller's task runs on its
//                                                              connection's event loop
//   pace-postgres-benchmark denied CALLERS SECONDS TABLE       decisions/s round-trips/s
//   pace-postgres-benchmark hot-lease CALLERS SECONDS TABLE    one hot key whose every request is allowed,
//                                                              decided in the database, then from leases
//                                                              (HotKeyLeasing's defaults): a line each of
//                                                              decisions/s statements/s denied, then the
//                                                              leasing store's p50 p99 p99.99 max (ms)
//   pace-postgres-benchmark lease-instance TABLE KEY MAXIMUM LEASE_MS WORKERS HOLD_MS SECONDS
//                                                              an instance behind a shared concurrency
//                                                              limit, for Scripts/shared-concurrency-kill.py
//                                                              (LeaseInstance.swift)
//   pace-postgres-benchmark purge TABLE ROWS                   seconds to purge ROWS expired rows of
//                                                              2 × ROWS, by purgeExpired() batches, then
//                                                              by purgeAllExpired()
//
// Reads the database's URL from PACE_POSTGRES_URL (Scripts/with-postgres.sh sets it).
import Foundation
import Metrics
import Pace
import PacePostgres
import PostgresNIO

/// The limit of every cell: generous enough that the benchmark measures the decision, not
/// denials (about a third are denied on the hot key); pgbench and Redis get the same numbers.
let limit = RateLimit(permits: 1_000_000, per: .seconds(60), burst: 1000)
/// How far one permit advances the TAT, and how far ahead of now it may be, in microseconds.
let increment: Int64 = 60
let tolerance: Int64 = 60_000
/// The random keys: `key-1` … `key-100000`.
let keyCount = 100_000

func fail(_ message: String) -> Never {
  FileHandle.standardError.write(Data("pace-postgres-benchmark: \(message)\n".utf8))
  exit(64)
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard let command = arguments.first else { fail("usage: see the header of main.swift") }
if command == "sql" {
  guard arguments.count == 2 else { fail("usage: sql TABLE") }
  print(try PostgresRateLimitStore.decisionStatement(table: arguments[1]))
  exit(0)
}
guard let text = ProcessInfo.processInfo.environment["PACE_POSTGRES_URL"], let url = URL(string: text) else {
  fail("set PACE_POSTGRES_URL (Scripts/with-postgres.sh does)")
}

func makeClient(url: URL, connections: Int, plain: Bool = false) -> PostgresClient {
  var logger = Logger(label: "pace-postgres-benchmark")
  logger.logLevel = .critical
  var configuration = PostgresClient.Configuration(
    host: url.host ?? "127.0.0.1", port: url.port ?? 5432, username: url.user ?? "postgres",
    password: url.password, database: url.path.isEmpty ? nil : String(url.path.dropFirst()), tls: .disable
  )
  configuration.options.maximumConnections = connections
  // As a user writes it: no connections opened ahead of the first request.
  if !plain { configuration.options.minimumConnections = connections }
  return PostgresClient(configuration: configuration, backgroundLogger: logger)
}

/// The table options of `setup`'s arguments: `logged` or `unlogged`, then a fill factor.
func tableOptions(_ words: ArraySlice<String>) -> PostgresRateLimitStore.TableOptions? {
  let durability: PostgresRateLimitStore.TableOptions.Durability = words.first == "unlogged" ? .unlogged : .logged
  guard words.first.map({ ["logged", "unlogged"].contains($0) }) ?? true else { return nil }
  guard let fillfactor = words.dropFirst().first.map({ Int($0) }) ?? 70 else { return nil }
  return try? PostgresRateLimitStore.TableOptions(durability: durability, fillfactor: fillfactor)
}

/// The naive alternative: read the row under a lock, decide in Swift, write it back, commit.
struct NaiveStore: Sendable {
  let client: PostgresClient
  let table: String

  func tryAcquire(_ key: String) async throws -> Bool {
    try await client.withTransaction(logger: Logger(label: "naive")) { connection in
      let rows = try await connection.query(
        """
        SELECT tat, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint
        FROM \(unescaped: table) WHERE key = \(key) FOR UPDATE
        """,
        logger: Logger(label: "naive"))
      var found: (Int64, Int64)?
      for try await row in rows.decode((Int64, Int64).self) { found = row }
      guard let (tat, now) = found else { fatalError("the naive benchmark's rows are seeded (run setup)") }
      let arrival = max(tat, now) + increment
      guard arrival - now <= tolerance else { return false }
      try await connection.query(
        "UPDATE \(unescaped: table) SET tat = \(arrival) WHERE key = \(key)", logger: Logger(label: "naive"))
      return true
    }
  }
}

/// The single-decision statement for PostgresNIO alone (`driver`): the table is found through the
/// connection's `search_path`, as pgbench finds it. `$4` and `$5` are a 900 ms budget, the script's.
struct SingleDecision: PostgresPreparedStatement {
  typealias Row = (Int64?, Int64?, Int64, Bool)
  static let sql = (try? PostgresRateLimitStore.decisionStatement(table: "bench_rate_limits")) ?? ""
  let key: String

  func makeBindings() -> PostgresBindings {
    var binds = PostgresBindings()
    binds.append(key)
    binds.append(increment)
    binds.append(tolerance)
    binds.append(Int64(900_000))
    binds.append("900ms")
    return binds
  }

  func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }

  /// Runs the decision on `connection` and reads its row.
  func run(on connection: PostgresConnection) async throws {
    for try await _ in try await connection.execute(self, logger: connection.logger) {}
  }
}

/// Counts the store's round trips (`pace_rate_limit_round_trips_total`); every other metric is dropped.
final class RoundTrips: MetricsFactory, CounterHandler, @unchecked Sendable {
  // `count` is read and written only inside `lock`.
  private let lock = NSLock()
  private var count: Int64 = 0
  var value: Int64 { lock.withLock { count } }

  func increment(by amount: Int64) { lock.withLock { count += amount } }
  func reset() { lock.withLock { count = 0 } }
  func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
    label == "pace_rate_limit_round_trips_total" ? self : NOOPMetricsHandler.instance
  }
  func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
    NOOPMetricsHandler.instance
  }
  func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler { NOOPMetricsHandler.instance }
  func destroyCounter(_ handler: any CounterHandler) {}
  func destroyRecorder(_ handler: any RecorderHandler) {}
  func destroyTimer(_ handler: any TimerHandler) {}
}

/// A count of denials, which the hot-lease cell's every-allowed limit should never give.
final class LockedCount: @unchecked Sendable {
  // `count` is read and written only inside `lock`.
  private let lock = NSLock()
  private var count = 0
  var value: Int { lock.withLock { count } }
  func increment() { lock.withLock { count += 1 } }
}

/// This process's CPU time (user and system) in microseconds, and its context switches (voluntary
/// and involuntary), so far.
@Sendable func processUsage() -> (cpu: Double, switches: Double) {
  var usage = rusage()
  #if os(Linux)
  getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
  #else
  getrusage(RUSAGE_SELF, &usage)
  #endif
  let cpu =
    Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e6
    + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec)
  return (cpu, Double(usage.ru_nvcsw + usage.ru_nivcsw))
}

/// What a cell measured: decisions/s, p50 and p99 in ms, and this process's CPU µs and context
/// switches per decision.
struct Figures: Sendable {
  var perSecond: Double
  var p50: Double
  var p99: Double
  var cpuPerDecision: Double
  var switchesPerDecision: Double
}

/// Runs a task's jobs on an event loop (`driver … on-loop`): a caller that queries a connection of
/// that loop writes to its socket and is resumed with the answer on the loop's own thread.
@available(macOS 15, *)
final class LoopExecutor: TaskExecutor {
  let eventLoop: any EventLoop

  init(_ eventLoop: any EventLoop) {
    self.eventLoop = eventLoop
  }

  func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
  }
}

/// Runs `callers` concurrent loops of `decide` for `seconds`; caller `n`'s loop on `loops[n]`,
/// if given, instead of the global executor.
@Sendable func measure(
  callers: Int, seconds: Double, loops: [any EventLoop]? = nil, _ decide: @escaping @Sendable (Int) async throws -> Void
) async throws -> Figures {
  let clock = ContinuousClock()
  let usage = processUsage()
  let start = clock.now
  let end = start + .milliseconds(Int(seconds * 1000))
  let latencies = try await withThrowingTaskGroup(of: [Duration].self) { group in
    for caller in 0..<callers {
      let run: @Sendable () async throws -> [Duration] = {
        var latencies: [Duration] = []
        latencies.reserveCapacity(1 << 16)
        while clock.now < end {
          let begin = clock.now
          try await decide(caller)
          latencies.append(clock.now - begin)
        }
        return latencies
      }
      if let loop = loops?[caller] {
        guard #available(macOS 15, *) else { fail("on-loop needs task executors (macOS 15)") }
        group.addTask(executorPreference: LoopExecutor(loop), operation: run)
      } else {
        group.addTask(operation: run)
      }
    }
    return try await group.reduce(into: [Duration]()) { $0 += $1 }
  }.sorted()
  let elapsed = (clock.now - start) / .seconds(1)
  let used = processUsage()
  let ms: (Double) -> Double = { p in
    latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] / .milliseconds(1)
  }
  let count = Double(max(1, latencies.count))
  return Figures(
    perSecond: Double(latencies.count) / elapsed, p50: ms(0.5), p99: ms(0.99),
    cpuPerDecision: (used.cpu - usage.cpu) / count, switchesPerDecision: (used.switches - usage.switches) / count)
}

/// Runs `callers` concurrent loops of `decide` for `seconds`; decisions/s. No latency per
/// decision: reading the clock for it would cost as much as a decision answered in memory.
@Sendable func throughput(callers: Int, seconds: Double, _ decide: @escaping @Sendable () async throws -> Void)
  async throws -> Double
{
  let clock = ContinuousClock()
  let start = clock.now
  let end = start + .milliseconds(Int(seconds * 1000))
  let count = try await withThrowingTaskGroup(of: Int.self) { group in
    for _ in 0..<callers {
      group.addTask {
        var count = 0
        while clock.now < end {
          for _ in 0..<256 { try await decide() }
          count += 256
        }
        return count
      }
    }
    return try await group.reduce(0, +)
  }
  return Double(count) / ((clock.now - start) / .seconds(1))
}

/// Runs `body` with `count` connections leased from `client`, each held until `body` returns.
@Sendable func withHeldConnections<Result: Sendable>(
  _ count: Int, of client: PostgresClient,
  _ body: @escaping @Sendable ([PostgresConnection]) async throws -> Result
) async throws -> Result {
  let (leased, lease) = AsyncStream.makeStream(of: PostgresConnection.self)
  return try await withThrowingTaskGroup(of: Void.self) { group in
    for _ in 0..<count {
      group.addTask {
        try await client.withConnection { connection in
          lease.yield(connection)
          // Held until the group is cancelled, once `body` returned.
          while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
        }
      }
    }
    var connections: [PostgresConnection] = []
    for await connection in leased {
      connections.append(connection)
      if connections.count == count { break }
    }
    let result = try await body(connections)
    group.cancelAll()
    try await group.waitForAll()
    return result
  }
}

/// Runs `body` with a running client of `connections`.
func withClient<Result: Sendable>(
  connections: Int, plain: Bool = false, _ body: @escaping @Sendable (PostgresClient) async throws -> Result
) async throws -> Result {
  let client = makeClient(url: url, connections: connections, plain: plain)
  return try await withThrowingTaskGroup(of: Result?.self) { group in
    group.addTask {
      await client.run()
      return nil
    }
    let result = try await body(client)
    group.cancelAll()
    return result
  }
}

switch command {
case "setup":
  guard (2...4).contains(arguments.count), let options = tableOptions(arguments.dropFirst(2)) else {
    fail("usage: setup TABLE [logged|unlogged] [FILLFACTOR]")
  }
  let table = arguments[1]
  try await withClient(connections: 1) { client in
    try await client.query("DROP TABLE IF EXISTS \(unescaped: table)")
    try await PostgresRateLimitStore(client: client, table: table, tableOptions: options).migrate()
    // The naive transaction needs its rows; the store and pgbench start from the same ones.
    try await client.query(
      """
      INSERT INTO \(unescaped: table) (key, tat)
      SELECT 'key-' || i, 0 FROM generate_series(0, \(keyCount)) AS i
      """)
    try await client.query("VACUUM ANALYZE \(unescaped: table)")
  }

case "store", "naive", "plain":
  let plain = command == "plain"
  guard (5...6).contains(arguments.count), let callers = Int(arguments[1]), let seconds = Double(arguments[3]),
    arguments.count == 5 || (plain && arguments[5] == "unrun")
  else { fail("usage: store|naive CALLERS hot|random SECONDS TABLE, or plain … TABLE [unrun]") }
  let (hot, table, unrun) = (arguments[2] == "hot", arguments[4], arguments.count == 6)
  let key: @Sendable () -> String = { hot ? "key-0" : "key-\(Int.random(in: 1...keyCount))" }
  let roundTrips = RoundTrips()
  // The plain cell's client has a connection per caller, opened on demand, as a user writes it.
  let (figures, trips) = try await withClient(connections: plain ? callers : max(callers, 4), plain: plain) {
    client in
    if command != "naive" {
      // The benchmark's store: a timeout far above a decision's time (on a loaded machine a
      // decision that waited a second would end the run with `unavailable`, thrown at top level,
      // instead of being measured) and a warm-up; the plain one: the defaults, no warm-up.
      let store =
        plain
        ? try PostgresRateLimitStore(client: client, table: table, metricsFactory: roundTrips)
        : try PostgresRateLimitStore(client: client, table: table, timeout: .seconds(30), metricsFactory: roundTrips)
      // The store's run() owns its lanes: decisions are batched while it runs.
      let running = Task { if !unrun { try await store.run() } }
      if !plain { _ = try await store.tryAcquire("key-0", cost: 0, limit: limit) }  // connected, function planned
      let before = roundTrips.value
      let figures = try await measure(callers: callers, seconds: seconds) { _ in
        _ = try await store.tryAcquire(key(), cost: 1, limit: limit)
      }
      let trips = roundTrips.value - before
      // The store's lanes give their connections back before the client stops.
      running.cancel()
      try await running.value
      return (figures, trips)
    }
    let naive = NaiveStore(client: client, table: table)
    let figures = try await measure(callers: callers, seconds: seconds) { _ in _ = try await naive.tryAcquire(key()) }
    return (figures, Int64(0))
  }
  let decisions = figures.perSecond * seconds
  print(
    String(
      format: "%.0f %.3f %.3f %.1f %.2f %.2f", figures.perSecond, figures.p50, figures.p99, figures.cpuPerDecision,
      figures.switchesPerDecision, trips > 0 ? decisions / Double(trips) : 0))

case "driver":
  guard (5...6).contains(arguments.count), let callers = Int(arguments[1]), let seconds = Double(arguments[3]),
    let schema = arguments[4].split(separator: ".").first.map(String.init),
    arguments.count == 5 || arguments[5] == "on-loop"
  else { fail("usage: driver CALLERS hot|random SECONDS TABLE [on-loop]") }
  let (hot, onLoop) = (arguments[2] == "hot", arguments.count == 6)
  let key: @Sendable () -> String = { hot ? "key-0" : "key-\(Int.random(in: 1...keyCount))" }
  let figures = try await withClient(connections: callers) { client in
    // Each caller leases its connection once and keeps it for the cell, as a pgbench client does.
    try await withHeldConnections(callers, of: client) { connections in
      for connection in connections {
        try await connection.query("SET search_path TO \(unescaped: schema)", logger: connection.logger)
        try await SingleDecision(key: "key-0").run(on: connection)
      }
      let loops = onLoop ? connections.map(\.eventLoop) : nil
      return try await measure(callers: callers, seconds: seconds, loops: loops) { caller in
        try await SingleDecision(key: key()).run(on: connections[caller])
      }
    }
  }
  print(
    String(
      format: "%.0f %.3f %.3f %.1f %.2f %.2f", figures.perSecond, figures.p50, figures.p99, figures.cpuPerDecision,
      figures.switchesPerDecision, 1.0))

case "denied":
  guard arguments.count == 4, let callers = Int(arguments[1]), let seconds = Double(arguments[2]) else {
    fail("usage: denied CALLERS SECONDS TABLE")
  }
  let table = arguments[3]
  let roundTrips = RoundTrips()
  let (perSecond, trips) = try await withClient(connections: 4) { client in
    let store = try PostgresRateLimitStore(client: client, table: table, metricsFactory: roundTrips)
    let running = Task { try await store.run() }
    let hour = RateLimit(permits: 1, per: .seconds(3600))
    let key = "denied-\(UInt32.random(in: 0...UInt32.max))"
    _ = try await store.tryAcquire(key, cost: 1, limit: hour)
    let before = roundTrips.value
    let perSecond = try await throughput(callers: callers, seconds: seconds) {
      _ = try await store.tryAcquire(key, cost: 1, limit: hour)
    }
    let trips = Double(roundTrips.value - before) / seconds
    running.cancel()
    try await running.value
    return (perSecond, trips)
  }
  print(String(format: "%.0f %.1f", perSecond, trips))

case "hot-lease":
  guard arguments.count == 4, let callers = Int(arguments[1]), let seconds = Double(arguments[2]) else {
    fail("usage: hot-lease CALLERS SECONDS TABLE")
  }
  let table = arguments[3]
  // A limit no caller reaches: every decision is allowed, as on a hot key well under its limit.
  let generous = RateLimit(permits: 100_000_000, per: .seconds(1), burst: 100_000_000)
  let roundTrips = RoundTrips()
  try await withClient(connections: 4) { client in
    let plainStore = try PostgresRateLimitStore(
      client: client, table: table, timeout: .seconds(30), metricsFactory: roundTrips)
    let leasing = plainStore.leasingHotKeys(try HotKeyLeasing(), metricsFactory: roundTrips)
    let running = Task { try await plainStore.run() }
    let denied = LockedCount()
    for (name, store) in [("database", plainStore), ("leases", leasing)] {
      _ = try await store.tryAcquire("hot-lease", cost: 1, limit: generous)  // connected, function planned
      let before = roundTrips.value
      let started = ContinuousClock.now
      let perSecond = try await throughput(callers: callers, seconds: seconds) {
        if try await !store.tryAcquire("hot-lease", cost: 1, limit: generous).isAllowed { denied.increment() }
      }
      let elapsed = (ContinuousClock.now - started) / .seconds(1)
      print(
        String(
          format: "%@ %.0f %.1f %d", name, perSecond, Double(roundTrips.value - before) / elapsed, denied.value))
    }
    // The latency of the leasing store's decisions: one in half a lease waits for the next lease.
    var latencies: [Duration] = []
    latencies.reserveCapacity(1 << 22)
    let clock = ContinuousClock()
    let end = clock.now + .milliseconds(Int(seconds * 1000))
    while clock.now < end {
      let begin = clock.now
      _ = try await leasing.tryAcquire("hot-lease", cost: 1, limit: generous)
      latencies.append(clock.now - begin)
    }
    latencies.sort()
    let ms = { (p: Double) in latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] / .milliseconds(1) }
    print(String(format: "latency %.4f %.4f %.3f %.3f", ms(0.5), ms(0.99), ms(0.9999), ms(1)))
    running.cancel()
    try await running.value
  }

case "purge":
  guard arguments.count == 3, let rows = Int(arguments[2]), rows > 0 else { fail("usage: purge TABLE ROWS") }
  let table = arguments[1]
  let seconds = try await withClient(connections: 1) { client in
    let store = try PostgresRateLimitStore(client: client, table: table)
    var seconds: [Double] = []
    let purges: [@Sendable () async throws -> Void] = [
      { while try await store.purgeExpired() == 1000 {} }, { try await store.purgeAllExpired() },
    ]
    for purge in purges {
      // Every other row expired (1970), the others a century ahead, as a table of busy and idle keys.
      try await client.query("TRUNCATE \(unescaped: table)")
      try await client.query(
        """
        INSERT INTO \(unescaped: table) (key, tat)
        SELECT 'key-' || i, CASE WHEN i % 2 = 0 THEN 0 ELSE 4000000000000000 END
        FROM generate_series(1, \(2 * rows)) AS i
        """)
      try await client.query("VACUUM ANALYZE \(unescaped: table)")
      let start = ContinuousClock.now
      try await purge()
      seconds.append((ContinuousClock.now - start) / .seconds(1))
    }
    return seconds
  }
  print(String(format: "%.3f %.3f", seconds[0], seconds[1]))

case "lease-instance":
  try await runLeaseInstance(arguments, url: url)

default:
  fail("unknown command \(command)")
}
