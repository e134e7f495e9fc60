#if PostgreSQL && Hummingbird && Vapor
import Foundation
import InMemoryLogging
import Logging
import NIOCore
import Pace
import PacePostgres
import PaceTestSupport
import PaceVapor
import PostgresNIO
import ServiceLifecycle
import Testing
import Vapor
import VaporTesting

/// A store that decides with a limiter in memory (2 permits a minute) after a suspension: the
/// middleware must await it. `deciding` runs in each decision, where a test records what it sees.
private struct MemoryStore: RateLimitStore {
  let limiter = KeyedRateLimiter<String>(permits: 2, per: .seconds(60), clock: TestScheduler())
  var deciding: @Sendable () -> Void = {}

  func tryAcquire(_ key: String, cost: Int, limit: RateLimit) async throws -> RateLimitDecision {
    await Task.yield()
    deciding()
    return limiter.tryAcquire(key, cost: cost)
  }
}

@Suite("PaceVapor: the middleware, the client address, and services under Vapor's lifecycle", .databaseTestTimeLimit)
struct VaporTests {
  /// On a group of routes, on one route, and not on a third; each middleware its own limiter.
  @Test func limitsAGroupAndOneRouteInMemory() async throws {
    try await withApp { app in
      let scheduler = TestScheduler()
      let limited = app.grouped(
        RateLimitMiddleware(limiter: KeyedRateLimiter(permits: 2, per: .seconds(60), clock: scheduler)))
      limited.get("a") { _ in "a" }
      limited.get("b") { _ in "b" }
      app.grouped(RateLimitMiddleware(limiter: KeyedRateLimiter(permits: 1, per: .seconds(60), clock: scheduler)))
        .post("login") { _ in "in" }
      app.get("open") { _ in "open" }

      let tester = try app.testing()
      let first = try await tester.sendRequest(.GET, "a")
      #expect(first.status == .ok && first.body.string == "a")
      #expect(first.headers.first(name: "RateLimit-Policy") == "\"default\";q=2;w=60")
      #expect(first.headers.first(name: "RateLimit") == "\"default\";r=1;t=30")
      // The group shares one bucket per client: the second route takes the last permit.
      #expect(try await tester.sendRequest(.GET, "b").status == .ok)
      let third = try await tester.sendRequest(.GET, "a")
      #expect(third.status == .tooManyRequests && third.headers.first(name: "Retry-After") == "30")
      // The one limited route has its own limit; the open route has none.
      #expect(try await tester.sendRequest(.POST, "login").status == .ok)
      #expect(try await tester.sendRequest(.POST, "login").status == .tooManyRequests)
      let open = try await tester.sendRequest(.GET, "open")
      #expect(open.status == .ok && open.headers.first(name: "RateLimit") == nil)
      scheduler.advance(by: .seconds(30))
      #expect(try await tester.sendRequest(.GET, "a").status == .ok)
    }
  }

  /// A store's decision, or several policies', is awaited in a task whose jobs run on the
  /// request's event loop (task executors exist on Linux): the task's start and its answer wake no
  /// other thread. Two requests are allowed, the third denied, as in memory.
  @Test func aStoresDecisionRunsOnTheRequestsEventLoop() async throws {
    for policies in [1, 2] {
      let (requestLoops, onTheLoop) = (Recorder<any EventLoop>(), Recorder<Bool>())
      let store = MemoryStore { onTheLoop.record(requestLoops.values.last?.inEventLoop ?? false) }
      let key: @Sendable (Request) -> String? = { request in
        requestLoops.record(request.eventLoop)
        return "client"
      }
      let limiter = StoreBackedRateLimiter<String>(permits: 2, per: .seconds(60), store: store)
      let middleware =
        policies == 1
        ? RateLimitMiddleware(limiter: limiter, key: key)
        : RateLimitMiddleware(policies: [
          RateLimitPolicy("client", limiter: limiter, key: key),
          RateLimitPolicy(
            "all", limiter: KeyedRateLimiter(permits: 10, per: .seconds(60), clock: TestScheduler()),
            key: { _ in "all" }),
        ])
      var statuses: [UInt] = []
      try await withApp { app in
        app.grouped(middleware).get { _ in "ok" }
        for _ in 0..<3 { statuses.append(try await app.testing().sendRequest(.GET, "/").status.code) }
      }
      #expect(statuses == [200, 200, 429], "\(policies) policies")
      // Two policies ask the store before they charge it: more calls, every one on the loop.
      #expect(onTheLoop.count >= 3 && onTheLoop.values.allSatisfy { $0 }, "\(policies) policies")
    }
  }

  /// Vapor calls the future-based entry point, which decides in memory without a task; a caller
  /// may await the async one. Both answer alike, for a limiter in memory, one with a store (its
  /// decision awaited in a task) and two policies, and read each request's key once.
  @Test func bothEntryPointsAnswerAlikeAndReadTheKeyOnce() async throws {
    /// The key from the `Key` field, each read counted in `keys`.
    @Sendable func headerKey(_ keys: PaceTestSupport.Counter) -> @Sendable (Request) -> String? {
      { request in
        keys.increment()
        return request.headers.first(name: "Key")
      }
    }
    let makers: [(String, @Sendable (PaceTestSupport.Counter) -> RateLimitMiddleware)] = [
      (
        "in memory",
        { keys in
          RateLimitMiddleware(
            limiter: KeyedRateLimiter(permits: 2, per: .seconds(60), clock: TestScheduler()), key: headerKey(keys))
        }
      ),
      (
        "with a store",
        { keys in
          RateLimitMiddleware(
            limiter: StoreBackedRateLimiter(permits: 2, per: .seconds(60), store: MemoryStore()), key: headerKey(keys))
        }
      ),
      (
        "two policies",
        { keys in
          RateLimitMiddleware(policies: [
            RateLimitPolicy(
              "client", limiter: KeyedRateLimiter(permits: 2, per: .seconds(60), clock: TestScheduler()),
              key: headerKey(keys)),
            RateLimitPolicy(
              "all", limiter: KeyedRateLimiter(permits: 10, per: .seconds(60), clock: TestScheduler()),
              key: { _ in "all" }),
          ])
        }
      ),
    ]
    let keys: [String?] = ["a", "a", "a", nil, "b", "b", String(repeating: "k", count: 2000)]
    typealias Seen = [String]
    func seen(_ status: HTTPResponseStatus, _ headers: HTTPHeaders, _ body: String?) -> Seen {
      ["\(status.code)", body ?? ""]
        + ["RateLimit-Policy", "RateLimit", "Retry-After"].map { headers[$0].joined(separator: ", ") }
    }
    for (name, make) in makers {
      var viaRouter: [Seen] = []
      let routerKeys = PaceTestSupport.Counter()
      try await withApp { app in
        app.grouped(make(routerKeys)).get { _ in "ok" }
        for key in keys {
          var headers = HTTPHeaders()
          if let key { headers.add(name: "Key", value: key) }
          let response = try await app.testing().sendRequest(.GET, "/", headers: headers)
          viaRouter.append(seen(response.status, response.headers, response.body.string))
        }
      }
      var awaited: [Seen] = []
      let awaitedKeys = PaceTestSupport.Counter()
      try await withApp { app in
        let middleware = make(awaitedKeys)
        let route = AsyncBasicResponder { _ in Response(status: .ok, body: .init(string: "ok")) }
        for key in keys {
          var headers = HTTPHeaders()
          if let key { headers.add(name: "Key", value: key) }
          let request = Request(
            application: app, method: .GET, url: "/", headers: headers, on: app.eventLoopGroup.next())
          let response = try await middleware.respond(to: request, chainingTo: route)
          awaited.append(seen(response.status, response.headers, response.body.string))
        }
      }
      #expect(viaRouter == awaited, "\(name)")
      #expect(viaRouter.map { $0[0] } == ["200", "200", "429", "200", "200", "200", "200"], "\(name)")
      #expect(routerKeys.count == keys.count && awaitedKeys.count == keys.count, "\(name)")
    }
  }

  /// The default key is the connection's peer; a forwarding header counts only from a named proxy.
  @Test func theKeyIsThePeerUnlessATrustedProxyForwards() async throws {
    try await withApp { app in
      // An address that does not parse leaves no peer, and the expectation below fails.
      func request(from peer: String, forwardedFor: [String] = []) -> Request {
        var headers = HTTPHeaders()
        for hop in forwardedFor { headers.add(name: .xForwardedFor, value: hop) }
        headers.add(name: "Forwarded", value: "for=192.0.2.99")
        return Request(
          application: app, method: .GET, url: "/", headers: headers,
          remoteAddress: try? SocketAddress(ipAddress: peer, port: 40_000), on: app.eventLoopGroup.next())
      }
      let peer = ClientAddress.peer
      #expect(peer.key(request(from: "203.0.113.7", forwardedFor: ["198.51.100.1"])) == "ip:203.0.113.7")
      // An IPv6 client is its /64; an IPv4-mapped address is its IPv4 address.
      #expect(peer.key(request(from: "0:0:0:0:0:0:0:1")) == "ip:::/64")
      #expect(peer.key(request(from: "2001:db8:1:2:3:4:5:6")) == "ip:2001:db8:1:2::/64")
      #expect(peer.key(request(from: "::ffff:203.0.113.7")) == "ip:203.0.113.7")
      #expect(ClientAddress(ipv6PrefixLength: 128).key(request(from: "0:0:0:0:0:0:0:1")) == "ip:::1")

      let proxied = ClientAddress.forwarded(byTrustedProxies: ["10.0.0.2", "10.0.0.3", "not an address"])
      #expect(proxied.trustedProxies == ["10.0.0.2", "10.0.0.3"])
      // From a trusted proxy: the last hop that is not a trusted proxy, across repeated fields.
      #expect(proxied.key(request(from: "10.0.0.2", forwardedFor: ["6.6.6.6, 198.51.100.1"])) == "ip:198.51.100.1")
      #expect(
        proxied.key(request(from: "10.0.0.2", forwardedFor: ["6.6.6.6", "198.51.100.1, 10.0.0.3"]))
          == "ip:198.51.100.1")
      // From anyone else, the header is the client's own words.
      #expect(proxied.key(request(from: "203.0.113.7", forwardedFor: ["198.51.100.1"])) == "ip:203.0.113.7")
      // A trusted proxy that forwards nothing, or nonsense, is its own key.
      #expect(proxied.key(request(from: "10.0.0.2")) == "ip:10.0.0.2")
      #expect(proxied.key(request(from: "10.0.0.2", forwardedFor: ["evil"])) == "ip:10.0.0.2")
      // Only trusted proxies in the chain: the first of them.
      #expect(proxied.key(request(from: "10.0.0.2", forwardedFor: ["10.0.0.3"])) == "ip:10.0.0.3")
      // Ranges, IPv4 and IPv6, and the Forwarded header when the proxies write it.
      let ranges = ClientAddress(trustedProxies: ["10.0.0.0/8", "fd00::/8"])
      #expect(ranges.trustedProxies == ["10.0.0.0/8", "fd00::/8"])
      #expect(ranges.key(request(from: "10.200.3.4", forwardedFor: ["198.51.100.1, 10.1.1.1"])) == "ip:198.51.100.1")
      #expect(ranges.key(request(from: "fd00::5", forwardedFor: ["2001:db8:9:9::1"])) == "ip:2001:db8:9:9::/64")
      let rfc7239 = ClientAddress(trustedProxies: ["10.0.0.0/8"], header: .forwarded)
      #expect(rfc7239.key(request(from: "10.0.0.2", forwardedFor: ["198.51.100.1"])) == "ip:192.0.2.99")
      // No peer address at all (VaporTesting's in-memory requests): one shared bucket.
      let inMemory = Request(application: app, method: .GET, url: "/", on: app.eventLoopGroup.next())
      #expect(peer.key(inMemory) == "ip:unknown")
    }
  }

  /// Over a real socket: a client that changes X-Forwarded-For at each request is still one client.
  @Test func aClientCannotChooseItsKeyOverTheNetwork() async throws {
    try await withApp { app in
      app.grouped(RateLimitMiddleware(limit: RateLimit(permits: 1, per: .seconds(3600)))).get("x") { _ in "x" }
      let tester = try app.testing(method: .running(hostname: "127.0.0.1", port: 0))
      let first = try await tester.sendRequest(.GET, "x", headers: ["X-Forwarded-For": "198.51.100.1"])
      let second = try await tester.sendRequest(.GET, "x", headers: ["X-Forwarded-For": "198.51.100.2"])
      #expect(first.status == .ok)
      #expect(second.status == .tooManyRequests)
    }
  }

  /// 300 addresses of one /64 are one client, over a real socket through a trusted proxy.
  @Test func addressesOfOneSlash64AreOneClient() async throws {
    try await withApp { app in
      let address = ClientAddress(trustedProxies: ["127.0.0.0/8", "::1"])
      app.grouped(RateLimitMiddleware(limit: RateLimit(permits: 3, per: .seconds(3600)), key: address.key))
        .get("x") { _ in "x" }
      let tester = try app.testing(method: .running(hostname: "127.0.0.1", port: 0))
      var statuses: [HTTPStatus] = []
      for host in 1...300 {
        let forwarded = "2001:db8:aa:bb:\(String(host, radix: 16)):1:2:3"
        statuses.append(try await tester.sendRequest(.GET, "x", headers: ["X-Forwarded-For": forwarded]).status)
      }
      #expect(statuses.filter { $0 == .ok }.count == 3)
      // Another /64 is another client.
      let other = try await tester.sendRequest(.GET, "x", headers: ["X-Forwarded-For": "2001:db8:aa:bc::1"])
      #expect(other.status == .ok)
    }
  }

  /// Two applications, each with its own pool, share one key's limit through PostgreSQL.
  @Test func twoApplicationsShareTheLimitThroughPostgreSQL() async throws {
    try await TestDatabase.withClients(2, connections: 2) { clients in
      let table = TestDatabase.uniqueTable("rl")
      let stores = try clients.map { try PostgresRateLimitStore(client: $0, table: table, timeout: .seconds(30)) }
      try await stores[0].migrate()
      try await withApp { one in
        try await withApp { two in
          for (app, store) in zip([one, two], stores) {
            app.grouped(
              RateLimitMiddleware(
                limiter: StoreBackedRateLimiter(permits: 3, per: .seconds(3600), store: store),
                key: { $0.headers.first(name: "X-API-Key") })
            ).get { _ in "ok" }
          }
          var statuses: [HTTPStatus] = []
          for request in 0..<6 {
            let app = request.isMultiple(of: 2) ? one : two
            statuses.append(try await app.testing().sendRequest(.GET, "/", headers: ["X-API-Key": "shared"]).status)
          }
          #expect(statuses == [.ok, .ok, .ok, .tooManyRequests, .tooManyRequests, .tooManyRequests])
        }
      }
    }
  }

  /// The client, the store's purge loop and the debouncer start with the application, migrate
  /// before it takes requests, and drain on shutdown: a running handler finishes; the lines go to
  /// the application's logger.
  @Test func servicesRunUnderTheApplicationsLifecycle() async throws {
    let url = try TestDatabase.url()
    let logs = InMemoryLogHandler()
    let executions = Executions()
    let started = Executions()
    let client = PostgresClient(
      configuration: TestDatabase.configuration(url, connections: 2), backgroundLogger: TestDatabase.quietLogger)
    let app = try await Application.make(.testing)
    app.logger = Logger(label: "app", factory: { _ in logs })
    let store = try PostgresRateLimitStore(client: client, table: TestDatabase.uniqueTable("rl"), logger: app.logger)
    let debouncer = try PostgresDebouncer<[Int]>(
      client: client, table: TestDatabase.uniqueTable("db"),
      // Long enough that the two calls fall in one quiet period on a loaded machine.
      quiet: .seconds(1), merge: .append, pollInterval: .milliseconds(20), logger: app.logger
    ) { key, payload in
      try await started.record(key, payload)
      try await Task.sleep(for: .milliseconds(800))  // real-time: still running when the application shuts down
      try await executions.record(key, payload)
    }
    app.lifecycle.use(
      ServiceLifecycleHandler(services: [client, store, debouncer]) {
        try await store.migrate()
        try await debouncer.migrate()
      })
    do {
      try await app.asyncBoot()
      let limiter = StoreBackedRateLimiter(permits: 1, per: .seconds(3600), store: store)
      #expect(try await limiter.decide("k") == .allowed(remaining: 0))
      try await debouncer.call("doc", [1])
      try await debouncer.call("doc", [2])
      #expect(try await eventually { await started.all.count == 1 })
    } catch {
      try? await app.asyncShutdown()
      throw error
    }
    try await app.asyncShutdown()
    #expect(await executions.payloads == [1, 2], "the running handler finished before the shutdown returned")
    let messages = logs.entries.map(\.message.description)
    #expect(messages.contains { $0.contains("PostgresDebouncer: shutting down") })
    #expect(messages.contains { $0.contains("PostgresDebouncer: stopped") })
  }

  /// A Vapor app hands the store and the debouncer the PostgreSQL configuration it already has:
  /// each runs a client of its own inside its service, so the app runs no client by hand; the
  /// migrations run once the services run, decisions and executions work, the shutdown stops the
  /// clients after the worker drained, and a clean start and stop log nothing above `info`.
  @Test func theStoreAndTheDebouncerRunClientsMadeFromTheAppsConfiguration() async throws {
    let url = try TestDatabase.url()
    let logs = InMemoryLogHandler()
    let executions = Executions()
    let configuration = TestDatabase.configuration(url, connections: 2)
    let app = try await Application.make(.testing)
    app.logger = Logger(label: "app", factory: { _ in logs })
    app.logger.logLevel = .trace
    let store = try PostgresRateLimitStore(
      configuration: configuration, table: TestDatabase.uniqueTable("rl"), logger: app.logger)
    let debouncer = try PostgresDebouncer<[Int]>(
      configuration: configuration, table: TestDatabase.uniqueTable("db"), quiet: .milliseconds(50),
      merge: .append, pollInterval: .milliseconds(20), logger: app.logger
    ) { key, payload in try await executions.record(key, payload) }
    app.lifecycle.use(
      ServiceLifecycleHandler(services: [store, debouncer]) {
        try await store.migrate()
        try await debouncer.migrate()
      })
    do {
      try await app.asyncBoot()
      let limiter = StoreBackedRateLimiter(permits: 1, per: .seconds(3600), store: store)
      #expect(try await limiter.decide("k") == .allowed(remaining: 0))
      #expect(try await limiter.decide("k").isAllowed == false)
      try await debouncer.call("doc", [1])
      try await debouncer.call("doc", [2])
      #expect(try await eventually { await executions.payloads == [1, 2] })
    } catch {
      try? await app.asyncShutdown()
      throw error
    }
    try await app.asyncShutdown()
    // Other tests of the suite hold the migration locks on purpose (a migration that cannot get
    // its lock gives up with a clear error), and a migration that waits for them says so after a
    // few seconds: that line names a real wait, not this start's.
    let loud = logs.entries.filter { $0.level > .info && !"\($0.message)".contains("migration waits for PostgreSQL") }
      .map { "\($0.level) \($0.message)" }
    #expect(loud.isEmpty, "a clean start and stop logged: \(loud)")
    let messages = logs.entries.map(\.message.description)
    #expect(messages.contains { $0.contains("PostgresDebouncer: stopped") })
    #expect(messages.contains { $0.contains("PostgreSQL rate-limit store stopped") })
  }

  /// A Pace service that fails while the application runs takes the application down, as a
  /// `ServiceGroup` takes its other services down, with the error logged; the migrations ran
  /// once every service had begun running (no lease before the client runs).
  @Test func aFailedServiceTakesTheApplicationDown() async throws {
    struct Boom: Error {}
    struct FailsSoon: Service {
      func run() async throws {
        try await Task.sleep(for: .milliseconds(300))  // real-time: fails once the application runs
        throw Boom()
      }
    }
    let logs = InMemoryLogHandler()
    // `startup()` runs Vapor's `serve` command: the test process's own arguments are not its.
    let app = try await Application.make(Environment(name: "testing", arguments: ["vapor"]))
    app.logger = Logger(label: "app", factory: { _ in logs })
    app.http.server.configuration.hostname = "127.0.0.1"
    app.http.server.configuration.port = 0
    let migrated = Executions()
    app.lifecycle.use(ServiceLifecycleHandler(services: [FailsSoon()]) { try await migrated.record("migrated", [1]) })
    do {
      try await app.startup()
      #expect(await migrated.all.count == 1)
      let running = try #require(app.running)
      // real-time: bounded by the suite's time limit; the service fails 300 ms after the start.
      try await running.onStop.get()
    } catch {
      try? await app.asyncShutdown()
      throw error
    }
    try await app.asyncShutdown()
    let failure = logs.entries.first { $0.level == .error && "\($0.message)".contains("a service failed") }
    #expect(failure?.metadata["error"].map { "\($0)".contains("Boom") } == true)
  }

  /// Migrations that fail stop the services, and the application does not boot.
  @Test func aFailedMigrationStopsTheServicesAndTheBoot() async throws {
    struct MigrationFailed: Error {}
    let url = try TestDatabase.url()
    let client = PostgresClient(
      configuration: TestDatabase.configuration(url, connections: 1), backgroundLogger: TestDatabase.quietLogger)
    try await withApp { app in
      app.lifecycle.use(ServiceLifecycleHandler(services: [client]) { throw MigrationFailed() })
      await #expect(throws: MigrationFailed.self) { try await app.asyncBoot() }
    }
  }
}
#endif
