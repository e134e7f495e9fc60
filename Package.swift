// swift-tools-version: 6.1
import PackageDescription

let swiftSettings: [SwiftSetting] = [
  .enableUpcomingFeature("ExistentialAny"),
  .enableUpcomingFeature("MemberImportVisibility"),
]

/// Combine's open-source implementation, where Apple's Combine does not exist.
let openCombine: Target.Dependency = .product(
  name: "OpenCombine", package: "OpenCombine", condition: .when(platforms: [.linux])
)

let package = Package(
  name: "Pace",
  // `Swift.Duration` needs these; Linux has no minimum.
  platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9)],
  products: [
    .library(name: "Pace", targets: ["Pace"]),
    .library(name: "PaceTesting", targets: ["PaceTesting"]),
    .library(name: "PaceUI", targets: ["PaceUI"]),
    .library(name: "PaceCombine", targets: ["PaceCombine"]),
    .library(name: "PaceObservation", targets: ["PaceObservation"]),
    .library(name: "PaceSwiftUI", targets: ["PaceSwiftUI"]),
    .library(name: "PaceHTTPClient", targets: ["PaceHTTPClient"]),
    .executable(name: "pace", targets: ["pace"]),
    // Server side, behind traits: see "Server side" below.
    .library(name: "PacePostgres", targets: ["PacePostgres"]),
    .library(name: "PaceHummingbird", targets: ["PaceHummingbird"]),
    .library(name: "PaceVapor", targets: ["PaceVapor"]),
    .library(name: "PaceHTTPServer", targets: ["PaceHTTPServer"]),
    .library(name: "PaceAsyncHTTPClient", targets: ["PaceAsyncHTTPClient"]),
  ],
  // Server side: apps never resolve, fetch or build postgres-nio, Hummingbird or Vapor, because
  // SwiftPM (6.1 and later) leaves the dependencies of disabled traits out of the graph entirely.
  // A server enables them: `.package(url: "…/Pace", from: "…", traits: ["PostgreSQL", "Vapor"])`.
  traits: [
    .trait(name: "PostgreSQL", description: "PacePostgres: shared rate limits and debouncing on PostgreSQL"),
    .trait(name: "Hummingbird", description: "PaceHummingbird: a rate-limit middleware for Hummingbird 2"),
    .trait(name: "Vapor", description: "PaceVapor: a rate-limit middleware and service lifecycle for Vapor 4"),
    .trait(
      name: "AsyncHTTPClient",
      description: "PaceAsyncHTTPClient: AsyncHTTPClient's requests paced by what the server says"
    ),
    .default(enabledTraits: []),
  ],
  dependencies: [
    .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
    // Tests only: proves that Pace's operators and swift-async-algorithms' can be imported together.
    .package(url: "https://github.com/apple/swift-async-algorithms", from: "1.0.0"),
    // Tests only: proves that PaceTesting and swift-clocks can be imported together, and that a
    // swift-clocks `TestClock` drives Pace's primitives (PaceClocksInteropTests).
    .package(url: "https://github.com/pointfreeco/swift-clocks", from: "1.0.0"),
    // PaceCombine on Linux only: Combine itself on Apple platforms.
    .package(url: "https://github.com/OpenCombine/OpenCombine", from: "0.14.0"),
    // PaceHTTPClient: the RateLimit and RateLimit-Policy fields are Structured Fields lists.
    .package(url: "https://github.com/apple/swift-http-structured-headers", from: "1.7.0"),
    // Docs only: `swift package generate-documentation` (CI builds the docs with warnings as errors).
    .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.4.0"),
    // Server side only, behind the traits above.
    .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.0"),
    .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.0"),
    .package(url: "https://github.com/apple/swift-http-types", from: "1.0.0"),
    .package(url: "https://github.com/vapor/vapor", from: "4.115.0"),
    // PaceVapor names NIOCore's `SocketAddress` (Vapor's own dependency).
    .package(url: "https://github.com/apple/swift-nio", from: "2.81.0"),
    // The server ecosystem's own packages for logs, metrics and running services (already in the
    // graph of postgres-nio, Hummingbird and Vapor); PaceHTTPClient counts with swift-metrics' API.
    .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
    .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
    .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
    // Behind the AsyncHTTPClient trait: a server's calls to other APIs, paced by what they say.
    .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
    // Behind the server traits: spans around the store's decisions, the debouncer's executions, the
    // middlewares' decisions and the paced attempts (already in the graph of Hummingbird,
    // postgres-nio and AsyncHTTPClient); PaceHTTPClient, an app library, does not trace.
    .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.3.0"),
    // PacePostgres: a traced key is its SHA-256, never the key (postgres-nio's own dependency).
    .package(url: "https://github.com/apple/swift-crypto", "3.9.0"..<"6.0.0"),
  ],
  targets: [
    // MARK: Library: toolchain only (Dispatch, Synchronization).
    .target(name: "Pace", dependencies: ["CPaceSupport"], swiftSettings: swiftSettings),
    // The one thing Swift cannot spell: a cache prefetch, for the keyed primitives' tables.
    .target(name: "CPaceSupport"),

    // MARK: Marble diagrams: parsing, rendering, and running primitives on virtual time.
    .target(name: "PaceMarbles", dependencies: ["Pace"], swiftSettings: swiftSettings),

    // MARK: For users' tests: marble expectations for Swift Testing and XCTest.
    .target(name: "PaceTesting", dependencies: ["Pace", "PaceMarbles"], swiftSettings: swiftSettings),

    // MARK: UIKit/AppKit glue, thin; its logic lives in `Pace`.
    .target(name: "PaceUI", dependencies: ["Pace"], swiftSettings: swiftSettings),
    // Test fixtures under Tests/StandIns (see its README): UIKit and AppKit stand-ins, and PaceUI's
    // glue compiled against them.
    .target(name: "UIKitStandIn", path: "Tests/StandIns/UIKitStandIn", swiftSettings: swiftSettings),
    .target(name: "AppKitStandIn", path: "Tests/StandIns/AppKitStandIn", swiftSettings: swiftSettings),
    .target(
      name: "PaceUIOnStandIns",
      dependencies: ["Pace", "UIKitStandIn", "AppKitStandIn"],
      path: "Tests/StandIns/PaceUIOnStandIns",
      swiftSettings: swiftSettings + [.define("PACE_UI_STAND_IN")]
    ),
    // Test fixtures under Tests/StandIns: Apple's `os_unfair_lock` API on any platform, and
    // `LockedState`'s Darwin path compiled against it.
    .target(name: "DarwinStandIn", path: "Tests/StandIns/DarwinStandIn"),
    .target(
      name: "PaceLockOnDarwinStandIn",
      dependencies: ["DarwinStandIn"],
      path: "Tests/StandIns/PaceLockOnDarwinStandIn",
      swiftSettings: swiftSettings + [.define("PACE_DARWIN_STAND_IN")]
    ),

    // MARK: Combine operators: Combine on Apple platforms, OpenCombine elsewhere.
    .target(name: "PaceCombine", dependencies: ["Pace", openCombine], swiftSettings: swiftSettings),

    // MARK: Observation: a Fuser over an Observation-tracked expression (iOS 17, macOS 14, Linux).
    .target(name: "PaceObservation", dependencies: ["Pace"], swiftSettings: swiftSettings),

    // MARK: SwiftUI glue, thin; its logic lives in platform-independent types in the same module.
    .target(name: "PaceSwiftUI", dependencies: ["Pace"], swiftSettings: swiftSettings),
    // Test fixtures under Tests/StandIns, as for PaceUI: a SwiftUI stand-in, and PaceSwiftUI
    // compiled against it.
    .target(name: "SwiftUIStandIn", path: "Tests/StandIns/SwiftUIStandIn", swiftSettings: swiftSettings),
    .target(
      name: "PaceSwiftUIOnStandIn",
      dependencies: ["Pace", "SwiftUIStandIn"],
      path: "Tests/StandIns/PaceSwiftUIOnStandIn",
      swiftSettings: swiftSettings + [.define("PACE_SWIFTUI_STAND_IN")]
    ),

    // MARK: HTTP clients paced by the server: the fields parsed, the retry loop; the URLSession glue.
    .target(
      name: "PaceHTTPClient",
      dependencies: [
        "Pace", .product(name: "RawStructuredFieldValues", package: "swift-http-structured-headers"),
        // Retries, budget withdrawals and 429s counted for an app's or a server's dashboards: the
        // API only (no backend), which works on every platform the package supports.
        .product(name: "CoreMetrics", package: "swift-metrics"),
      ],
      swiftSettings: swiftSettings
    ),

    // MARK: The `pace` tool: a thin executable over a testable library.
    .target(
      name: "PaceTool",
      dependencies: [
        "Pace", "PaceMarbles",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
      ],
      resources: [.copy("Traces")],
      swiftSettings: swiftSettings
    ),
    .executableTarget(name: "pace", dependencies: ["PaceTool"], swiftSettings: swiftSettings),

    // MARK: Server side, behind the PostgreSQL, Hummingbird and Vapor traits (empty modules without them).
    // Tasks whose jobs run on a NIO event loop, for PacePostgres's decision lanes and PaceVapor's
    // futures; in no product.
    .target(
      name: "PaceEventLoops",
      dependencies: [
        .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["PostgreSQL", "Vapor"]))
      ],
      swiftSettings: swiftSettings
    ),
    .target(
      name: "PacePostgres",
      dependencies: [
        "Pace", "PaceEventLoops",
        .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["PostgreSQL"])),
        .product(name: "Logging", package: "swift-log", condition: .when(traits: ["PostgreSQL"])),
        .product(name: "Metrics", package: "swift-metrics", condition: .when(traits: ["PostgreSQL"])),
        .product(
          name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["PostgreSQL"])),
        .product(name: "Tracing", package: "swift-distributed-tracing", condition: .when(traits: ["PostgreSQL"])),
        .product(name: "Crypto", package: "swift-crypto", condition: .when(traits: ["PostgreSQL"])),
      ],
      swiftSettings: swiftSettings
    ),
    // What every framework's rate-limit middleware shares, in no framework's types: the policies,
    // client addresses, long keys, the decision-to-response logic and the middleware's API. Both
    // middlewares only translate their request and response, so their answers are the same bytes.
    .target(
      name: "PaceHTTPServer",
      dependencies: [
        "Pace",
        .product(name: "Logging", package: "swift-log", condition: .when(traits: ["Hummingbird", "Vapor"])),
        .product(name: "Metrics", package: "swift-metrics", condition: .when(traits: ["Hummingbird", "Vapor"])),
        // `SocketAddress`, a connection's peer on both frameworks.
        .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Hummingbird", "Vapor"])),
        .product(
          name: "Tracing", package: "swift-distributed-tracing", condition: .when(traits: ["Hummingbird", "Vapor"])),
      ],
      swiftSettings: swiftSettings
    ),
    .target(
      name: "PaceHummingbird",
      dependencies: [
        "Pace", "PaceHTTPServer",
        .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["Hummingbird"])),
        .product(name: "HTTPTypes", package: "swift-http-types", condition: .when(traits: ["Hummingbird"])),
        // `SocketAddress`, for `ClientAddress` (Hummingbird's own dependency).
        .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Hummingbird"])),
        .product(name: "Logging", package: "swift-log", condition: .when(traits: ["Hummingbird"])),
        .product(name: "Metrics", package: "swift-metrics", condition: .when(traits: ["Hummingbird"])),
      ],
      swiftSettings: swiftSettings
    ),
    .target(
      name: "PaceVapor",
      dependencies: [
        "Pace", "PaceHTTPServer", "PaceEventLoops",
        .product(name: "Vapor", package: "vapor", condition: .when(traits: ["Vapor"])),
        .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Vapor"])),
        .product(name: "Logging", package: "swift-log", condition: .when(traits: ["Vapor"])),
        .product(name: "Metrics", package: "swift-metrics", condition: .when(traits: ["Vapor"])),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["Vapor"])),
      ],
      swiftSettings: swiftSettings
    ),
    // AsyncHTTPClient's requests through PacedRequests, behind the AsyncHTTPClient trait (an empty
    // module without it, as PacePostgres is).
    .target(
      name: "PaceAsyncHTTPClient",
      dependencies: [
        "Pace", "PaceHTTPClient",
        .product(name: "AsyncHTTPClient", package: "async-http-client", condition: .when(traits: ["AsyncHTTPClient"])),
        .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["AsyncHTTPClient"])),
        .product(name: "NIOHTTP1", package: "swift-nio", condition: .when(traits: ["AsyncHTTPClient"])),
        .product(name: "NIOPosix", package: "swift-nio", condition: .when(traits: ["AsyncHTTPClient"])),
        .product(name: "Logging", package: "swift-log", condition: .when(traits: ["AsyncHTTPClient"])),
        .product(name: "Tracing", package: "swift-distributed-tracing", condition: .when(traits: ["AsyncHTTPClient"])),
      ],
      swiftSettings: swiftSettings
    ),
    // A separate process for PaceServerTests: an instance of a server that dies mid-execution, or hammers a key.
    .executableTarget(
      name: "pace-postgres-test-instance",
      dependencies: [
        "Pace", "PacePostgres",
        .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["PostgreSQL"])),
      ],
      path: "Tests/PacePostgresTestInstance",
      swiftSettings: swiftSettings
    ),

    // MARK: Tests
    // Helpers shared by the test targets (`ms`, `Recorder`, `Counter`, `SeededGenerator`); in no product.
    .target(
      name: "PaceTestSupport", dependencies: ["Pace"], path: "Tests/PaceTestSupport", swiftSettings: swiftSettings),
    .testTarget(
      name: "PaceTests", dependencies: ["Pace", "PaceTesting", "PaceTestSupport"], swiftSettings: swiftSettings),
    .testTarget(
      name: "PaceHTTPClientTests",
      dependencies: [
        "Pace", "PaceHTTPClient", "PaceTesting", "PaceTestSupport",
        .product(name: "MetricsTestKit", package: "swift-metrics"),
      ],
      swiftSettings: swiftSettings
    ),
    .testTarget(
      name: "PaceCompositionTests", dependencies: ["Pace", "PaceTesting", "PaceTestSupport", "PaceUI"],
      swiftSettings: swiftSettings),
    .testTarget(
      name: "PaceUITests",
      dependencies: ["Pace", "PaceUI", "PaceUIOnStandIns", "UIKitStandIn", "AppKitStandIn", "PaceTestSupport"],
      swiftSettings: swiftSettings
    ),
    .testTarget(
      name: "PaceCombineTests",
      dependencies: ["Pace", "PaceCombine", "PaceTestSupport", openCombine],
      swiftSettings: swiftSettings
    ),
    .testTarget(name: "PaceObservationTests", dependencies: ["Pace", "PaceObservation"], swiftSettings: swiftSettings),
    .testTarget(
      name: "PaceSwiftUITests",
      dependencies: ["Pace", "PaceSwiftUI", "PaceSwiftUIOnStandIn", "SwiftUIStandIn"],
      swiftSettings: swiftSettings
    ),
    .testTarget(
      name: "PaceAsyncTests", dependencies: ["Pace", "PaceTesting", "PaceTestSupport"], swiftSettings: swiftSettings),
    .testTarget(
      name: "PaceLockTests", dependencies: ["PaceLockOnDarwinStandIn", "DarwinStandIn"], swiftSettings: swiftSettings
    ),
    .testTarget(name: "PaceKeyedTests", dependencies: ["Pace", "PaceTestSupport"], swiftSettings: swiftSettings),
    .testTarget(
      name: "PaceAsyncAlgorithmsInteropTests",
      dependencies: ["Pace", .product(name: "AsyncAlgorithms", package: "swift-async-algorithms")],
      swiftSettings: swiftSettings
    ),
    .testTarget(
      name: "PaceClocksInteropTests",
      dependencies: ["Pace", "PaceTesting", "PaceTestSupport", .product(name: "Clocks", package: "swift-clocks")],
      swiftSettings: swiftSettings
    ),
    .testTarget(
      name: "PaceMarblesTests", dependencies: ["PaceMarbles", "PaceTesting", "PaceTestSupport"],
      swiftSettings: swiftSettings
    ),
    .testTarget(name: "PaceToolTests", dependencies: ["PaceTool", "PaceTestSupport"], swiftSettings: swiftSettings),
    // Every ```swift block of README.md and the DocC articles, compiled (and its @Tests run):
    // generated by Scripts/extract-doc-examples.py, which CI runs with --check.
    .testTarget(
      name: "DocExamplesTests",
      dependencies: [
        "Pace", "PaceTesting", "PaceTestSupport", "PaceUI", "PaceUIOnStandIns", "UIKitStandIn", "PaceCombine",
        openCombine,
        "PaceObservation", "PaceSwiftUI", "PaceSwiftUIOnStandIn", "SwiftUIStandIn",
        // The testing article's swift-clocks example (a test-only dependency).
        .product(name: "Clocks", package: "swift-clocks"),
        // The server articles' examples, compiled with the traits on (see the script).
        "PacePostgres", "PaceHummingbird", "PaceVapor",
        .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["PostgreSQL"])),
        .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["Hummingbird"])),
        .product(name: "HTTPTypes", package: "swift-http-types", condition: .when(traits: ["Hummingbird"])),
        // The Hummingbird article's request context names NIOCore's `SocketAddress`; the
        // AsyncHTTPClient example its `TimeAmount`.
        .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Hummingbird", "AsyncHTTPClient"])),
        .product(name: "Vapor", package: "vapor", condition: .when(traits: ["Vapor"])),
        .product(name: "Logging", package: "swift-log", condition: .when(traits: ["PostgreSQL"])),
        .product(
          name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["PostgreSQL"])),
        // "Calling a rate-limited API": URLSession's glue, and AsyncHTTPClient's with its trait.
        "PaceHTTPClient", "PaceAsyncHTTPClient",
        .product(name: "AsyncHTTPClient", package: "async-http-client", condition: .when(traits: ["AsyncHTTPClient"])),
      ],
      swiftSettings: swiftSettings
    ),
    // Needs the traits and a database: Scripts/with-postgres.sh swift test --traits PostgreSQL,Hummingbird,Vapor
    // --filter PaceServerTests (CI's last step). Empty without the traits.
    .testTarget(
      name: "PaceServerTests",
      dependencies: [
        "Pace", "PacePostgres", "PaceHummingbird", "PaceHTTPServer", "PaceVapor", "PaceEventLoops",
        "pace-postgres-test-instance",
        // Seeded fuzzing of the client-address parser, which needs no trait; the reference models.
        "PaceTestSupport",
        .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["Hummingbird"])),
        .product(name: "HummingbirdTesting", package: "hummingbird", condition: .when(traits: ["Hummingbird"])),
        .product(name: "HTTPTypes", package: "swift-http-types", condition: .when(traits: ["Hummingbird"])),
        .product(name: "Vapor", package: "vapor", condition: .when(traits: ["Vapor"])),
        .product(name: "VaporTesting", package: "vapor", condition: .when(traits: ["Vapor"])),
        .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Vapor"])),
        .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["PostgreSQL"])),
        .product(name: "Logging", package: "swift-log", condition: .when(traits: ["PostgreSQL"])),
        .product(name: "InMemoryLogging", package: "swift-log", condition: .when(traits: ["PostgreSQL"])),
        .product(name: "Metrics", package: "swift-metrics", condition: .when(traits: ["PostgreSQL"])),
        .product(name: "MetricsTestKit", package: "swift-metrics", condition: .when(traits: ["PostgreSQL"])),
        // The test servers' graceful shutdown (TestServer.serve) needs it with Hummingbird alone too.
        .product(
          name: "ServiceLifecycle", package: "swift-service-lifecycle",
          condition: .when(traits: ["PostgreSQL", "Hummingbird"])),
        // The client side, end to end: URLSession and AsyncHTTPClient against servers in process.
        "PaceHTTPClient", "PaceAsyncHTTPClient",
        .product(name: "AsyncHTTPClient", package: "async-http-client", condition: .when(traits: ["AsyncHTTPClient"])),
        .product(name: "NIOHTTP1", package: "swift-nio", condition: .when(traits: ["AsyncHTTPClient"])),
        // The spans, recorded in memory (TracingTests).
        .product(name: "Tracing", package: "swift-distributed-tracing", condition: .when(traits: ["PostgreSQL"])),
        .product(
          name: "InMemoryTracing", package: "swift-distributed-tracing", condition: .when(traits: ["PostgreSQL"])),
      ],
      swiftSettings: swiftSettings
    ),
  ],
  swiftLanguageModes: [.v6]
)
