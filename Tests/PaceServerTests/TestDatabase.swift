#if PostgreSQL && Hummingbird
import Foundation
import PostgresNIO
import Testing

/// The throwaway database that Scripts/with-postgres.sh starts, and helpers to talk to it.
enum TestDatabase {
  /// The database's URL, from `PACE_POSTGRES_URL`; records a failure naming the script when absent.
  static func url(sourceLocation: SourceLocation = #_sourceLocation) throws -> URL {
    guard let text = ProcessInfo.processInfo.environment["PACE_POSTGRES_URL"], let url = URL(string: text) else {
      let message = """
        PACE_POSTGRES_URL is not set: PaceServerTests need a PostgreSQL server. Run them with \
        `Scripts/with-postgres.sh swift test --traits PostgreSQL,Hummingbird --filter PaceServerTests`
        """
      Issue.record(Comment(rawValue: message), sourceLocation: sourceLocation)
      throw TestDatabaseMissing()
    }
    return url
  }

  struct TestDatabaseMissing: Error {}

  /// A client configuration for `url`: no TLS (loopback), a pool of `connections`.
  static func configuration(_ url: URL, connections: Int = 20, port: Int? = nil) -> PostgresClient.Configuration {
    var configuration = PostgresClient.Configuration(
      host: url.host ?? "127.0.0.1",
      port: port ?? url.port ?? 5432,
      username: url.user ?? "postgres",
      password: url.password,
      database: url.path.isEmpty ? nil : String(url.path.dropFirst()),
      tls: .disable
    )
    configuration.options.maximumConnections = connections
    configuration.options.connectTimeout = .seconds(2)
    return configuration
  }

  /// Runs `body` with `count` clients, each with its own connection pool (an "instance" each).
  static func withClients<Result: Sendable>(
    _ count: Int = 1,
    connections: Int = 20,
    port: Int? = nil,
    _ body: @Sendable ([PostgresClient]) async throws -> Result
  ) async throws -> Result {
    let url = try url()
    let clients = (0..<count).map { _ in
      PostgresClient(
        configuration: configuration(url, connections: connections, port: port),
        backgroundLogger: quietLogger
      )
    }
    return try await withThrowingTaskGroup(of: Result?.self) { group in
      for client in clients { group.addTask { await client.run(); return nil } }
      defer { group.cancelAll() }
      return try await body(clients)
    }
  }

  /// A logger for the clients' background work that keeps the expected connection failures quiet.
  static var quietLogger: Logger {
    var logger = Logger(label: "pace.tests.postgres")
    logger.logLevel = .critical
    return logger
  }

  /// A fresh table name per test, so that tests share the database without sharing state.
  static func uniqueTable(_ prefix: String) -> String {
    "\(prefix)_\(UInt32.random(in: 0...UInt32.max))"
  }

  /// A loopback port on which nothing listens (bound, then released).
  static func closedPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    try withUnsafeMutablePointer(to: &address) { pointer in
      try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
        guard bind(fd, socketAddress, length) == 0, getsockname(fd, socketAddress, &length) == 0 else {
          throw POSIXError(.EADDRINUSE)
        }
      }
    }
    return Int(UInt16(bigEndian: address.sin_port))
  }
}

/// Runs `pace-postgres-test-instance` (a separate process: its own pool, its own memory) and returns its
/// standard output, its standard error and how it ended.
struct TestInstance {
  let process = Process()
  let output = Pipe()
  let errors = Pipe()

  /// The executable, built beside the test bundle.
  static var executable: URL {
    URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
      .appendingPathComponent("pace-postgres-test-instance")
  }

  init(_ arguments: [String]) throws {
    process.executableURL = Self.executable
    process.arguments = arguments
    process.standardOutput = output
    process.standardError = errors
    try process.run()
  }

  /// Waits for the process to end; `(stdout, stderr, status, reason)`.
  func finish() async -> (output: String, errors: String, status: Int32, reason: Process.TerminationReason) {
    let process = self.process
    let outputHandle = output.fileHandleForReading
    let errorHandle = errors.fileHandleForReading
    return await Task.detached {
      let output = String(decoding: outputHandle.readDataToEndOfFile(), as: UTF8.self)
      let errors = String(decoding: errorHandle.readDataToEndOfFile(), as: UTF8.self)
      process.waitUntilExit()
      return (output, errors, process.terminationStatus, process.terminationReason)
    }.value
  }
}
#endif
