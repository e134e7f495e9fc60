// An example server, as a team would deploy it: Pace's rate-limit middleware and debouncer on
// Hummingbird, limits shared through PostgreSQL, logs through swift-log, Prometheus metrics, and a
// graceful shutdown on SIGTERM and SIGINT.
//
//   swift run --traits PostgreSQL,Hummingbird pace-example-server                     # in memory
//   swift run --traits PostgreSQL,Hummingbird pace-example-server --postgres URL      # shared
//   swift run --traits PostgreSQL,Hummingbird pace-example-server --help
//
// Try it:
//   curl -i localhost:8080/                                  # limited per client address
//   curl -i -H 'X-API-Key: demo' localhost:8080/             # a known key (--api-key demo) has its own bucket
//   curl -i -X POST localhost:8080/documents/42/changed      # changes debounced into one reindex
//   curl localhost:8080/metrics                              # Prometheus text format
import ArgumentParser
import Foundation

#if PostgreSQL && Hummingbird
import HTTPTypes
import Hummingbird
import Logging
import Metrics
import NIOCore
import Pace
import PaceHummingbird
import PacePostgres
import PostgresNIO
import Prometheus
import ServiceLifecycle
import UnixSignals

@main
struct PaceExampleServer: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "pace-example-server",
    abstract: "Rate limits and debounced work on Hummingbird, in memory or shared through PostgreSQL."
  )

  @Option(help: "The address to listen on.")
  var host = "127.0.0.1"

  @Option(help: "The port to listen on.")
  var port = 8080

  @Option(help: "A postgres:// URL: limits and debouncing shared by every instance on that database.")
  var postgres: String?

  @Option(help: "Requests allowed per key in each period.")
  var permits = 10

  @Option(help: "The period, in seconds.")
  var per: Int64 = 60

  @Option(
    name: .customLong("api-key"),
    help: "An API key clients may send in X-API-Key (repeatable); each known key has its own bucket.")
  var apiKeys: [String] = []

  @Option(help: "The log level: trace, debug, info, notice, warning, error or critical.")
  var logLevel = "info"

  mutating func validate() throws {
    guard (0...65535).contains(port) else { throw ValidationError("--port takes a port number") }
    guard permits > 0 else { throw ValidationError("--permits takes a positive number") }
    guard per > 0, per <= 86_400 * 365 else { throw ValidationError("--per takes a number of seconds, up to a year") }
    guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("--log-level: unknown level \(logLevel)") }
    if let postgres {
      guard let url = URL(string: postgres), url.scheme?.hasPrefix("postgres") == true, url.host != nil else {
        throw ValidationError("--postgres takes a postgres://user@host:port/database URL")
      }
    }
  }

  func run() async throws {
    let level = Logger.Level(rawValue: logLevel) ?? .info
    // One line per event on standard output, flushed at each line, as log collectors expect.
    LoggingSystem.bootstrap { label in
      var handler = StreamLogHandler.standardOutput(label: label)
      handler.logLevel = level
      return handler
    }
    let registry = PrometheusCollectorRegistry()
    MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
    let logger = Logger(label: "pace-example-server")
    let limit = RateLimit(permits: permits, per: .seconds(per))
    let configuration = ApplicationConfiguration(address: .hostname(host, port: port))
    var services: [any Service] = []
    let limiter: KeyedRateLimiter<String>
    let reindexer: any Reindexer

    if let postgres, let url = URL(string: postgres) {
      let client = PostgresClient(configuration: Self.clientConfiguration(url), backgroundLogger: logger)
      // Each instance enforces the limit alone while the database is down, rather than refusing all.
      let fallback = KeyedRateLimiter<String>(permits: limit.permits, per: limit.interval, burst: limit.burst)
      // Decisions on connections of the store's own: they reconnect as soon as the database is back.
      let store = try PostgresRateLimitStore(
        client: client, whenUnavailable: .fallback(fallback), directConnection: try Self.connectionConfiguration(url),
        logger: logger)
      limiter = KeyedRateLimiter(permits: limit.permits, per: limit.interval, burst: limit.burst, store: store)
      let debouncer = try PostgresDebouncer<[Int]>(
        client: client, quiet: .seconds(2), maxWait: .seconds(10), merge: .append, logger: logger
      ) { _, ids in
        logger.info("reindexing documents", metadata: ["documents": "\(ids)"])
      }
      reindexer = SharedReindexer(debouncer: debouncer)
      // The client must run before anything can migrate: its own task, then the service group.
      try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { await client.run() }
        defer { group.cancelAll() }
        try await store.migrate()
        try await debouncer.migrate()
        logger.notice(
          "limits and debouncing shared through PostgreSQL",
          metadata: ["postgres.host": "\(url.host ?? "?")", "postgres.port": "\(url.port ?? 5432)"])
        services = [store, debouncer]
        try await serve(limiter: limiter, reindexer: reindexer, services: services, limit: limit,
          registry: registry, configuration: configuration, logger: logger)
      }
    } else {
      limiter = KeyedRateLimiter<String>(permits: limit.permits, per: limit.interval, burst: limit.burst)
      reindexer = LocalReindexer(logger: logger)
      try await serve(limiter: limiter, reindexer: reindexer, services: [], limit: limit,
        registry: registry, configuration: configuration, logger: logger)
    }
  }

  /// Runs the application and `services` in one service group that shuts down gracefully on
  /// SIGTERM and SIGINT: the server stops taking requests first, then the services stop.
  func serve(
    limiter: KeyedRateLimiter<String>,
    reindexer: any Reindexer,
    services: [any Service],
    limit: RateLimit,
    registry: PrometheusCollectorRegistry,
    configuration: ApplicationConfiguration,
    logger: Logger
  ) async throws {
    let router = makeRouter(limiter: limiter, reindexer: reindexer, registry: registry, logger: logger)
    let app = Application(router: router, configuration: configuration, logger: logger)
    logger.notice("listening", metadata: ["address": "http://\(host):\(port)", "limit": "\(limit) per key"])
    let group = ServiceGroup(
      configuration: ServiceGroupConfiguration(
        services: services.map { ServiceGroupConfiguration.ServiceConfiguration(service: $0) }
          + [ServiceGroupConfiguration.ServiceConfiguration(service: app)],
        gracefulShutdownSignals: [.sigterm, .sigint],
        logger: logger
      ))
    try await group.run()
  }

  /// The key a request counts against: a known API key's own bucket, one strict bucket shared by
  /// every unknown key (so that inventing keys gains nothing), or the peer's address. Never nil:
  /// no request is unlimited.
  func makeRouter(
    limiter: KeyedRateLimiter<String>,
    reindexer: any Reindexer,
    registry: PrometheusCollectorRegistry,
    logger: Logger
  ) -> Router<ExampleContext> {
    let router = Router(context: ExampleContext.self)
    let known = Set(apiKeys)
    let apiKey = HTTPField.Name("X-API-Key")!
    router.get("/metrics") { _, _ in
      Response(
        status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
        body: ResponseBody(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer())))
    }
    let limited = router.group()
      .add(
        middleware: RateLimitMiddleware(limiter: limiter, logger: logger) { request, context in
          if let key = request.headers[apiKey] { return known.contains(key) ? "key:\(key)" : "unknown-api-keys" }
          return "ip:\(context.remoteAddress?.ipAddress ?? "unknown")"
        })
    limited.get("/") { _, _ in "Hello from Pace\n" }
    limited.post("/documents/:id/changed") { _, context -> HTTPResponse.Status in
      let id = try context.parameters.require("id", as: Int.self)
      try await reindexer.changed(id)
      return .accepted
    }
    return router
  }

  static func connectionConfiguration(_ url: URL) throws -> PostgresConnection.Configuration {
    PostgresConnection.Configuration(
      host: url.host ?? "127.0.0.1", port: url.port ?? 5432, username: url.user ?? "postgres",
      password: url.password, database: url.path.isEmpty ? nil : String(url.path.dropFirst()),
      tls: .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
    )
  }

  static func clientConfiguration(_ url: URL) -> PostgresClient.Configuration {
    PostgresClient.Configuration(
      host: url.host ?? "127.0.0.1", port: url.port ?? 5432, username: url.user ?? "postgres",
      password: url.password, database: url.path.isEmpty ? nil : String(url.path.dropFirst()),
      tls: .prefer(.makeClientConfiguration())
    )
  }
}

/// A request context that knows the client's address, to limit requests by it.
struct ExampleContext: RequestContext, RemoteAddressRequestContext {
  var coreContext: CoreRequestContextStorage
  let remoteAddress: SocketAddress?

  init(source: ApplicationRequestContextSource) {
    coreContext = .init(source: source)
    remoteAddress = source.channel.remoteAddress
  }
}

/// Reindexes documents; the calls are debounced, so a burst of changes is one reindex.
protocol Reindexer: Sendable {
  func changed(_ id: Int) async throws
}

/// In one process: Pace's `Debouncer`.
struct LocalReindexer: Reindexer {
  let debouncer: Debouncer<[Int]>

  init(logger: Logger) {
    debouncer = Debouncer<[Int]>(for: .seconds(2), maxWait: .seconds(10), merge: .append, scheduler: .queue(.global())) {
      logger.info("reindexing documents", metadata: ["documents": "\($0)"])
    }
  }

  func changed(_ id: Int) { debouncer.call([id]) }
}

/// Across instances: `PostgresDebouncer`.
struct SharedReindexer: Reindexer {
  let debouncer: PostgresDebouncer<[Int]>
  func changed(_ id: Int) async throws { try await debouncer.call("search-index", [id]) }
}

#else
@main
struct PaceExampleServer: ParsableCommand {
  func run() throws {
    print("pace-example-server needs the PostgreSQL and Hummingbird traits:")
    print("  swift run --traits PostgreSQL,Hummingbird pace-example-server [--postgres postgres://…]")
  }
}
#endif
