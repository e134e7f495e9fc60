// swift-tools-version: 6.1
import PackageDescription

// Pace's example servers, as a team would deploy them: the same rate limits and debounced work on
// Hummingbird and on Vapor, in memory or shared through PostgreSQL, with Prometheus metrics.
//
//   swift run pace-example-server [--postgres postgres://…]          # Hummingbird
//   swift run pace-example-server-vapor [--postgres postgres://…]    # Vapor
//
// And their clients, paced by what a server says: one on URLSession, one on AsyncHTTPClient.
//
//   swift run pace-example-client-urlsession [--requests 100] [URL]
//   swift run pace-example-client-asynchttpclient [--requests 100] [URL]
//
// And a load test of admission control: a service of fixed capacity offered three times what it
// can do, with and without an adaptive concurrency limit and priority classes in front.
//
//   swift run -c release pace-admission-load [--duration 30] [--help]
//
// grafana/pace-dashboard.json graphs what the servers export on /metrics (the middlewares, the
// store, the debouncer); Scripts/check-prometheus.sh evaluates each of its panels' queries on a real
// Prometheus scraping the Hummingbird server under load (CI runs it).
let swiftSettings: [SwiftSetting] = [
  .enableUpcomingFeature("ExistentialAny"),
  .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
  name: "PaceExampleServer",
  platforms: [.macOS(.v13)],
  dependencies: [
    // Pace itself, by path, with its server traits on; `name:` because a path dependency's
    // identity is otherwise its folder's name, which differs between clones.
    .package(name: "Pace", path: "../..", traits: ["PostgreSQL", "Hummingbird", "Vapor", "AsyncHTTPClient"]),
    .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
    .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.0"),
    .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.0"),
    .package(url: "https://github.com/vapor/vapor", from: "4.115.0"),
    .package(url: "https://github.com/apple/swift-http-types", from: "1.0.0"),
    .package(url: "https://github.com/apple/swift-nio", from: "2.80.0"),
    .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.27.0"),
    .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
    .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
    .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
    .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.0.0"),
    .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
  ],
  targets: [
    // What both servers share: the command-line options, logging and metrics, the PostgreSQL
    // client's configuration, the key a request counts against, and the reindexer.
    .target(
      name: "ExampleServerSupport",
      dependencies: [
        .product(name: "Pace", package: "Pace"),
        .product(name: "PacePostgres", package: "Pace"),
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
        .product(name: "PostgresNIO", package: "postgres-nio"),
        .product(name: "NIOSSL", package: "swift-nio-ssl"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "Metrics", package: "swift-metrics"),
        .product(name: "Prometheus", package: "swift-prometheus"),
      ],
      swiftSettings: swiftSettings
    ),
    .executableTarget(
      name: "pace-example-server",
      dependencies: [
        "ExampleServerSupport",
        .product(name: "Pace", package: "Pace"),
        .product(name: "PacePostgres", package: "Pace"),
        .product(name: "PaceHummingbird", package: "Pace"),
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
        .product(name: "PostgresNIO", package: "postgres-nio"),
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "HTTPTypes", package: "swift-http-types"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "Prometheus", package: "swift-prometheus"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "UnixSignals", package: "swift-service-lifecycle"),
      ],
      path: "Sources/PaceExampleServer",
      swiftSettings: swiftSettings
    ),
    .executableTarget(
      name: "pace-example-server-vapor",
      dependencies: [
        "ExampleServerSupport",
        .product(name: "Pace", package: "Pace"),
        .product(name: "PacePostgres", package: "Pace"),
        .product(name: "PaceVapor", package: "Pace"),
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
        .product(name: "PostgresNIO", package: "postgres-nio"),
        .product(name: "Vapor", package: "vapor"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "Prometheus", package: "swift-prometheus"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
      ],
      path: "Sources/PaceExampleServerVapor",
      swiftSettings: swiftSettings
    ),
    // The clients: a rate-limited API's calls paced by what its server says.
    .executableTarget(
      name: "pace-example-client-urlsession",
      dependencies: [
        .product(name: "PaceHTTPClient", package: "Pace"),
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
      ],
      path: "Sources/PaceExampleClientURLSession",
      swiftSettings: swiftSettings
    ),
    .executableTarget(
      name: "pace-example-client-asynchttpclient",
      dependencies: [
        .product(name: "PaceHTTPClient", package: "Pace"),
        .product(name: "PaceAsyncHTTPClient", package: "Pace"),
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
        .product(name: "AsyncHTTPClient", package: "async-http-client"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOHTTP1", package: "swift-nio"),
      ],
      path: "Sources/PaceExampleClientAsyncHTTPClient",
      swiftSettings: swiftSettings
    ),
    // The load test of admission control: a Hummingbird server and an open-loop generator in one
    // process (Benchmarks/README.md has its figures).
    .executableTarget(
      name: "pace-admission-load",
      dependencies: [
        .product(name: "Pace", package: "Pace"),
        .product(name: "PaceHummingbird", package: "Pace"),
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
        .product(name: "AsyncHTTPClient", package: "async-http-client"),
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "HTTPTypes", package: "swift-http-types"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOPosix", package: "swift-nio"),
        .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
        .product(name: "NIOHTTP1", package: "swift-nio"),
        .product(name: "Logging", package: "swift-log"),
      ],
      path: "Sources/PaceAdmissionLoad",
      swiftSettings: swiftSettings
    ),
  ],
  swiftLanguageModes: [.v6]
)
