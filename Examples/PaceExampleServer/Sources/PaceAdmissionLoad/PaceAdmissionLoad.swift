// Admission control under overload, on real HTTP: a service of fixed capacity (8 at a time, 20 ms
// each: 400 requests per second) behind Pace's Hummingbird middleware, offered more than it can do
// by an open-loop load generator in the same process, with and without a concurrency limit.
//
//   swift run -c release pace-admission-load                      # every run, 30 s each
//   swift run -c release pace-admission-load --duration 10 --runs baseline,aimd
//
// The runs, one after the other, each on a service of its own:
//   baseline   20 % of capacity, no limit: the unloaded latency
//   unlimited  3x capacity, no limit: the service's queue grows and answers come too late
//   aimd       3x capacity, an AdaptiveLimit.aimd in front
//   gradient2  3x capacity, an AdaptiveLimit.gradient2 in front
//   priority   3x capacity, the AIMD limit with priority classes (X-Priority: critical, default,
//              sheddable), the lower classes allowed less of the limit
//
// Goodput is the requests answered 200 within the client's timeout, per second of the run; the
// latency is from the instant a request was due, so that a late generator does not hide it.
import ArgumentParser
import AsyncHTTPClient
import HTTPTypes
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Pace
import PaceHummingbird

@main
struct PaceAdmissionLoad: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "pace-admission-load",
    abstract: "A service of fixed capacity offered more than it can do, with and without an adaptive concurrency limit."
  )

  @Option(help: "How long each run offers its load, in seconds.")
  var duration: Int = 30

  @Option(help: "The overloaded runs' offered rate, in multiples of the service's capacity.")
  var multiple: Double = 3

  @Option(help: "The baseline run's offered rate, in percent of the service's capacity.")
  var baselinePercent: Double = 20

  @Option(
    help: "Which runs, comma-separated, from: \(Run.allCases.map(\.rawValue).joined(separator: ", ")); all by default.",
    transform: Run.list)
  var runs: [Run] = Run.allCases

  @Option(help: "How long a client waits for its answer, in milliseconds.")
  var clientTimeout: Int = 1000

  // The adaptive limits' settings are those of the virtual-time simulation in the AdaptiveLimits
  // article (AdaptiveLimitSimulationTests), which runs the same service.
  @Option(help: "AIMD's initial limit.")
  var aimdInitialLimit: Int = 20

  @Option(help: "The round trip above which AIMD counts a request as dropped, in milliseconds.")
  var aimdTimeout: Int = 30

  @Option(help: "Gradient2's initial limit: its first window's round trip is its baseline.")
  var gradient2InitialLimit: Int = 6

  @Option(help: "Gradient2's tolerance: how many times the unloaded round trip still counts as no queueing.")
  var tolerance: Double = 1.25

  @Option(help: "Gradient2's queue size: how many requests may queue in the service beyond its limit.")
  var queueSize: Int = 2

  @Option(
    help: "The priority run's traffic: percent critical, default, sheddable; 10,20,70 by default.",
    transform: PriorityMix.init)
  var priorityMix: PriorityMix = PriorityMix(critical: 10, default: 20, sheddable: 70)

  @Option(help: "The priority run's adaptive limit: aimd or gradient2, with the settings above.")
  var priorityLimit: Algorithm = .aimd

  @Option(
    help:
      "The priority run's shares of the limit: percent for the default class, then for the sheddable one; 80,50 by default.",
    transform: Self.shares)
  var priorityShares = PriorityShares(defaultPercent: 80, sheddablePercent: 50)

  @Option(help: "Seconds of rest between runs.")
  var pause: Int = 3

  @Option(help: "Event-loop threads of the load generator's HTTP client (the server has one per core).")
  var clientThreads: Int = 1

  func validate() throws {
    guard duration > 0 else { throw ValidationError("--duration must be positive (got \(duration))") }
    guard multiple > 0 else { throw ValidationError("--multiple must be positive (got \(multiple))") }
    guard baselinePercent > 0 else { throw ValidationError("--baseline-percent must be positive") }
    guard clientTimeout > 0, aimdTimeout > 0 else { throw ValidationError("timeouts must be positive") }
    guard (1...200).contains(aimdInitialLimit), (1...200).contains(gradient2InitialLimit) else {
      throw ValidationError("initial limits must be within 1...200")
    }
    guard tolerance >= 1 else { throw ValidationError("--tolerance must be at least 1 (got \(tolerance))") }
    guard queueSize >= 0 else { throw ValidationError("--queue-size must not be negative (got \(queueSize))") }
    guard pause >= 0 else { throw ValidationError("--pause must not be negative (got \(pause))") }
    guard clientThreads > 0 else { throw ValidationError("--client-threads must be positive") }
  }

  static func shares(_ argument: String) throws -> PriorityShares {
    let parts = argument.split(separator: ",").compactMap { Int($0) }
    guard parts.count == 2, (0...100).contains(parts[0]), (0...parts[0]).contains(parts[1]) else {
      throw ValidationError(
        "--priority-shares is two percentages, the default class's then the sheddable one's, at most it (got \(argument))"
      )
    }
    return PriorityShares(defaultPercent: parts[0], sheddablePercent: parts[1])
  }

  /// The service: 8 at a time, 20 ms each.
  static let capacity = 8
  static let serviceTime = TimeAmount.milliseconds(20)
  static var capacityPerSecond: Double { Double(capacity) / (Double(serviceTime.nanoseconds) / 1e9) }

  func run() async throws {
    // Faults only: the limits' refusals are the point of the runs, and are counted in the report.
    var logger = Logger(label: "pace-admission-load")
    logger.logLevel = .error
    // The server's own log, but for the cancelled connections of its shutdown at the end.
    var serverLogger = logger
    serverLogger.logLevel = .critical
    let serverGroup = MultiThreadedEventLoopGroup.singleton
    let stands = runs.map { Stand(run: $0, command: self, eventLoopGroup: serverGroup, logger: logger) }
    let router = Router()
    for stand in stands {
      router.group(RouterPath("run/\(stand.run.rawValue)")).add(middleware: stand.middleware).get { _, _ in
        await stand.service.serve() ? Response(status: .ok) : Response(status: .serviceUnavailable)
      }
    }
    let port = ServerPort()
    let app = Application(
      router: router,
      configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0), backlog: 4096),
      onServerRunning: { channel in port.set(channel.localAddress?.port ?? 0) },
      eventLoopGroupProvider: .shared(serverGroup), logger: serverLogger)

    let clientGroup = MultiThreadedEventLoopGroup(numberOfThreads: clientThreads)
    var configuration = HTTPClient.Configuration()
    // Open loop: as many connections as requests in flight, never a queue in the client's pool.
    configuration.connectionPool = .init(idleTimeout: .seconds(30), concurrentHTTP1ConnectionsPerHostSoftLimit: 8192)
    let client = HTTPClient(eventLoopGroupProvider: .shared(clientGroup), configuration: configuration)
    let generator = LoadGenerator(client: client, timeout: .milliseconds(clientTimeout))

    do {
      try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await app.run() }
        let serverPort = try await port.wait(timeout: .seconds(10))
        printHeader(port: serverPort)
        var results: [(Stand, LoadGenerator.Result)] = []
        for (index, stand) in stands.enumerated() {
          if index > 0 { try await Task.sleep(for: .seconds(pause)) }
          let rate =
            stand.run == .baseline ? Self.capacityPerSecond * baselinePercent / 100 : Self.capacityPerSecond * multiple
          print("run \(stand.run.rawValue): \(Int(rate)) requests/s for \(duration) s…")
          let mix = stand.run == .priority ? priorityMix : nil
          let result = await generator.offer(
            url: "http://127.0.0.1:\(serverPort)/run/\(stand.run.rawValue)", rate: rate, duration: .seconds(duration),
            priority: { mix?.priority(of: $0) ?? .default }, limit: stand.limit)
          // The run's backlog, if any, goes: it would load the next run.
          stand.service.close()
          results.append((stand, result))
          print(Report.line(stand: stand, result: result))
        }
        print("")
        print(Report.table(results, capacity: Self.capacityPerSecond, clientTimeout: .milliseconds(clientTimeout)))
        // The client's connections close first, so that the server's shutdown has none to wait for.
        try await client.shutdown()
        group.cancelAll()
      }
    } catch {
      // The client must be shut down before it goes, on every path; a second shutdown only throws.
      try? await client.shutdown()
      try? await clientGroup.shutdownGracefully()
      throw error
    }
    try await clientGroup.shutdownGracefully()
  }

  private func printHeader(port: Int) {
    print(
      """
      pace-admission-load: a service of \(Self.capacity) at a time, \(Self.serviceTime.nanoseconds / 1_000_000) ms \
      each (\(Int(Self.capacityPerSecond)) requests/s), on 127.0.0.1:\(port)
      runs of \(duration) s; overload \(multiple)x capacity; baseline \(baselinePercent) % of capacity; client \
      timeout \(clientTimeout) ms
      aimd: AdaptiveLimit.aimd(initialLimit: \(aimdInitialLimit), timeout: .milliseconds(\(aimdTimeout)))
      gradient2: AdaptiveLimit.gradient2(initialLimit: \(gradient2InitialLimit), tolerance: \(tolerance), \
      queueSize: \(queueSize))
      priority: the \(priorityLimit.rawValue) limit, default \(priorityShares.defaultPercent) % and sheddable \
      \(priorityShares.sheddablePercent) % of it, traffic \(priorityMix)
      """)
  }
}

/// One of the runs.
enum Run: String, CaseIterable, Sendable, ExpressibleByArgument {
  case baseline, unlimited, aimd, gradient2, priority

  static func list(_ argument: String) throws -> [Run] {
    let runs = try argument.split(separator: ",").map { name in
      guard let run = Run(rawValue: String(name)) else { throw ValidationError("no run named \(name)") }
      return run
    }
    // Always in the same order: the baseline first.
    return Run.allCases.filter(runs.contains)
  }
}

/// An adaptive limit's algorithm.
enum Algorithm: String, Sendable, ExpressibleByArgument {
  case aimd, gradient2
}

/// The priority run's traffic: which share of the requests is in which class.
struct PriorityMix: Sendable, CustomStringConvertible {
  let critical: Int
  let `default`: Int
  let sheddable: Int

  init(critical: Int, default: Int, sheddable: Int) {
    self.critical = critical
    self.default = `default`
    self.sheddable = sheddable
  }

  init(_ argument: String) throws {
    let parts = argument.split(separator: ",").compactMap { Int($0) }
    guard parts.count == 3, parts.allSatisfy({ $0 >= 0 }), parts.reduce(0, +) == 100 else {
      throw ValidationError("--priority-mix is three percentages that add up to 100, as 10,20,70 (got \(argument))")
    }
    self.init(critical: parts[0], default: parts[1], sheddable: parts[2])
  }

  /// The class of the `index`-th request: the classes spread evenly over every 100 requests.
  func priority(of index: Int) -> AdmissionPriority {
    // 37 is prime to 100: consecutive requests land far apart in 0..<100.
    let slot = index % 100 * 37 % 100
    if slot < critical { return .critical }
    if slot < critical + self.default { return .default }
    return .sheddable
  }

  var description: String { "\(critical) % critical, \(self.default) % default, \(sheddable) % sheddable" }
}

/// A run's service and the middleware in front of it.
struct Stand: Sendable {
  let run: Run
  let service: FixedCapacityService
  let middleware: RateLimitMiddleware<BasicRequestContext>
  /// The adaptive limit's current value, for a run that has one.
  let limit: (@Sendable () -> Int)?

  init(run: Run, command: PaceAdmissionLoad, eventLoopGroup: any EventLoopGroup, logger: Logger) {
    self.run = run
    service = FixedCapacityService(
      capacity: PaceAdmissionLoad.capacity, serviceTime: PaceAdmissionLoad.serviceTime, eventLoopGroup: eventLoopGroup)
    // Every run goes through the same middleware; a rate limit no request reaches, since a
    // middleware has at least one policy; the concurrency limit is what differs.
    let open = RateLimitMiddleware<BasicRequestContext>(
      limit: RateLimit(permits: 1_000_000, per: .seconds(1)), logger: logger, key: { _, _ in "load" })
    let adaptive: AdaptiveConcurrencyLimiter?
    switch run {
    case .baseline, .unlimited:
      adaptive = nil
    case .aimd:
      adaptive = AdaptiveConcurrencyLimiter(Self.aimd(command))
    case .gradient2:
      adaptive = AdaptiveConcurrencyLimiter(Self.gradient2(command))
    case .priority:
      let limit = command.priorityLimit == .aimd ? Self.aimd(command) : Self.gradient2(command)
      adaptive = AdaptiveConcurrencyLimiter(limit, shares: command.priorityShares)
    }
    guard let adaptive else {
      middleware = open
      limit = nil
      return
    }
    let priority = HTTPField.Name("X-Priority")!
    middleware = open.limitingConcurrency(
      RequestConcurrencyLimit(limiter: adaptive, logger: logger) { request, _ in
        switch request.headers[priority] {
        case "critical": .critical
        case "sheddable": .sheddable
        default: .default
        }
      })
    limit = { adaptive.maximumInFlight }
  }

  static func aimd(_ command: PaceAdmissionLoad) -> AdaptiveLimit {
    .aimd(initialLimit: command.aimdInitialLimit, timeout: .milliseconds(command.aimdTimeout))
  }

  static func gradient2(_ command: PaceAdmissionLoad) -> AdaptiveLimit {
    .gradient2(initialLimit: command.gradient2InitialLimit, tolerance: command.tolerance, queueSize: command.queueSize)
  }
}

/// The server's port, once it listens.
final class ServerPort: Sendable {
  private let port = NIOLockedValueBox<Int?>(nil)

  func set(_ value: Int) { port.withLockedValue { $0 = value } }

  /// The port, once the server listens.
  ///
  /// - Throws: ``ServerDidNotStart`` after `timeout`.
  func wait(timeout: Duration) async throws -> Int {
    let deadline = ContinuousClock.now.advanced(by: timeout)
    while ContinuousClock.now < deadline {
      if let port = port.withLockedValue({ $0 }) { return port }
      try await Task.sleep(for: .milliseconds(10))
    }
    throw ServerDidNotStart(timeout: timeout)
  }
}

/// The server did not listen in time (its own error, if any, is in its log).
struct ServerDidNotStart: Error, CustomStringConvertible {
  let timeout: Duration
  var description: String { "the server did not start listening within \(timeout)" }
}
