import ArgumentParser
import Foundation
import Logging
import Metrics
import NIOSSL
import Pace
import PacePostgres
import PostgresNIO
import Prometheus

/// The options both example servers take.
public struct ServerOptions: ParsableArguments, Sendable {
  @Option(help: "The address to listen on.")
  public var host = "127.0.0.1"

  @Option(help: "The port to listen on.")
  public var port = 8080

  @Option(help: "A postgres:// URL: limits and debouncing shared by every instance on that database.")
  public var postgres: String?

  @Option(help: "Requests allowed per key in each period.")
  public var permits = 10

  @Option(help: "The period, in seconds.")
  public var per: Int64 = 60

  @Option(
    name: .customLong("api-key"),
    help: "An API key clients may send in X-API-Key (repeatable); each known key has its own bucket.")
  public var apiKeys: [String] = []

  @Option(help: "The log level: trace, debug, info, notice, warning, error or critical.")
  public var logLevel = "info"

  public init() {}

  public mutating func validate() throws {
    guard (0...65535).contains(port) else { throw ValidationError("--port takes a port number") }
    guard permits > 0 else { throw ValidationError("--permits takes a positive number") }
    guard per > 0, per <= 86_400 * 365 else { throw ValidationError("--per takes a number of seconds, up to a year") }
    guard Logger.Level(rawValue: logLevel) != nil else {
      throw ValidationError("--log-level: unknown level \(logLevel)")
    }
    if let postgres {
      guard let url = URL(string: postgres), url.scheme?.hasPrefix("postgres") == true, url.host != nil else {
        throw ValidationError("--postgres takes a postgres://user@host:port/database URL")
      }
    }
  }

  /// The rate per key.
  public var limit: RateLimit { RateLimit(permits: permits, per: .seconds(per)) }

  /// The database, if `--postgres` names one.
  public var postgresURL: URL? { postgres.flatMap { URL(string: $0) } }

  /// One log line per event on standard output, flushed at each line, as log collectors expect;
  /// metrics in a Prometheus registry, for the /metrics route.
  public func bootstrap() -> PrometheusCollectorRegistry {
    let level = Logger.Level(rawValue: logLevel) ?? .info
    LoggingSystem.bootstrap { label in
      var handler = StreamLogHandler.standardOutput(label: label)
      handler.logLevel = level
      return handler
    }
    let registry = PrometheusCollectorRegistry()
    MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
    return registry
  }

  /// The key a request counts against: a known API key's own bucket, one strict bucket shared by
  /// every unknown key (so that inventing keys gains nothing), or else `peer`, the client's
  /// address. Never nil: no request is unlimited.
  public func key(apiKey: String?, peer: @autoclosure () -> String) -> String {
    if let apiKey { return Set(apiKeys).contains(apiKey) ? "key:\(apiKey)" : "unknown-api-keys" }
    return peer()
  }

  /// A limiter in this process's memory: each instance counts alone.
  public func limiter() -> KeyedRateLimiter<String> {
    KeyedRateLimiter(limit: limit)
  }

  /// A limiter whose decisions are `store`'s, shared by every instance that uses the database.
  public func limiter(store: PostgresRateLimitStore) -> StoreBackedRateLimiter<String> {
    StoreBackedRateLimiter(limit: limit, store: store)
  }

  /// The store, which enforces the limit in each instance alone while the database is down,
  /// rather than refusing all, and decides on connections of its own to `url`, which reconnect
  /// as soon as the database is back.
  public func store(client: PostgresClient, url: URL, logger: Logger) throws -> PostgresRateLimitStore {
    try PostgresRateLimitStore(
      client: client, whenUnavailable: .fallback(limiter()), directConnection: Self.connection(url), logger: logger)
  }

  /// A client for `url`.
  public static func client(_ url: URL, logger: Logger) -> PostgresClient {
    let configuration = PostgresClient.Configuration(
      host: url.host ?? "127.0.0.1", port: url.port ?? 5432, username: url.user ?? "postgres",
      password: url.password, database: url.path.isEmpty ? nil : String(url.path.dropFirst()),
      tls: .prefer(.makeClientConfiguration())
    )
    return PostgresClient(configuration: configuration, backgroundLogger: logger)
  }

  /// A single connection's configuration for `url`, as the client's.
  public static func connection(_ url: URL) throws -> PostgresConnection.Configuration {
    PostgresConnection.Configuration(
      host: url.host ?? "127.0.0.1", port: url.port ?? 5432, username: url.user ?? "postgres",
      password: url.password, database: url.path.isEmpty ? nil : String(url.path.dropFirst()),
      tls: .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
    )
  }
}

/// Reindexes documents; the calls are debounced, so a burst of changes is one reindex.
public protocol Reindexer: Sendable {
  /// Document `id` changed.
  func changed(_ id: Int) async throws
}

/// In one process: Pace's `Debouncer`.
public struct LocalReindexer: Reindexer {
  let debouncer: Debouncer<[Int]>

  public init(logger: Logger) {
    debouncer = Debouncer<[Int]>(
      for: .seconds(2), maximumWait: .seconds(10), merge: .append, scheduler: .queue(.global())
    ) {
      logger.info("reindexing documents", metadata: ["documents": "\($0)"])
    }
  }

  public func changed(_ id: Int) { debouncer.call([id]) }
}

/// Across instances: `PostgresDebouncer`.
public struct SharedReindexer: Reindexer {
  /// The debouncer; a service to run beside the server.
  public let debouncer: PostgresDebouncer<[Int]>

  public init(client: PostgresClient, logger: Logger) throws {
    debouncer = try PostgresDebouncer<[Int]>(
      client: client, quiet: .seconds(2), maximumWait: .seconds(10), merge: .append, logger: logger
    ) { _, ids in
      logger.info("reindexing documents", metadata: ["documents": "\(ids)"])
    }
  }

  public func changed(_ id: Int) async throws { try await debouncer.call("search-index", [id]) }
}
