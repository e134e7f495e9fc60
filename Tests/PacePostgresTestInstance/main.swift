// A separate instance of a server for PaceServerTests: its own process, its own connection pool.
//
//   pace-postgres-test-instance hammer URL TABLE KEY ATTEMPTS PERMITS INTERVAL_SECONDS
//       asks ATTEMPTS times at once for one permit; prints each grant's `remaining`, one a line.
//   pace-postgres-test-instance debounce-worker URL TABLE HANDLER_SECONDS
//       runs a PostgresDebouncer<[Int]> worker whose handler prints "started KEY PAYLOAD" and then
//       takes HANDLER_SECONDS (the test kills it meanwhile).
//   pace-postgres-test-instance negative-rate
//       builds a RateLimit with negative permits: a precondition failure naming the parameter.
#if PostgreSQL
import Foundation
import Pace
import PacePostgres
import PostgresNIO

func client(_ text: String) -> PostgresClient {
  guard let url = URL(string: text) else { fatalError("not a URL: \(text)") }
  var logger = Logger(label: "pace-postgres-test-instance")
  logger.logLevel = .critical
  var configuration = PostgresClient.Configuration(
    host: url.host ?? "127.0.0.1",
    port: url.port ?? 5432,
    username: url.user ?? "postgres",
    password: url.password,
    database: url.path.isEmpty ? nil : String(url.path.dropFirst()),
    tls: .disable
  )
  configuration.options.maximumConnections = 10
  return PostgresClient(configuration: configuration, backgroundLogger: logger)
}

func withClient(_ url: String, _ body: @Sendable (PostgresClient) async throws -> Void) async throws {
  let client = client(url)
  try await withThrowingTaskGroup(of: Void.self) { group in
    group.addTask { await client.run() }
    try await body(client)
    group.cancelAll()
  }
}

let arguments = CommandLine.arguments.dropFirst()
switch (arguments.first, arguments.count) {
case ("hammer", 7):
  let values = Array(arguments)
  let (url, table, key) = (values[1], values[2], values[3])
  guard let attempts = Int(values[4]), let permits = Int(values[5]), let seconds = Int64(values[6]) else {
    fatalError("hammer: ATTEMPTS, PERMITS and INTERVAL_SECONDS are integers")
  }
  try await withClient(url) { client in
    let store = try PostgresRateLimitStore(client: client, table: table, timeout: .seconds(60))
    let limit = RateLimit(permits: permits, per: .seconds(seconds))
    let granted = try await withThrowingTaskGroup(of: Int?.self) { group in
      for _ in 0..<attempts {
        group.addTask {
          if case .allowed(let remaining) = try await store.tryAcquire(key, cost: 1, limit: limit) { return remaining }
          return nil
        }
      }
      return try await group.compactMap { $0 }.reduce(into: [Int]()) { $0.append($1) }
    }
    print(granted.map(String.init).joined(separator: "\n"))
  }
case ("debounce-worker", 4):
  let values = Array(arguments)
  guard let seconds = Int64(values[3]) else { fatalError("debounce-worker: HANDLER_SECONDS is an integer") }
  try await withClient(values[1]) { client in
    let debouncer = try PostgresDebouncer<[Int]>(
      client: client, table: values[2], quiet: .milliseconds(100), lease: .seconds(2), merge: .append
    ) { key, payload in
      FileHandle.standardOutput.write(Data("started \(key) \(payload)\n".utf8))
      try await Task.sleep(for: .seconds(seconds))  // real-time: a handler that outlives its process
    }
    try await debouncer.run()
  }
case ("negative-rate", 1):
  let permits = Int(ProcessInfo.processInfo.environment["PACE_PERMITS"] ?? "-1") ?? -1
  print(RateLimit(permits: permits, per: .seconds(1)))
default:
  FileHandle.standardError.write(Data("usage: see the comment at the top of main.swift\n".utf8))
  exit(64)
}
#else
print("pace-postgres-test-instance needs the PostgreSQL trait: swift build --traits PostgreSQL")
#endif
