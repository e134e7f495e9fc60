import Foundation

/// How many runs a seeded fuzz test makes: `runs`, times `PACE_FUZZ_SCALE` when it is set.
///
/// The default `swift test` stays quick; CI's fuzz step sets the scale and runs the fuzz tests
/// alone, deeper. A scale that is not a positive whole number counts as 1.
public func fuzzRuns(_ runs: Int) -> Int {
  let scale = ProcessInfo.processInfo.environment["PACE_FUZZ_SCALE"].flatMap { Int($0) } ?? 1
  return scale > 0 ? runs.multipliedReportingOverflow(by: scale).partialValue : runs
}
