/// A scheduler that fails the test if anything uses it.
///
/// Hand it to code whose path under test must not debounce, throttle or wait: reading ``now``,
/// asking ``isCurrent``, or scheduling anything records a failure (an issue in Swift Testing,
/// an `XCTFail` in XCTest) that names the scheduler, the member used, and where the scheduler
/// was made. Scheduled work is dropped, never run.
///
/// ```swift
/// @Test func loadingCachedResultsNeverWaits() {
///   let model = SearchModel(cache: ["swift": results], scheduler: UnimplementedScheduler("search"))
///   model.show(cached: "swift")          // must not go through the debouncer
///   #expect(model.results == results)
/// }
/// ```
///
/// If the code does use it, the test fails with
/// `UnimplementedScheduler "search" (made at SearchTests.swift:3): now was read`.
public struct UnimplementedScheduler: PaceScheduler {
  /// The name given in failures, to tell several apart.
  public let name: String
  private let location: FailureLocation

  /// A scheduler that fails when used.
  ///
  /// - Parameters:
  ///   - name: A name for failure messages.
  ///   - fileID: Where it is made; reported with failures.
  ///   - filePath: Where it is made; reported with failures.
  ///   - line: Where it is made; reported with failures.
  ///   - column: Where it is made; reported with failures.
  public init(
    _ name: String = "",
    fileID: String = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) {
    self.name = name
    self.location = FailureLocation(fileID, filePath, line, column)
  }

  /// Fails, and returns `PaceInstant.zero`.
  public var now: PaceInstant {
    fail("now was read")
    return .zero
  }

  /// Fails, and returns `true`.
  public var isCurrent: Bool {
    fail("isCurrent was read")
    return true
  }

  /// Fails, and drops `work`.
  @discardableResult
  public func schedule(at deadline: PaceInstant, _ work: @escaping @Sendable () -> Void) -> any PaceCancellable {
    fail("schedule(at: \(DurationText.format(deadline.offset))) was called; the work will never run")
    return NeverRuns()
  }

  /// Fails, and drops `work`.
  public func enqueue(_ work: @escaping @Sendable () -> Void) {
    fail("enqueue(_:) was called; the work will never run")
  }

  private func fail(_ what: String) {
    let file = location.fileID.split(separator: "/").last.map(String.init) ?? location.fileID
    let label = name.isEmpty ? "UnimplementedScheduler" : "UnimplementedScheduler \"\(name)\""
    reportFailure("\(label) (made at \(file):\(location.line)): \(what)", at: location)
  }

  private struct NeverRuns: PaceCancellable {
    func cancel() {}
  }
}
