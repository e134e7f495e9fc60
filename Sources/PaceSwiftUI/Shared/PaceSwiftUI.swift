// PaceSwiftUI: the thin SwiftUI glue over Pace, built as PaceUI is.
//
// `Logic/` holds everything with behaviour, in types that import neither SwiftUI nor the
// stand-in (`ChangePacer`, `PacingControl`, `TaskRuns`), tested on virtual time. `SwiftUI/`
// holds the view modifiers that connect them to SwiftUI, compiled only where SwiftUI exists.
//
// ## How the glue is compiled and tested without SwiftUI
//
// `Tests/StandIns/PaceSwiftUIOnStandIn` is a symbolic link to this directory, built as a second target
// with the condition `PACE_SWIFTUI_STAND_IN` against `Tests/StandIns/SwiftUIStandIn`, which declares
// exactly the SwiftUI API the glue uses with Apple's signatures. Each glue file starts with
// `#if PACE_SWIFTUI_STAND_IN import SwiftUIStandIn #elseif canImport(SwiftUI) import SwiftUI #endif`,
// so the code below the import is the same on both paths. `Tests/PaceSwiftUITests` renders the
// modifiers through the stand-in's host, which plays SwiftUI's part: it keeps `@State` across
// renders, calls `onChange` actions when a value changes, starts and cancels `task(id:)` tasks.
// No product depends on the stand-in, so it never ships.
