// Decisions per second and latency of PostgresRateLimitStore (one INSERT … ON CONFLICT … RETURNING
// statement) beside the naive read-modify-write transaction (BEGIN; SELECT … FOR UPDATE; UPDATE;
// COMMIT), for 1, 4 and 16 concurrent clients, on one hot key and on a key per client.
//
//   Scripts/with-postgres.sh swift run -c release --traits PostgreSQL pace-postgres-benchmark [SECONDS]
//
// Reads the database's URL from PACE_POSTGRES_URL (set by the script). SECONDS per cell: 2.
#if PostgreSQL
import Foundation
import Pace
import PacePostgres
import PostgresNIO

guard let text = ProcessInfo.processInfo.environment["PACE_POSTGRES_URL"], let url = URL(string: text) else {
  FileHandle.standardError.write(Data("pace-postgres-benchmark: set PACE_POSTGRES_URL (Scripts/with-postgres.sh does)\n".utf8))
  exit(64)
}
let seconds = CommandLine.arguments.dropFirst().first.flatMap(Int64.init) ?? 2
// Generous enough that the benchmark measures the decision, not denials: about a third are denied
// on the hot key.
let limit = RateLimit(permits: 1_000_000, per: .seconds(60), burst: 1000)

func makeClient(connections: Int) -> PostgresClient {
  var logger = Logger(label: "pace-postgres-benchmark")
  logger.logLevel = .critical
  var configuration = PostgresClient.Configuration(
    host: url.host ?? "127.0.0.1", port: url.port ?? 5432, username: url.user ?? "postgres",
    password: url.password, database: url.path.isEmpty ? nil : String(url.path.dropFirst()), tls: .disable
  )
  configuration.options.maximumConnections = connections
  configuration.options.minimumConnections = connections
  return PostgresClient(configuration: configuration, backgroundLogger: logger)
}

/// The naive alternative: read the row under a lock, decide in Swift, write it back, commit.
struct NaiveStore: Sendable {
  let client: PostgresClient
  let table: String

  func tryAcquire(_ key: String) async throws -> Bool {
    let interval: Int64 = 60_000_000
    let increment = interval / Int64(limit.permits)
    let tolerance = increment * Int64(limit.burst)
    return try await client.withTransaction(logger: Logger(label: "naive")) { connection in
      let rows = try await connection.query(
        """
        SELECT tat, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint
        FROM \(unescaped: table) WHERE key = \(key) FOR UPDATE
        """,
        logger: Logger(label: "naive"))
      var found: (Int64, Int64)?
      for try await row in rows.decode((Int64, Int64).self) { found = row }
      guard let (tat, now) = found else { fatalError("the naive benchmark's rows are seeded") }
      let arrival = max(tat, now) + increment
      guard arrival - now <= tolerance else { return false }
      try await connection.query(
        "UPDATE \(unescaped: table) SET tat = \(arrival) WHERE key = \(key)", logger: Logger(label: "naive"))
      return true
    }
  }
}

struct Cell {
  var decisions = 0
  var latencies: [Duration] = []

  var perSecond: Int { Int(Double(decisions) / Double(seconds)) }
  func percentile(_ p: Double) -> String {
    let sorted = latencies.sorted()
    guard !sorted.isEmpty else { return "-" }
    let value = sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
    return String(format: "%.2f ms", Double(value.components.attoseconds) / 1e15 + Double(value.components.seconds) * 1e3)
  }
}

/// Runs `clients` concurrent loops of `decide` for `seconds`, recording each decision's latency.
func measure(clients: Int, _ decide: @escaping @Sendable (Int) async throws -> Void) async throws -> Cell {
  let clock = ContinuousClock()
  let end = clock.now + .seconds(seconds)
  let cells = try await withThrowingTaskGroup(of: Cell.self) { group in
    for client in 0..<clients {
      group.addTask {
        var cell = Cell()
        while clock.now < end {
          let start = clock.now
          try await decide(client)
          cell.latencies.append(clock.now - start)
          cell.decisions += 1
        }
        return cell
      }
    }
    return try await group.reduce(into: [Cell]()) { $0.append($1) }
  }
  return Cell(decisions: cells.map(\.decisions).reduce(0, +), latencies: cells.flatMap(\.latencies))
}

print("| clients | keys | strategy | decisions/s | p50 | p99 |")
print("|---:|---|---|---:|---:|---:|")
for clients in [1, 4, 16] {
  let client = makeClient(connections: clients)
  try await withThrowingTaskGroup(of: Void.self) { group in
    group.addTask { await client.run() }
    for spread in [false, true] {
      let table = "bench_\(clients)_\(spread ? "spread" : "hot")"
      let store = try PostgresRateLimitStore(client: client, table: table)
      try await client.query("DROP TABLE IF EXISTS \(unescaped: table)")
      try await store.migrate()
      let key: @Sendable (Int) -> String = { spread ? "key-\($0)" : "hot" }
      for index in 0..<clients { _ = try await store.tryAcquire(key(index), cost: 1, limit: limit) }
      let naive = NaiveStore(client: client, table: table)
      let keys = spread ? "one per client" : "one hot key"
      let single = try await measure(clients: clients) { _ = try await store.tryAcquire(key($0), cost: 1, limit: limit) }
      let transaction = try await measure(clients: clients) { _ = try await naive.tryAcquire(key($0)) }
      for (name, cell) in [("Pace: one statement", single), ("naive: SELECT FOR UPDATE + UPDATE", transaction)] {
        print("| \(clients) | \(keys) | \(name) | \(cell.perSecond) | \(cell.percentile(0.5)) | \(cell.percentile(0.99)) |")
      }
    }
    group.cancelAll()
  }
}
#else
print("pace-postgres-benchmark needs the PostgreSQL trait: swift run -c release --traits PostgreSQL pace-postgres-benchmark")
#endif
