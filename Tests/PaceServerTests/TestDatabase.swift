#if PostgreSQL && Hummingbird
import Foundation
import Pace
@testable import PacePostgres
import PostgresNIO
import Testing

/// The throwaway database that Scripts/with-postgres.sh starts, and helpers to talk to it.
enum TestDatabase {
  /// The database's URL, from `PACE_POSTGRES_URL`; records a failure naming the script when absent.
  static func url(sourceLocation: SourceLocation = #_sourceLocation) throws -> URL {
    guard let text = ProcessInfo.processInfo.environment["PACE_POSTGRES_URL"], let url = URL(string: text) else {
      let message = """
        PACE_POSTGRES_URL is not set: PaceServerTests need a PostgreSQL server. Run them with \
        `Scripts/with-postgres.sh swift test --traits PostgreSQL,Hummingbird,Vapor --filter PaceServerTests`
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
  /// `body` with a client, a store on a table of its own (named from `prefix`), migrated, and the
  /// table's name.
  static func withMigratedStore(
    _ prefix: String, _ body: @Sendable (PostgresClient, PostgresRateLimitStore, TableName) async throws -> Void
  ) async throws {
    try await withClients { clients in
      let table = try TableName(uniqueTable(prefix))
      let store = try PostgresRateLimitStore(client: clients[0], table: table.name)
      try await store.migrate()
      try await body(clients[0], store, table)
    }
  }

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
    return try await running(clients) { try await body(clients) }
  }

  /// Runs `store` (its ``PostgresRateLimitStore/run()``: the lanes, the watchdog, the purge) while
  /// `body` runs, from the moment its lanes run, then stops it and waits for `run()` to return.
  static func running<Result: Sendable>(
    _ store: PostgresRateLimitStore, _ body: @Sendable () async throws -> Result
  ) async throws -> Result {
    let (started, start) = AsyncStream<Void>.makeStream()
    let run = Task {
      defer { start.finish() }  // also when run() returns at once
      try await store.run(started: {
        start.yield()
        start.finish()
      })
    }
    for await _ in started {}
    let result: Swift.Result<Result, any Error>
    do {
      result = .success(try await body())
    } catch {
      result = .failure(error)
    }
    run.cancel()
    try await run.value
    return try result.get()
  }

  /// Runs `clients` while `body` runs, then stops them, waiting at most 10 s for each to stop: a
  /// client whose `run()` ignores the cancellation is left behind (with a note on standard error)
  /// rather than hanging the test process. At most ``concurrentTests`` tests run their clients at
  /// once (see ``gate``).
  static func running<Result: Sendable>(
    _ clients: [PostgresClient],
    _ body: @Sendable () async throws -> Result
  ) async throws -> Result {
    try await gated {
      try await running(services: clients.map { client in { await client.run() } }, body)
    }
  }

  /// How many tests talk to PostgreSQL at once: `PACE_TEST_DATABASE_CONCURRENCY`, 8 by default.
  /// Swift Testing starts every test of the suite at once; on 2 cores, a hundred tests with their
  /// clients and the server they share starve the real-clock tests (heartbeats, leases, outages)
  /// of their bounds. The rest of the suite runs beside them, as before.
  static let concurrentTests =
    ProcessInfo.processInfo.environment["PACE_TEST_DATABASE_CONCURRENCY"].flatMap(Int.init).map { max(1, $0) } ?? 8

  /// The slots of ``concurrentTests``, first come, first served.
  static let gate = TestGate(slots: concurrentTests)

  /// Whether this task runs inside a test's slot already (a test that runs clients inside
  /// ``withClients(_:connections:port:_:)`` takes one slot, not two, which could wait forever).
  @TaskLocal static var holdsSlot = false

  /// Runs `body` in one of the ``gate``'s slots (the caller's, if it holds one).
  static func gated<Result: Sendable>(_ body: @Sendable () async throws -> Result) async throws -> Result {
    if holdsSlot { return try await body() }
    await gate.enter()
    let result: Swift.Result<Result, any Error>
    do {
      result = .success(try await $holdsSlot.withValue(true) { try await body() })
    } catch {
      result = .failure(error)
    }
    await gate.leave()
    return try result.get()
  }

  /// Runs each of `services` (a `run()`: a client's, a limiter's) in a task of its own while
  /// `body` runs, then cancels them and waits at most 10 s for them to stop: one that ignores the
  /// cancellation is left behind (with a note on standard error) rather than hanging the test
  /// process. Throws `body`'s error, else the first error a service's `run()` threw.
  static func running<Result: Sendable>(
    services: [@Sendable () async throws -> Void],
    _ body: @Sendable () async throws -> Result
  ) async throws -> Result {
    let runs = services.map { service in Task { try await service() } }
    let result: Swift.Result<Result, any Error>
    do {
      result = .success(try await body())
    } catch {
      result = .failure(error)
    }
    for run in runs { run.cancel() }
    let (stopped, stop) = AsyncStream<Bool>.makeStream()
    let waiter = Task {
      for run in runs { _ = await run.result }
      stop.yield(true)
      stop.finish()
    }
    let timer = Task {
      try await Task.sleep(for: .seconds(10))  // real-time: a bound, never a wait in a passing run
      stop.yield(false)
      stop.finish()
    }
    var allStopped = false
    for await value in stopped {
      allStopped = value
      break
    }
    timer.cancel()
    waiter.cancel()
    if !allStopped {
      FileHandle.standardError.write(Data("note: a service did not stop within 10 s of its cancellation\n".utf8))
    }
    let value = try result.get()
    if allStopped {
      for run in runs { try await run.value }
    }
    return value
  }

  /// A logger for the clients' background work that keeps the expected connection failures quiet.
  static var quietLogger: Logger {
    var logger = Logger(label: "pace.tests.postgres")
    logger.logLevel = .critical
    return logger
  }

  /// A fresh table name per test, so that tests share the database without sharing state.
  /// An instant, in microseconds since the Unix epoch, for tests that choose the database's clock
  /// (``PostgresRateLimitStore/tryAcquire(_:cost:limit:databaseNow:)``): every window of those
  /// tests divides it, so fixed windows start on it. (2025-11-24 15:00 UTC.)
  static let chosenInstant: Int64 = 1_763_996_400_000_000

  /// `seconds` in microseconds, the unit of the store's instants.
  static func microseconds(_ seconds: Double) -> Int64 { Int64((seconds * 1_000_000).rounded()) }

  static func uniqueTable(_ prefix: String) -> String {
    "\(prefix)_\(UInt32.random(in: 0...UInt32.max))"
  }

  /// A loopback port on which nothing listens (bound, then released).
  static func closedPort() throws -> Int {
    let reserved = try ReservedPort()
    defer { reserved.release() }
    return reserved.port
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

  /// Waits for the process to end; `(stdout, stderr, status, reason)`. The reads and the wait
  /// block, for as long as the process runs: on threads of their own, not on the cooperative
  /// pool, whose two threads (on 2 cores) the rest of the suite needs meanwhile; and each pipe
  /// on its own thread, since a process that fills one pipe while the other is read waits for
  /// ever.
  func finish() async -> (output: String, errors: String, status: Int32, reason: Process.TerminationReason) {
    let process = self.process
    let outputHandle = output.fileHandleForReading
    let errorHandle = errors.fileHandleForReading
    return await withCheckedContinuation { continuation in
      let errorsRead = DispatchSemaphore(value: 0)
      let errorText = LockedState("")
      Thread {
        let text = String(decoding: errorHandle.readDataToEndOfFile(), as: UTF8.self)
        errorText.withLock { $0 = text }
        errorsRead.signal()
      }.start()
      Thread {
        let output = String(decoding: outputHandle.readDataToEndOfFile(), as: UTF8.self)
        errorsRead.wait()
        process.waitUntilExit()
        let errors = errorText.withLock { $0 }
        continuation.resume(returning: (output, errors, process.terminationStatus, process.terminationReason))
      }.start()
    }
  }
}
#endif

#if PostgreSQL && Hummingbird
/// A PostgreSQL cluster of a test's own, which the test stops and starts again: the shared one
/// serves every other test at the same time. Needs `PACE_POSTGRES_BIN` (Scripts/with-postgres.sh).
///
/// Made, started and stopped on threads of their own (``make()``, ``start()``, ``stop()``): each
/// waits for `initdb` or `pg_ctl`, seconds on a loaded machine, and two such waits on the
/// cooperative pool's two threads would stop every other test meanwhile.
final class TestCluster: Sendable {
  let directory: String
  let port: Int
  let bin: String
  let owner: String

  /// A new cluster, started; two at a time (initdb and a first start cost seconds of CPU each,
  /// and the suite's other tests run meanwhile).
  static func make() async throws -> TestCluster {
    await making.enter()
    do {
      let cluster = try await blocking { try TestCluster(waiting: ()) }
      await making.leave()
      return cluster
    } catch {
      await making.leave()
      throw error
    }
  }

  private static let making = TestGate(slots: 2)

  private init(waiting: Void) throws {
    let environment = ProcessInfo.processInfo.environment
    guard let bin = environment["PACE_POSTGRES_BIN"] else {
      Issue.record("PACE_POSTGRES_BIN is not set: run the server tests through Scripts/with-postgres.sh")
      throw TestDatabase.TestDatabaseMissing()
    }
    self.bin = bin
    let owner = environment["PACE_POSTGRES_OWNER"] ?? NSUserName()
    self.owner = owner
    let directory = NSTemporaryDirectory() + "pace-cluster-\(UInt32.random(in: 0...UInt32.max))"
    self.directory = directory
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    try Self.shell("chown \(owner) \(directory) && chmod 700 \(directory)")
    try Self.run("\(bin)/initdb -D \(directory)/data -U \(owner) --auth=trust --no-sync -E UTF8 >/dev/null", as: owner)
    // A port found closed may be taken by another test before the server binds it: another one.
    var attempt = 1
    var port = try TestDatabase.closedPort()
    while true {
      do {
        try Self.run(Self.startCommand(bin: bin, directory: directory, port: port), as: owner)
        break
      } catch  where attempt < 3 {
        attempt += 1
        port = try TestDatabase.closedPort()
      }
    }
    self.port = port
  }

  /// The URL of the cluster's `postgres` database.
  var url: URL { URL(string: "postgres://\(owner)@127.0.0.1:\(port)/postgres")! }

  func start() async throws {
    let (command, owner) = (Self.startCommand(bin: bin, directory: directory, port: port), owner)
    try await Self.blocking { try Self.run(command, as: owner) }
  }

  private static func startCommand(bin: String, directory: String, port: Int) -> String {
    "\(bin)/pg_ctl -D \(directory)/data -l \(directory)/server.log -w -t 60 -o '-h 127.0.0.1 -p \(port) -k \(directory) -c fsync=off' start >/dev/null"
  }

  /// Stops the server at once, as a crash or a failover would.
  func stop() async throws {
    let (command, owner) = (stopCommand, owner)
    try await Self.blocking { try Self.run(command, as: owner) }
  }

  private var stopCommand: String { "\(bin)/pg_ctl -D \(directory)/data -m immediate -w stop >/dev/null" }

  /// Stops the server (at once) and removes its files; from a `defer`, so it waits where it is
  /// called.
  func destroy() {
    try? Self.run(stopCommand, as: owner)
    try? FileManager.default.removeItem(atPath: directory)
  }

  /// Runs `body`, which blocks its thread waiting for a child process, on a thread of its own.
  private static func blocking<Result: Sendable>(
    _ body: @escaping @Sendable () throws -> Result
  ) async throws -> Result {
    try await withCheckedThrowingContinuation { continuation in
      Thread { continuation.resume(with: Swift.Result { try body() }) }.start()
    }
  }

  private static func run(_ command: String, as owner: String) throws {
    let asOwner =
      owner == NSUserName()
      ? command : "runuser -u \(owner) -- sh -c \"\(command.replacingOccurrences(of: "\"", with: "\\\""))\""
    try Self.shell(asOwner)
  }

  /// A command that could not start or failed, named in the test's failure.
  struct ShellFailure: Error, CustomStringConvertible {
    let description: String
  }

  /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which Swift's Glibc
  /// module leaves out (it is declared for `_GNU_SOURCE` only).
  private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
  private static let closeFrom: CloseFrom? =
    dlsym(dlopen(nil, RTLD_NOW), "posix_spawn_file_actions_addclosefrom_np").map {
      unsafeBitCast($0, to: CloseFrom.self)
    }

  /// Runs `command` with `/bin/sh` and waits for it with `waitpid` (Foundation's `Process` can
  /// miss the exit of a child when several run one after another from the cooperative pool).
  ///
  /// The child gets standard input, output and error only: `pg_ctl start` leaves a server running
  /// for the rest of the suite, and every descriptor it inherited would stay open in it. SwiftNIO
  /// opens its sockets without close-on-exec, so a connection another test closed meanwhile would
  /// never reach its peer (a store's closed connection stayed idle on the server, a reset client
  /// kept a response body writing).
  private static func shell(_ command: String) throws {
    var pid: pid_t = 0
    let arguments = ["/bin/sh", "-c", command]
    var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    guard let closeFrom = Self.closeFrom, closeFrom(&actions, 3) == 0 else {
      throw ShellFailure(description: "cannot keep the suite's descriptors from: \(command)")
    }
    guard posix_spawn(&pid, "/bin/sh", &actions, nil, &argv, environ) == 0 else {
      throw ShellFailure(description: "cannot start: \(command)")
    }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
    guard status == 0 else { throw ShellFailure(description: "failed (wait status \(status)): \(command)") }
  }
}
/// The time limit of a suite whose tests take a slot of ``TestDatabase/gate``. Swift Testing counts
/// a test's time from its start, the wait for a slot included, and it starts every test at once:
/// a test may wait behind most of the database tests (100 s on a busy 2-core host) before it runs
/// a statement. The limit is there to end a hang, not to time a slow run.
extension SuiteTrait where Self == TimeLimitTrait {
  static var databaseTestTimeLimit: Self { .timeLimit(.minutes(5)) }
}

/// A counting semaphore for tasks: ``enter()`` waits while every slot is taken, ``leave()`` hands
/// the slot to the longest waiter.
actor TestGate {
  private var free: Int
  private var waiting: [CheckedContinuation<Void, Never>] = []

  init(slots: Int) { free = slots }

  func enter() async {
    if free > 0 {
      free -= 1
      return
    }
    await withCheckedContinuation { waiting.append($0) }
  }

  func leave() {
    if waiting.isEmpty {
      free += 1
    } else {
      waiting.removeFirst().resume()
    }
  }
}
#endif
