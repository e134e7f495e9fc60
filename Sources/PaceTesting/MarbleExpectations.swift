import Testing
import XCTest

/// Checks that a marble input fed through code produces the expected marble output
/// (Swift Testing).
///
/// The input runs on a `TestScheduler` in virtual time (see `MarbleRunner`), so nothing
/// sleeps. `build` sets up the code under test on the harness's scheduler and returns what the
/// input drives: one of Pace's primitives, or your own code behind `MarbleCalls { ... }`.
///
/// ```swift
/// @Test func searchIsDebounced() {
///   expectMarbles("a-b-c------d---", step: .milliseconds(100), through: { marbles in
///     marbles.debouncer(for: .milliseconds(300))
///   }, equals: "-------c------d")
/// }
///
/// @Test func myModelDebouncesSearches() {
///   expectMarbles("a-b-c------d---", step: .milliseconds(100), through: { marbles in
///     let model = SearchModel(scheduler: marbles.scheduler) { query in marbles.emit(query) }
///     return MarbleCalls { model.queryChanged($0) }
///   }, equals: "-------c------d")
/// }
/// ```
///
/// Only events count: `"--c"` equals `"--c---"`, and spaces may align diagrams. On failure the
/// issue shows the three diagrams aligned:
///
/// ```
/// Marble diagrams differ (step 100ms):
///   input     a-b-c------d
///   expected  ------c--------d
///   actual    -------c------d
/// ```
///
/// - Parameters:
///   - input: The input diagram; a `step: 100ms` header may say how long a step is.
///   - stepLength: How long a step is, unless the input has a header.
///   - scheduler: The scheduler to run on; a new one by default.
///   - build: Sets up the code under test and returns its input.
///   - expected: The expected output diagram.
///   - sourceLocation: Where to report a failure.
/// - Returns: The run, for further checks; `nil` if it could not run.
@discardableResult
public func expectMarbles<Input: MarbleInput>(
  _ input: String,
  step stepLength: Duration? = nil,
  scheduler: TestScheduler = TestScheduler(),
  through build: (MarbleHarness) throws -> Input,
  equals expected: String,
  sourceLocation: SourceLocation = #_sourceLocation
) -> MarbleRun? {
  let outcome = MarbleComparison.run(
    input, stepLength: stepLength, scheduler: scheduler, through: build, expected: expected)
  if let failure = outcome.failure {
    Issue.record(Comment(rawValue: failure), sourceLocation: sourceLocation)
  }
  return outcome.run
}

/// Asserts that a marble input fed through code produces the expected marble output (XCTest).
///
/// The XCTest twin of ``expectMarbles(_:step:scheduler:through:equals:sourceLocation:)``:
///
/// ```swift
/// final class SearchTests: XCTestCase {
///   func testSearchIsDebounced() {
///     XCTAssertMarbles("a-b-c------d---", step: .milliseconds(100), through: { marbles in
///       marbles.debouncer(for: .milliseconds(300))
///     }, equals: "-------c------d")
///   }
/// }
/// ```
///
/// - Parameters:
///   - input: The input diagram; a `step: 100ms` header may say how long a step is.
///   - stepLength: How long a step is, unless the input has a header.
///   - scheduler: The scheduler to run on; a new one by default.
///   - build: Sets up the code under test and returns its input.
///   - expected: The expected output diagram.
///   - file: Where to report a failure.
///   - line: Where to report a failure.
/// - Returns: The run, for further checks; `nil` if it could not run.
@discardableResult
public func XCTAssertMarbles<Input: MarbleInput>(
  _ input: String,
  step stepLength: Duration? = nil,
  scheduler: TestScheduler = TestScheduler(),
  through build: (MarbleHarness) throws -> Input,
  equals expected: String,
  file: StaticString = #filePath,
  line: UInt = #line
) -> MarbleRun? {
  let outcome = MarbleComparison.run(
    input, stepLength: stepLength, scheduler: scheduler, through: build, expected: expected)
  if let failure = outcome.failure {
    XCTFail(failure, file: file, line: line)
  }
  return outcome.run
}

/// The framework-neutral part of the marble assertions: runs, compares, and words the failure.
enum MarbleComparison {
  struct Outcome {
    var run: MarbleRun?
    /// The failure message; `nil` when the output is as expected.
    var failure: String?
  }

  static func run<Input: MarbleInput>(
    _ input: String,
    stepLength: Duration?,
    scheduler: TestScheduler,
    through build: (MarbleHarness) throws -> Input,
    expected expectedText: String
  ) -> Outcome {
    let expected: MarbleDiagram
    do {
      expected = try MarbleDiagram(expectedText)
    } catch {
      return Outcome(failure: "The expected marble diagram is malformed, \(error)")
    }
    let run: MarbleRun
    do {
      let length = stepLength ?? expected.stepLength
      run = try MarbleRunner.run(input, stepLength: length, scheduler: scheduler, through: build)
    } catch let error as MarbleRunError {
      return Outcome(failure: "Cannot run the marble input: \(error)")
    } catch {
      return Outcome(failure: "Setting up the code under test threw: \(error)")
    }
    if let header = expected.stepLength, header != run.stepLength {
      return Outcome(
        run: run,
        failure: "The expected diagram's header says step: \(DurationText.format(header)) but the input's step is "
          + DurationText.format(run.stepLength))
    }
    return Outcome(run: run, failure: failure(run: run, expected: expected))
  }

  /// Compares the run's output with `expected`; `nil` if they match.
  static func failure(run: MarbleRun, expected: MarbleDiagram) -> String? {
    var notes: [String] = []
    let actual: MarbleDiagram
    do {
      actual = try run.outputDiagram(offGrid: .reject)
    } catch {
      notes.append("note: \(error)")
      do {
        actual = try run.outputDiagram(offGrid: .floor)
      } catch {
        return "Cannot draw the output: \(error)"
      }
    }
    if notes.isEmpty, actual.events == expected.events { return nil }
    let table = MarbleDiagram.table(
      [("input", run.input), ("expected", expected), ("actual", actual)], indent: "  ")
    return (["Marble diagrams differ (step \(DurationText.format(run.stepLength))):", table] + notes)
      .joined(separator: "\n")
  }
}
