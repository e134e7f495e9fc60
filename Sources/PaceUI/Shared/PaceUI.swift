// PaceUI: the thin UIKit and AppKit glue over Pace.
//
// Everything with logic is platform-independent and tested on virtual time: `Shared/ControlGate`
// (the button-bashing guard behind `disableTemporarily(for:siblings:)`), and Pace's
// `UpdateCoalescer` (behind `setNeedsReloadData()`), `Fuser`, `Diffuser`, `Throttler` and
// `Debouncer`. The other files only connect those types to framework objects, and each is
// compiled only where its framework exists:
// `UIKit/` with `canImport(UIKit)` (not watchOS, which has no controls), `AppKit/` with
// `canImport(AppKit)` (not Mac Catalyst), `Foundation/` (NotificationCenter) everywhere.
//
// ## How the glue is compiled and tested without UIKit
//
// This machine has neither UIKit nor AppKit, so the same glue files are compiled a second time,
// against small stand-in modules that declare exactly the framework API the glue uses, with
// Apple's signatures (`Tests/StandIns/UIKitStandIn`, `Tests/StandIns/AppKitStandIn`):
//
// - `Tests/StandIns/PaceUIOnStandIns` is a symbolic link to this directory. SwiftPM builds it as a
//   second target, `PaceUIOnStandIns`, with the compilation condition `PACE_UI_STAND_IN` and a
//   dependency on the stand-ins. SwiftPM rejects two targets that share a directory path, but
//   not a directory reached through a link, and the sources are then byte-for-byte the same files.
// - Each glue file starts with
//   `#if PACE_UI_STAND_IN import UIKitStandIn #elseif canImport(UIKit) import UIKit #endif`:
//   the code below the import is identical on both paths. A custom condition is used rather than
//   `canImport(UIKitStandIn)` because every module of the package is built into one directory,
//   where `canImport` would find the stand-in from the real `PaceUI` target as well.
// - The one place where the paths differ is `UIKit/ActionTrampoline.swift`: Linux has no
//   Objective-C runtime, so no `@objc` and no `#selector`; there the stand-in's `NSObject`
//   receives the selector instead.
// - `Tests/PaceUITests` drives the glue through the stand-ins (subclasses that record
//   `reloadData()`, `sendActions(for:)`, a simulated gesture) and runs the Fuser laws on the UI
//   sources.
// - No product depends on the stand-ins or on `PaceUIOnStandIns`, so they never ship: a library
//   product exposes only the targets it lists, and `PaceUI` lists only `PaceUI`.
