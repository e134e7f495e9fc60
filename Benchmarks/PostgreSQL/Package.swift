// swift-tools-version: 6.1
import PackageDescription

// PostgresRateLimitStore beside pgbench, the naive transaction and Redis: a plain executable that
// Scripts/postgres-benchmark.py drives (see Benchmarks/README.md). A package of its own so that
// the root package has no benchmark target and the other benchmarks do not build postgres-nio.

/// SwiftPM names a path dependency after its folder, and a clone of Pace may live in a folder of
/// any name, so the package is referred to by its folder's name.
let pacePackage = String(Context.packageDirectory.split(separator: "/").dropLast(2).last ?? "Pace")

let package = Package(
  name: "PacePostgresBenchmark",
  platforms: [.macOS(.v13)],
  dependencies: [
    .package(path: "../../", traits: ["PostgreSQL"]),
    .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.0"),
    .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
  ],
  targets: [
    .executableTarget(
      name: "pace-postgres-benchmark",
      dependencies: [
        .product(name: "Pace", package: pacePackage),
        .product(name: "PacePostgres", package: pacePackage),
        .product(name: "PostgresNIO", package: "postgres-nio"),
        .product(name: "Metrics", package: "swift-metrics"),
      ],
      path: "Sources/PacePostgresBenchmark"
    )
  ],
  swiftLanguageModes: [.v6]
)
