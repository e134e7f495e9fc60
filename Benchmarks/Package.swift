// swift-tools-version: 6.1
import PackageDescription

// Pace's benchmarks, a package of their own so that the library never depends on the benchmark
// harness. Run from this folder: `swift package benchmark` (see README.md).

/// SwiftPM names a path dependency after its folder, and a clone of Pace may live in a folder of
/// any name, so the package is referred to by its folder's name.
let pacePackage = String(Context.packageDirectory.split(separator: "/").dropLast().last ?? "Pace")

let package = Package(
  name: "PaceBenchmarks",
  platforms: [.macOS(.v13), .iOS(.v16)],
  dependencies: [
    .package(path: "../"),
    // Only the malloc interposer trait: it gives the malloc counts, and the toolchain's
    // runtime-interposer trait pulls in a package that is not needed here.
    .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    .package(url: "https://github.com/apple/swift-async-algorithms", from: "1.0.0"),
    // The span code of the server modules, without a tracer (TracingBenchmarks).
    .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.3.0"),
  ],
  targets: [
    // The lock the naive contenders and the floors use: Mutex on Linux, os_unfair_lock on Apple
    // platforms (Mutex needs macOS 15),
    // and the snippets that WorkBenchmarks and WorkRounds set beside KeyedSharedWork and Batcher.
    .target(
      name: "BenchmarkSupport",
      dependencies: [.product(name: "Pace", package: pacePackage)],
      path: "Benchmarks/BenchmarkSupport"
    ),
    // Debouncer.call, Throttler.call, the naive DispatchWorkItem pattern and the floors.
    benchmark("CoreBenchmarks"),
    // How late a trailing invocation fires on a real DispatchQueue.
    benchmark("LatencyBenchmarks"),
    // Coalescer.signal beside DispatchSourceUserDataAdd.
    benchmark("CoalescerBenchmarks"),
    // Pace's async operators beside swift-async-algorithms'.
    benchmark(
      "AsyncBenchmarks",
      dependencies: [.product(name: "AsyncAlgorithms", package: "swift-async-algorithms")]
    ),
    // KeyedDebouncer and KeyedRateLimiter beside a dictionary of Debouncers / RateLimiters.
    benchmark("KeyedBenchmarks"),
    // KeyedSharedWork and Batcher beside an actor with a dictionary of tasks, and one with a timer.
    benchmark("WorkBenchmarks"),
    // A decision with and without the span code the server modules wrap it in, no tracer bootstrapped.
    benchmark(
      "TracingBenchmarks",
      dependencies: [.product(name: "Tracing", package: "swift-distributed-tracing")]
    ),
    // Resident bytes per key and memory after quiet, from /proc/self/statm (see its header).
    .executableTarget(
      name: "KeyedMemory",
      dependencies: ["BenchmarkSupport", .product(name: "Pace", package: pacePackage)],
      path: "Benchmarks/KeyedMemory"
    ),
    // KeyedSharedWork and Batcher beside their snippets in a plain process (see its header).
    .executableTarget(
      name: "WorkRounds",
      dependencies: ["BenchmarkSupport", .product(name: "Pace", package: pacePackage)],
      path: "Benchmarks/WorkRounds"
    ),
  ],
  swiftLanguageModes: [.v6]
)

/// A benchmark executable under `Benchmarks/<name>/`, run by the Benchmark plugin.
func benchmark(_ name: String, dependencies: [Target.Dependency] = []) -> Target {
  .executableTarget(
    name: name,
    dependencies: [
      .product(name: "Benchmark", package: "benchmark"),
      .product(name: "Pace", package: pacePackage),
      "BenchmarkSupport",
    ] + dependencies,
    path: "Benchmarks/\(name)",
    plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
  )
}
