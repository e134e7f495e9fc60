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
  ],
  targets: [
    // The library: toolchain only (Dispatch, Synchronization).
    .target(name: "Pace", swiftSettings: swiftSettings),
    .testTarget(name: "PaceTests", dependencies: ["Pace"], swiftSettings: swiftSettings),
  ],
  swiftLanguageModes: [.v6]
)
