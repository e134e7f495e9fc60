// swift-tools-version: 6.0
import PackageDescription

let swiftSettings: [SwiftSetting] = [
  .enableUpcomingFeature("ExistentialAny"),
  .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
  name: "Pace",
  // `Swift.Duration` needs these; Linux has no minimum.
  platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9)],
  products: [
    .library(name: "Pace", targets: ["Pace"]),
    .library(name: "PaceTesting", targets: ["PaceTesting"]),
    .library(name: "PaceUI", targets: ["PaceUI"]),
    .executable(name: "pace", targets: ["pace"]),
  ],
  dependencies: [
    .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
    // Tests only: proves that Pace's operators and swift-async-algorithms' can be imported together.
    .package(url: "https://github.com/apple/swift-async-algorithms", from: "1.0.0"),
  ],
  targets: [
    // MARK: Library: toolchain only (Dispatch, Synchronization).
    .target(name: "Pace", swiftSettings: swiftSettings),

    // MARK: Marble diagrams: parsing, rendering, and running primitives on virtual time.
    .target(name: "PaceMarbles", dependencies: ["Pace"], swiftSettings: swiftSettings),

    // MARK: For users' tests: marble expectations for Swift Testing and XCTest.
    .target(name: "PaceTesting", dependencies: ["Pace", "PaceMarbles"], swiftSettings: swiftSettings),

    // MARK: UIKit/AppKit glue, thin; its logic lives in `Pace`.
    .target(name: "PaceUI", dependencies: ["Pace"], swiftSettings: swiftSettings),
    // Test fixtures, in no product: UIKit and AppKit stand-ins, and PaceUI's glue compiled against
    // them (`Sources/PaceUIOnStandIns` is a symlink to `Sources/PaceUI`; see Shared/PaceUI.swift).
    .target(name: "UIKitStandIn", swiftSettings: swiftSettings),
    .target(name: "AppKitStandIn", swiftSettings: swiftSettings),
    .target(
      name: "PaceUIOnStandIns",
      dependencies: ["Pace", "UIKitStandIn", "AppKitStandIn"],
      swiftSettings: swiftSettings + [.define("PACE_UI_STAND_IN")]
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

    // MARK: Tests
    .testTarget(name: "PaceTests", dependencies: ["Pace", "PaceTesting"], swiftSettings: swiftSettings),
    .testTarget(name: "PaceCompositionTests", dependencies: ["Pace", "PaceTesting"], swiftSettings: swiftSettings),
    .testTarget(
      name: "PaceUITests",
      dependencies: ["Pace", "PaceUI", "PaceUIOnStandIns", "UIKitStandIn", "AppKitStandIn"],
      swiftSettings: swiftSettings
    ),
    .testTarget(name: "PaceAsyncTests", dependencies: ["Pace"], swiftSettings: swiftSettings),
    .testTarget(name: "PaceKeyedTests", dependencies: ["Pace"], swiftSettings: swiftSettings),
    .testTarget(
      name: "PaceAsyncAlgorithmsInteropTests",
      dependencies: ["Pace", .product(name: "AsyncAlgorithms", package: "swift-async-algorithms")],
      swiftSettings: swiftSettings
    ),
    .testTarget(name: "PaceMarblesTests", dependencies: ["PaceMarbles", "PaceTesting"], swiftSettings: swiftSettings),
    .testTarget(name: "PaceToolTests", dependencies: ["PaceTool"], swiftSettings: swiftSettings),
  ],
  swiftLanguageModes: [.v6]
)
