/// Records values from any task or thread, in order, each with the virtual time it was recorded
/// at: the box a test's fake dependencies and callbacks write to.
///
/// ```swift
/// @Test func typingSavesOnce() {
///   let scheduler = TestScheduler()
///   let saved = LockedRecorder<String>(clock: scheduler)
///   let save = Debouncer<String>(for: .seconds(1), scheduler: scheduler) { saved.record($0) }
///   save("H")
///   save("Hi")
///   scheduler.advance(by: .seconds(1))
///   #expect(saved.values == ["Hi"])
///   #expect(saved.times == [.seconds(1)])
/// }
/// ```
///
/// Without a clock, every value is stamped `PaceInstant.zero`.
public final class LockedRecorder<Value: Sendable>: Sendable {
  private struct State {
    var entries: [(time: PaceInstant, value: Value)] = []
    /// Tests waiting for a number of values (``waitForValues(_:timeout:fileID:filePath:line:column:)``).
    var waiters = CountWaiters()
  }

  private let storage = LockedState(State())
  private let clock: (any PaceScheduler)?

  /// A recorder that stamps each value with `clock`'s time (`PaceInstant.zero` without one).
  public init(clock: (any PaceScheduler)? = nil) {
    self.clock = clock
  }

  /// Appends `value`, stamped with the clock's time now.
  public func record(_ value: Value) {
    let now = clock?.now ?? .zero
    let ready = storage.withLock { state in
      state.entries.append((now, value))
      return state.waiters.takeReady(current: state.entries.count)
    }
    for waiter in ready { waiter.resume(returning: true) }
  }

  /// The values recorded so far, oldest first.
  public var values: [Value] { storage.withLock { $0.entries.map(\.value) } }

  /// The time of each value, oldest first.
  public var times: [PaceInstant] { storage.withLock { $0.entries.map(\.time) } }

  /// The values with their times, oldest first.
  public var entries: [(time: PaceInstant, value: Value)] { storage.withLock { $0.entries } }

  /// How many values were recorded.
  public var count: Int { storage.withLock { $0.entries.count } }

  /// Forgets what was recorded.
  public func removeAll() {
    storage.withLock { $0.entries.removeAll() }
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
    _ count: Int,
    timeout: Duration = .seconds(30),
    fileID: String = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) async {
    let id = storage.withLock { $0.waiters.makeID() }
    let reached = await waitBounded(
      id: id, timeout: timeout, withdraw: { [weak self] id in self?.storage.withLock { $0.waiters.remove(id: id) } }
    ) { continuation in
      storage.withLock { state in
        state.waiters.add(id: id, count: count, continuation, current: state.entries.count)
      }
    }
    guard reached else {
      reportFailure(
        "LockedRecorder.waitForValues(\(count)): waited \(timeout) of real time for \(count) value(s), saw"
          + " \(values.count) \(values): the code under test never recorded them",
        at: FailureLocation(fileID: fileID, filePath: filePath, line: line, column: column))
      return
    }
  }
}

extension LockedRecorder where Value == Void {
  /// Records that something happened, and when.
  public func record() { record(()) }
}
