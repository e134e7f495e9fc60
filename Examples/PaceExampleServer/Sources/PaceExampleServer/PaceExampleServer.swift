// An example server, as a team would deploy it: Pace's rate-limit middleware and debouncer on
// Hummingbird, limits shared through PostgreSQL, logs through swift-log, Prometheus metrics, and a
// graceful shutdown on SIGTERM and SIGINT.
//
//   swift run pace-example-server                     # in memory
//   swift run pace-example-server --postgres URL      # shared
//   swift run pace-example-server --help
//
// Try it:
//   curl -i localhost:8080/                                  # limited per client address
//   curl -i -H 'X-API-Key: demo' localhost:8080/             # a known key (--api-key demo) has its own bucket
//   curl -i -X POST localhost:8080/documents/42/changed      # changes debounced into one reindex
//   curl localhost:8080/metrics                              # Prometheus text format
//   curl -i localhost:8080/bare                              # the same answer with no limit
import ArgumentParser
import ExampleServerSupport
import Foundation
import HTTPTypes
import Hummingbird
import Logging
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

  @OptionGroup var options: ServerOptions

  func run() async throws {
    let registry = options.bootstrap()
    let logger = Logger(label: "pace-example-server")
    guard let url = options.postgresURL else {
      try await serve(
        store: nil, reindexer: LocalReindexer(logger: logger), services: [], registry: registry, logger: logger)
      return
    }
    let client = ServerOptions.client(url, logger: logger)
    let store = try options.store(client: client, url: url, logger: logger)
    let reindexer = try SharedReindexer(client: client, logger: logger)
    // The client must run before anything can migrate: its own task, then the service group.
    try await withThrowingTaskGroup(of: Void.self) { group in
      group.addTask { await client.run() }
      defer { group.cancelAll() }
      try await store.migrate()
      try await reindexer.debouncer.migrate()
      logger.info(
        "limits and debouncing shared through PostgreSQL",
        metadata: ["postgres.host": "\(url.host ?? "?")", "postgres.port": "\(url.port ?? 5432)"])
      try await serve(
        store: store, reindexer: reindexer, services: [store, reindexer.debouncer], registry: registry, logger: logger)
    }
  }

  /// Runs the application and `services` in one service group that shuts down gracefully on
  /// SIGTERM and SIGINT: the server stops taking requests first, then the services stop. The
  /// limit is decided in memory, or by `store` for every instance.
  func serve(
    store: PostgresRateLimitStore?,
    reindexer: any Reindexer,
    services: [any Service],
    registry: PrometheusCollectorRegistry,
    logger: Logger
  ) async throws {
    let router = makeRouter(store: store, reindexer: reindexer, registry: registry, logger: logger)
    let app = Application(
      router: router, configuration: ApplicationConfiguration(address: .hostname(options.host, port: options.port)),
      logger: logger)
    logger.info(
      "listening", metadata: ["address": "http://\(options.host):\(options.port)", "limit": "\(options.limit) per key"])
    let group = ServiceGroup(
      configuration: ServiceGroupConfiguration(
        services: (services + [app]).map { ServiceGroupConfiguration.ServiceConfiguration(service: $0) },
        gracefulShutdownSignals: [.sigterm, .sigint],
        logger: logger
      ))
    try await group.run()
  }

  func makeRouter(
    store: PostgresRateLimitStore?,
    reindexer: any Reindexer,
    registry: PrometheusCollectorRegistry,
    logger: Logger
  ) -> Router<ExampleContext> {
    let router = Router(context: ExampleContext.self)
    let apiKey = HTTPField.Name("X-API-Key")!
    let options = self.options
    router.get("/metrics") { _, _ in
      Response(
        status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
        body: ResponseBody(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer())))
    }
    // The same answer with no limit, to measure the middleware beside (Scripts/middleware-benchmark.py).
    router.get("/bare") { _, _ in "Hello from Pace\n" }
    let key: @Sendable (Request, ExampleContext) -> String? = { request, context in
      // The peer's address, an IPv6 client keyed by its /64.
      options.key(apiKey: request.headers[apiKey], peer: ClientAddress.peer.key(request, context) ?? "ip:unknown")
    }
    let middleware =
      store.map { RateLimitMiddleware(limiter: options.limiter(store: $0), logger: logger, key: key) }
      ?? RateLimitMiddleware(limiter: options.limiter(), logger: logger, key: key)
    let limited = router.group().add(middleware: middleware)
    limited.get("/") { _, _ in "Hello from Pace\n" }
    limited.post("/documents/:id/changed") { _, context -> HTTPResponse.Status in
      let id = try context.parameters.require("id", as: Int.self)
      try await reindexer.changed(id)
      return .accepted
    }
    return router
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
