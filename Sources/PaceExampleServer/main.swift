// An example server: Pace's rate-limit middleware and debouncer on Hummingbird.
//
//   swift run --traits PostgreSQL,Hummingbird pace-example-server                    # in memory
//   swift run --traits PostgreSQL,Hummingbird pace-example-server --postgres URL     # shared by instances
//
// Options: --port N (8080), --permits N (10) per --per SECONDS (60). Try it:
//   curl -i -H 'X-API-Key: demo' localhost:8080/            # RateLimit fields; the 11th in a minute gets 429
//   curl -i -X POST localhost:8080/documents/42/changed     # changes debounced into one reindex
#if PostgreSQL && Hummingbird
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Pace
import PaceHummingbird
import PacePostgres
import PostgresNIO

/// A request context that knows the client's address, to limit requests without an API key by it.
struct ExampleContext: RequestContext, RemoteAddressRequestContext {
  var coreContext: CoreRequestContextStorage
  let remoteAddress: SocketAddress?

  init(source: ApplicationRequestContextSource) {
    coreContext = .init(source: source)
    remoteAddress = source.channel.remoteAddress
  }
}

struct Options {
  var port = 8080
  var postgres: URL?
  var permits = 10
  var seconds: Int64 = 60

  init(_ arguments: ArraySlice<String>) {
    var arguments = arguments
    while let flag = arguments.popFirst() {
      guard let value = arguments.popFirst() else { Self.usage("\(flag) needs a value") }
      switch flag {
      case "--port":
        guard let number = Int(value), (0...65535).contains(number) else { Self.usage("--port takes a port number") }
        port = number
      case "--postgres":
        guard let url = URL(string: value), url.scheme?.hasPrefix("postgres") == true else {
          Self.usage("--postgres takes a postgres:// URL")
        }
        postgres = url
      case "--permits":
        guard let number = Int(value), number > 0 else { Self.usage("--permits takes a positive number") }
        permits = number
      case "--per":
        guard let number = Int64(value), number > 0 else { Self.usage("--per takes a positive number of seconds") }
        seconds = number
      default: Self.usage("unknown option \(flag)")
      }
    }
  }

  static func usage(_ problem: String) -> Never {
    FileHandle.standardError.write(
      Data("pace-example-server: \(problem)\nusage: pace-example-server [--port N] [--postgres URL] [--permits N] [--per SECONDS]\n".utf8))
    exit(64)
  }
}

/// Reindexes documents; the calls are debounced, so a burst of changes is one reindex.
protocol Reindexer: Sendable {
  func changed(_ id: Int) async throws
}

/// In one process: Pace's `Debouncer`.
struct LocalReindexer: Reindexer {
  let debouncer = Debouncer<[Int]>(for: .seconds(2), maxWait: .seconds(10), merge: .append, scheduler: .queue(.global())) {
    print("reindexing documents \($0)")
  }
  func changed(_ id: Int) { debouncer.call([id]) }
}

/// Across instances: `PostgresDebouncer`.
struct SharedReindexer: Reindexer {
  let debouncer: PostgresDebouncer<[Int]>
  func changed(_ id: Int) async throws { try await debouncer.call("search-index", [id]) }
}

func makeRouter(limiter: KeyedRateLimiter<String>, reindexer: some Reindexer) -> Router<ExampleContext> {
  let router = Router(context: ExampleContext.self)
  let apiKey = HTTPField.Name("X-API-Key")!
  router.add(
    middleware: RateLimitMiddleware(limiter: limiter) { request, context in
      request.headers[apiKey].map { "key:\($0)" } ?? context.remoteAddress?.ipAddress.map { "ip:\($0)" }
    })
  router.get("/") { _, _ in "Hello from Pace\n" }
  router.post("/documents/:id/changed") { _, context -> HTTPResponse.Status in
    let id = try context.parameters.require("id", as: Int.self)
    try await reindexer.changed(id)
    return .accepted
  }
  return router
}

let options = Options(CommandLine.arguments.dropFirst())
let limit = RateLimit(permits: options.permits, per: .seconds(options.seconds))
let configuration = ApplicationConfiguration(address: .hostname("127.0.0.1", port: options.port))
print("pace-example-server: \(limit) per key on http://127.0.0.1:\(options.port)")

if let url = options.postgres {
  var logger = Logger(label: "pace-example-server.postgres")
  logger.logLevel = .warning
  let client = PostgresClient(
    configuration: PostgresClient.Configuration(
      host: url.host ?? "127.0.0.1", port: url.port ?? 5432, username: url.user ?? "postgres",
      password: url.password, database: url.path.isEmpty ? nil : String(url.path.dropFirst()), tls: .prefer(.makeClientConfiguration())
    ),
    backgroundLogger: logger
  )
  // Each instance enforces the limit alone while the database is down, rather than refusing all.
  let fallback = KeyedRateLimiter<String>(permits: limit.permits, per: limit.interval, burst: limit.burst)
  let store = try PostgresRateLimitStore(client: client, whenUnavailable: .fallback(fallback))
  let limiter = KeyedRateLimiter(permits: limit.permits, per: limit.interval, burst: limit.burst, store: store)
  let debouncer = try PostgresDebouncer<[Int]>(
    client: client, quiet: .seconds(2), maxWait: .seconds(10), merge: .append, logger: logger
  ) { _, ids in print("reindexing documents \(ids)") }
  try await withThrowingTaskGroup(of: Void.self) { group in
    group.addTask { await client.run() }
    try await store.migrate()
    try await debouncer.migrate()
    print("pace-example-server: limits and debouncing shared through \(url.host ?? "?"):\(url.port ?? 5432)")
    group.addTask { try await debouncer.run() }
    group.addTask {
      while !Task.isCancelled {
        try await Task.sleep(for: .seconds(60))
        while try await store.purgeExpired() == 1000 {}
      }
    }
    let app = Application(
      router: makeRouter(limiter: limiter, reindexer: SharedReindexer(debouncer: debouncer)), configuration: configuration)
    try await app.runService()
    group.cancelAll()
  }
} else {
  let app = Application(
    router: makeRouter(
      limiter: KeyedRateLimiter<String>(permits: limit.permits, per: limit.interval, burst: limit.burst),
      reindexer: LocalReindexer()),
    configuration: configuration
  )
  try await app.runService()
}
#else
print("pace-example-server needs the PostgreSQL and Hummingbird traits:")
print("  swift run --traits PostgreSQL,Hummingbird pace-example-server [--postgres postgres://…]")
#endif
