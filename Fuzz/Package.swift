// swift-tools-version: 6.0
import PackageDescription

// libFuzzer targets for Pace's parsers, kept out of the main package so that `swift build` and
// `swift test` stay fast and need no sanitizer runtime. Sources/Pace, Sources/CPaceSupport,
// Sources/PaceMarbles, Sources/PaceHTTPServer, Sources/PaceHTTPClient and Sources/PaceTool are symlinks
// to the main package's sources, compiled here with the fuzzer's instrumentation; see
// CONTRIBUTING.md for the commands.
//
//   swift build --package-path Fuzz -c release --sanitize=fuzzer --sanitize=address
//   Fuzz/.build/release/FuzzTraceReader Fuzz/Corpus/TraceReader -max_total_time=300

// `--sanitize=fuzzer --sanitize=address` reach the compiler as two `-sanitize=` options, in no fixed
// order, and swiftc keeps only the last one: either no coverage counters (libFuzzer mutates blind) or
// no AddressSanitizer. Both in one option, after SwiftPM's, turn on both in every build; with
// `fuzzer`, swiftc adds clang's coverage (edge counters, PC table, comparisons, indirect calls).
let fuzzerAndAddressSanitizers = "-sanitize=fuzzer,address"
let swiftSettings: [SwiftSetting] = [
  .enableUpcomingFeature("ExistentialAny"),
  .enableUpcomingFeature("MemberImportVisibility"),
  .unsafeFlags([fuzzerAndAddressSanitizers]),
]
// libFuzzer supplies `main`; each target defines LLVMFuzzerTestOneInput instead.
let fuzzTargetSettings = swiftSettings + [.unsafeFlags(["-parse-as-library"])]

let package = Package(
  name: "PaceFuzz",
  platforms: [.macOS(.v13)],
  dependencies: [
    .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
    .package(url: "https://github.com/apple/swift-http-structured-headers", from: "1.7.0"),
    .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
  ],
  targets: [
    .target(name: "Pace", dependencies: ["CPaceSupport"], swiftSettings: swiftSettings),
    .target(name: "CPaceSupport"),
    .target(name: "PaceMarbles", dependencies: ["Pace"], swiftSettings: swiftSettings),
    // Its framework-free part only: the middlewares' code is behind traits this package never sets.
    .target(name: "PaceHTTPServer", dependencies: ["Pace"], swiftSettings: swiftSettings),
    .target(
      name: "PaceHTTPClient",
      dependencies: [
        "Pace",
        .product(name: "RawStructuredFieldValues", package: "swift-http-structured-headers"),
        .product(name: "CoreMetrics", package: "swift-metrics"),
      ],
      swiftSettings: swiftSettings
    ),
    .target(
      name: "PaceTool",
      dependencies: ["Pace", "PaceMarbles", .product(name: "ArgumentParser", package: "swift-argument-parser")],
      resources: [.copy("Traces")],
      swiftSettings: swiftSettings
    ),
    .executableTarget(name: "FuzzTraceReader", dependencies: ["PaceTool"], swiftSettings: fuzzTargetSettings),
    .executableTarget(name: "FuzzDurationText", dependencies: ["PaceMarbles"], swiftSettings: fuzzTargetSettings),
    .executableTarget(name: "FuzzMarbleParser", dependencies: ["PaceMarbles"], swiftSettings: fuzzTargetSettings),
    .executableTarget(name: "FuzzClientAddress", dependencies: ["PaceHTTPServer"], swiftSettings: fuzzTargetSettings),
    .executableTarget(name: "FuzzRateLimitFields", dependencies: ["PaceHTTPClient"], swiftSettings: fuzzTargetSettings),
  ],
  swiftLanguageModes: [.v6]
)
