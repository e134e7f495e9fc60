/// Records values from any task or thread, in order, each with the virtual time it was recorded
/// at: the box a test's fake dependencies and callbacks write to.
///
/// ```swift
/// @Test func typingSavesOnce() {
///   let scheduler = TestScheduler()
///   let saved = LockedRecorder<String>(scheduler: scheduler)
///   let save = Debouncer<String>(for: .seconds(1), scheduler: scheduler) { saved.record($0) }
///   save("H")
///   save("Hi")
///   scheduler.advance(by: .seconds(1))
///   #expect(saved.values == ["Hi"])
///   #expect(saved.times == [.seconds(1)])
/// }
/// ```
///
/// Without a scheduler, every value is stamped `PaceInstant.zero`.
public final class LockedRecorder<Value: Sendable>: Sendable {
  private let storage = LockedState<[(time: PaceInstant, value: Value)]>([])
  /// How many values were recorded, for ``waitForValues(_:timeout:fileID:filePath:line:column:)``.
  private let recorded = WaitableCount()
  private let scheduler: (any PaceScheduler)?

  /// A recorder that stamps each value with `scheduler`'s time (`PaceInstant.zero` without one).
  public init(scheduler: (any PaceScheduler)? = nil) {
    self.scheduler = scheduler
  }

  /// A recorder that stamps each value with `clock`'s time.
  @_disfavoredOverload
  @available(*, deprecated, renamed: "init(scheduler:)")
  public convenience init(clock: (any PaceScheduler)? = nil) {
    self.init(scheduler: clock)
  }

  /// Appends `value`, stamped with the scheduler's time now.
  public func record(_ value: Value) {
    let now = scheduler?.now ?? .zero
    storage.withLock { $0.append((now, value)) }
    recorded.add()
  }

  /// The values recorded so far, oldest first.
  public var values: [Value] { storage.withLock { $0.map(\.value) } }

  /// The time of each value, oldest first.
  public var times: [PaceInstant] { storage.withLock { $0.map(\.time) } }

  /// The values with their times, oldest first.
  public var entries: [(time: PaceInstant, value: Value)] { storage.withLock { $0 } }

  /// How many values were recorded.
  public var count: Int { storage.withLock { $0.count } }

  /// Forgets what was recorded.
  public func removeAll() {
    let removed = storage.withLock { entries in
      defer { entries.removeAll() }
      return entries.count
    }
    recorded.add(-removed)
  }

  /// Returns once at least `count` values are recorded (at once if they are): for work that
  /// records from a task of its own, such as a pacer's timer on a clock other than a
  /// `TestScheduler`.
  ///
  /// If fewer are recorded within `timeout` of real time, it fails the test (Swift Testing or
  /// XCTest, whichever runs it), naming the values it saw, and returns.
  ///
  /// - Parameters:
  ///   - count: How many values to wait for.
  ///   - timeout: The real time to wait before failing.
  ///   - fileID: Where to report a failure.
  ///   - filePath: Where to report a failure.
  ///   - line: Where to report a failure.
  ///   - column: Where to report a failure.
  public func waitForValues(
    _ count: Int, timeout: Duration = .seconds(30),
    fileID: String = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column
  ) async {
    await waitFor(
      "LockedRecorder.waitForValues(\(count))", count, "value(s)", timeout: timeout,
      at: FailureLocation(fileID, filePath, line, column),
      until: { await recorded.waitUntil(atLeast: count, timeout: $0) }, saw: { "\(values.count) \(values)" },
      hint: "the code under test never recorded them")
  }
}

extension LockedRecorder where Value == Void {
  /// Records that something happened, and when.
  public func record() { record(()) }
}
