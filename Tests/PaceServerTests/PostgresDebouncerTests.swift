#if PostgreSQL && Hummingbird
import Foundation
import Pace
import PacePostgres
import PostgresNIO
import Testing

/// What the handlers ran, across instances.
actor Executions {
  private(set) var all: [(key: String, payload: [Int])] = []
  private var failuresToInject = 0

  func record(_ key: String, _ payload: [Int]) throws {
    if failuresToInject > 0 {
      failuresToInject -= 1
      throw InjectedFailure()
    }
    all.append((key, payload))
  }

  func failNext(_ count: Int) { failuresToInject = count }

  var payloads: [Int] { all.flatMap(\.payload) }

  struct InjectedFailure: Error {}
}

/// Polls `condition` every 20 ms until it holds or `timeout` passes. real-time: callers allow generous timeouts.
func eventually(within timeout: Duration = .seconds(10), _ condition: () async -> Bool) async throws -> Bool {
  let clock = ContinuousClock()
  let deadline = clock.now + timeout
  while clock.now < deadline {
    if await condition() { return true }
    try await Task.sleep(for: .milliseconds(20))  // real-time: polling a real database, generous bound
  }
  return await condition()
}

@Suite("PostgresDebouncer, on a real PostgreSQL server", .databaseTestTimeLimit)
struct PostgresDebouncerTests {
  func debouncers(
    _ clients: [PostgresClient],
    table: String,
    quiet: Duration = .milliseconds(400),
    maximumWait: Duration? = nil,
    lease: Duration = .seconds(2),
    executions: Executions
  ) throws -> [PostgresDebouncer<[Int]>] {
    try clients.map { client in
      try PostgresDebouncer<[Int]>(
        client: client, table: table, quiet: quiet, maximumWait: maximumWait, lease: lease, merge: .append,
        pollInterval: .milliseconds(20)
      ) { key, payload in try await executions.record(key, payload) }
    }
  }

  /// Runs every debouncer's worker while `body` runs.
  func running<Result: Sendable>(
    _ debouncers: [PostgresDebouncer<[Int]>],
    _ body: @Sendable () async throws -> Result
  ) async throws -> Result {
    try await withThrowingTaskGroup(of: Result?.self) { group in
      for debouncer in debouncers {
        group.addTask {
          try await debouncer.run()
          return nil
        }
      }
      defer { group.cancelAll() }
      return try await body()
    }
  }

  // real-time: four instances call one key 25 times each within a burst much shorter than the
  // quiet period (2 s: a call on a machine beside busy processes can take a few hundred
  // milliseconds); one execution receives all 100 payloads, each instance's in its call order.
  @Test func fourInstancesExecuteOncePerQuietPeriodWithEveryPayload() async throws {
    let executions = Executions()
    try await TestDatabase.withClients(4, connections: 4) { clients in
      let debouncers = try debouncers(
        clients, table: TestDatabase.uniqueTable("db"), quiet: .seconds(2), executions: executions)
      try await debouncers[0].migrate()
      try await debouncers[1].migrate()  // idempotent
      try await running(debouncers) {
        for burst in 0..<2 {
          try await withThrowingTaskGroup(of: Void.self) { group in
            for (instance, debouncer) in debouncers.enumerated() {
              group.addTask {
                for call in 0..<25 { try await debouncer.call("reindex", [burst * 100 + instance * 25 + call]) }
              }
            }
            try await group.waitForAll()
          }
          #expect(try await eventually { await executions.all.count == burst + 1 })
        }
        try await Task.sleep(for: .milliseconds(600))  // real-time: nothing else runs after the quiet period
      }
      let all = await executions.all
      #expect(all.count == 2)
      for (burst, execution) in all.enumerated() {
        #expect(execution.key == "reindex")
        #expect(execution.payload.sorted() == Array(burst * 100..<burst * 100 + 100))
        for instance in 0..<4 {
          let own = execution.payload.filter { ($0 % 100) / 25 == instance }
          #expect(own == own.sorted(), "instance \(instance)'s payloads out of call order")
        }
      }
    }
  }

  // real-time: calls every 40 ms for 1.2 s never leave a quiet period of 300 ms, so only maximumWait
  // (500 ms) makes them run; every payload is executed exactly once.
  @Test func maximumWaitBoundsTheDelayOfAContinuousStream() async throws {
    let executions = Executions()
    try await TestDatabase.withClients(2, connections: 4) { clients in
      let debouncers = try debouncers(
        clients, table: TestDatabase.uniqueTable("db"), quiet: .milliseconds(300), maximumWait: .milliseconds(500),
        executions: executions)
      try await debouncers[0].migrate()
      try await running(debouncers) {
        for call in 0..<30 {
          try await debouncers[call % 2].call("stream", [call])
          try await Task.sleep(for: .milliseconds(40))  // real-time: calls 40 ms apart on the database's clock
        }
        #expect(try await eventually { await executions.payloads.count == 30 })
      }
      let all = await executions.all
      #expect(all.count >= 2, "maximumWait should have run the stream before it ended: \(all)")
      #expect(all.flatMap(\.payload) == Array(0..<30))
    }
  }

  /// An instance (a separate process) dies mid-execution; after its lease another runs the same
  /// payloads, and they are acknowledged once.
  @Test func aKilledInstancesWorkRunsElsewhereAfterTheLease() async throws {
    let url = try TestDatabase.url()
    let table = TestDatabase.uniqueTable("db")
    let executions = Executions()
    try await TestDatabase.withClients { clients in
      let debouncer = try debouncers(
        clients, table: table, quiet: .milliseconds(100), lease: .seconds(2), executions: executions)[0]
      try await debouncer.migrate()
      for value in [1, 2, 3] { try await debouncer.call("k", [value]) }
      let doomed = try TestInstance(["debounce-worker", url.absoluteString, table, "60"])
      let started = try await doomed.readLine(within: .seconds(20))
      #expect(started == "started k [1, 2, 3]")
      kill(doomed.process.processIdentifier, SIGKILL)
      let clock = ContinuousClock()
      let killedAt = clock.now
      let ran = try await running([debouncer]) { try await eventually { await executions.all.count == 1 } }
      #expect(ran)
      // Not before the dead instance's lease ended (it was claimed before the kill).
      #expect(clock.now - killedAt > .milliseconds(500))
      #expect(await executions.all.map(\.payload) == [[1, 2, 3]])
      #expect(try await debouncer.runDue() == 0)
    }
  }

  @Test func aFailingHandlerIsRetriedWithTheSamePayloads() async throws {
    let executions = Executions()
    await executions.failNext(1)
    try await TestDatabase.withClients { clients in
      let debouncer = try debouncers(
        clients, table: TestDatabase.uniqueTable("db"), quiet: .milliseconds(50), executions: executions)[0]
      try await debouncer.migrate()
      try await debouncer.call("k", [1])
      try await debouncer.call("k", [2])
      let ran = try await running([debouncer]) { try await eventually { await executions.all.count == 1 } }
      #expect(ran)
      #expect(await executions.all.map(\.payload) == [[1, 2]])
    }
  }

  @Test func badInputIsAClearErrorAndRecordsNothing() async throws {
    let executions = Executions()
    try await TestDatabase.withClients { clients in
      let debouncer = try PostgresDebouncer<[Int]>(
        client: clients[0], table: TestDatabase.uniqueTable("db"), quiet: .zero, merge: .append,
        maximumPayloadBytes: 64
      ) { key, payload in try await executions.record(key, payload) }
      try await debouncer.migrate()
      await #expect(throws: InvalidInput.emptyKey) { try await debouncer.call("", [1]) }
      await #expect(throws: PacePostgresError.payloadTooLarge(bytes: 291, limit: 64)) {
        try await debouncer.call("k", Array(0..<100))
      }
      #expect(throws: PacePostgresError.invalidTableName("1bad")) {
        try PostgresDebouncer<[Int]>(client: clients[0], table: "1bad", quiet: .zero) { _, _ in }
      }
      #expect(try await debouncer.runDue() == 0)
      try await debouncer.call("k", [7])
      #expect(try await debouncer.runDue() == 1)
      #expect(await executions.all.map(\.payload) == [[7]])
    }
  }

  /// Negative rates are precondition failures naming the parameter (in a separate process).
  @Test func aNegativeRateStopsWithAMessageNamingTheParameter() async throws {
    let result = await (try TestInstance(["negative-rate"])).finish()
    #expect(result.reason == .uncaughtSignal)
    #expect(result.errors.contains("permits must be positive (got -1)"))
  }

  /// The server drops the connections mid-stream: each call either succeeds (and its payload is
  /// executed) or throws a clear error; nothing that succeeded is lost.
  @Test func aDroppedConnectionLosesNoAcknowledgedCall() async throws {
    let url = try TestDatabase.url()
    let executions = Executions()
    var configuration = TestDatabase.configuration(url, connections: 2)
    configuration.options.additionalStartupParameters = [("application_name", "pace_dropped")]
    let victim = PostgresClient(configuration: configuration, backgroundLogger: TestDatabase.quietLogger)
    try await TestDatabase.withClients { clients in
      try await TestDatabase.running([victim]) {
        let debouncer = try PostgresDebouncer<[Int]>(
          client: victim, table: TestDatabase.uniqueTable("db"), quiet: .zero, merge: .append, timeout: .seconds(10)
        ) { key, payload in try await executions.record(key, payload) }
        try await debouncer.migrate()
        var acknowledged: [Int] = []
        var failures: [PacePostgresError] = []
        for value in 0..<40 {
          if value % 10 == 5 {
            try await clients[0].query(
              "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'pace_dropped'")
          }
          do {
            try await debouncer.call("k", [value])
            acknowledged.append(value)
          } catch let error as PacePostgresError {
            failures.append(error)
          }
        }
        for failure in failures {
          guard case .unavailable = failure else {
            Issue.record("a dropped connection should be .unavailable, got \(failure)")
            continue
          }
        }
        while try await debouncer.runDue() > 0 {}
        let executed = Set(await executions.payloads)
        #expect(Set(acknowledged).isSubset(of: executed))
        #expect(acknowledged.count >= 30)
      }
    }
  }
}

extension TestInstance {
  /// The next line of the instance's standard output, waiting up to `timeout`: read on a thread
  /// of its own, which a read that never ends (the instance writes nothing) leaves blocked until
  /// the instance exits, rather than a thread of the cooperative pool or this call.
  func readLine(within timeout: Duration) async throws -> String? {
    let handle = output.fileHandleForReading
    let (lines, sink) = AsyncStream<String?>.makeStream()
    let reader = Thread {
      var line = Data()
      while true {
        let byte = handle.readData(ofLength: 1)
        if byte.isEmpty || byte == Data("\n".utf8) { break }
        line.append(byte)
      }
      sink.yield(String(decoding: line, as: UTF8.self))
      sink.finish()
    }
    reader.start()
    let timer = Task {
      try await Task.sleep(for: timeout)  // real-time: a bound on reading a process, never a wait in a passing run
      sink.yield(nil)
      sink.finish()
    }
    defer { timer.cancel() }
    for await line in lines { return line }
    return nil
  }
}
#endif
