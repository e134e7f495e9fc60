// The example server on Vapor: the same routes, limits and responses as pace-example-server, with
// PaceVapor's middleware, and the PostgreSQL client, the store's purge and the debouncer's worker
// running under Vapor's lifecycle. Vapor shuts down gracefully on SIGTERM and SIGINT.
//
//   swift run pace-example-server-vapor                     # in memory
//   swift run pace-example-server-vapor --postgres URL      # shared
//   swift run pace-example-server-vapor --trusted-proxy 127.0.0.1   # behind a local proxy (or a range: 10.0.0.0/8)
import ArgumentParser
import ExampleServerSupport
import Logging
import Pace
import PacePostgres
import PaceVapor
import PostgresNIO
import Prometheus
import ServiceLifecycle
import Vapor

@main
struct PaceExampleServerVapor: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "pace-example-server-vapor",
    abstract: "Rate limits and debounced work on Vapor, in memory or shared through PostgreSQL."
  )

  @ArgumentParser.OptionGroup var options: ServerOptions

  @ArgumentParser.Option(
    name: .customLong("trusted-proxy"),
    help: "A proxy's IP address or CIDR range whose X-Forwarded-For names the client (repeatable); none by default.")
  var trustedProxies: [String] = []

  func run() async throws {
    let registry = options.bootstrap()
    // Vapor's own command line is not this one: it runs its default command, serve.
    let app = try await Application.make(Environment(name: "production", arguments: ["pace-example-server-vapor"]))
    app.http.server.configuration.hostname = options.host
    app.http.server.configuration.port = options.port
    do {
      try configure(app, registry: registry)
      try await app.execute()
    } catch {
      app.logger.report(error: error)
      // The first error is the one to exit with; a failed shutdown after it is logged, not lost.
      do {
        try await app.asyncShutdown()
      } catch let shutdownError {
        app.logger.error(
          "shutting down after the error failed", metadata: ["error": "\(String(reflecting: shutdownError))"])
      }
      throw error
    }
    try await app.asyncShutdown()
  }

  func configure(_ app: Application, registry: PrometheusCollectorRegistry) throws {
    let store: PostgresRateLimitStore?
    let reindexer: any Reindexer
    if let url = options.postgresURL {
      let client = ServerOptions.client(url, logger: app.logger)
      let shared = try options.store(client: client, url: url, logger: app.logger)
      let debounced = try SharedReindexer(client: client, logger: app.logger)
      // The client first, so that it closes last; the migrations once it runs.
      app.lifecycle.use(
        ServiceLifecycleHandler(services: [client, shared, debounced.debouncer]) {
          try await shared.migrate()
          try await debounced.debouncer.migrate()
        })
      store = shared
      reindexer = debounced
    } else {
      store = nil
      reindexer = LocalReindexer(logger: app.logger)
    }
    app.get("metrics") { _ in
      Response(
        status: .ok, headers: ["Content-Type": "text/plain; version=0.0.4"],
        body: .init(string: String(decoding: registry.emitToBuffer(), as: UTF8.self)))
    }
    // The same answer with no limit, to measure the middleware beside (Scripts/middleware-benchmark.py).
    app.get("bare") { _ in "Hello from Pace\n" }
    let options = self.options
    let address = ClientAddress(trustedProxies: trustedProxies)
    let key: @Sendable (Request) -> String? = { request in
      options.key(apiKey: request.headers.first(name: "X-API-Key"), peer: address.key(request) ?? "ip:unknown")
    }
    let limited = app.grouped(
      store.map { RateLimitMiddleware(limiter: options.limiter(store: $0), logger: app.logger, key: key) }
        ?? RateLimitMiddleware(limiter: options.limiter(), logger: app.logger, key: key))
    limited.get { _ in "Hello from Pace\n" }
    limited.post("documents", ":id", "changed") { request in
      guard let id = request.parameters.get("id", as: Int.self) else { throw Abort(.badRequest) }
      try await reindexer.changed(id)
      return Response(status: .accepted)
    }
    app.logger.info("limit", metadata: ["limit": "\(options.limit) per key"])
  }
}
