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
  private let storage = LockedState<[(time: PaceInstant, value: Value)]>([])
  private let clock: (any PaceScheduler)?

  /// A recorder that stamps each value with `clock`'s time (`PaceInstant.zero` without one).
  public init(clock: (any PaceScheduler)? = nil) {
    self.clock = clock
  }

  /// Appends `value`, stamped with the clock's time now.
  public func record(_ value: Value) {
    let now = clock?.now ?? .zero
    storage.withLock { $0.append((now, value)) }
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
    storage.withLock { $0.removeAll() }
  }
}

extension LockedRecorder where Value == Void {
  /// Records that something happened, and when.
  public func record() { record(()) }
}
