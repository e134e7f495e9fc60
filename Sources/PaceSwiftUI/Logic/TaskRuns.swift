/// The logic behind `task(id:debounce:)`: which run of the work SwiftUI's `task(id:)` should
/// hold.
///
/// The modifier hands `current` to `task(id:)`, so SwiftUI starts the work when it becomes a
/// new number and cancels it when it changes again: a change of the view's id sets it to `nil`
/// at once (the running work is stale: cancelled, and nothing runs), and the pacer's invocation
/// sets it to the next number (the work starts). The first run is on appear, as with `task(id:)`.
struct TaskRuns: Equatable, Sendable {
  /// The run that should be going; `nil` while a change waits for the pacer.
  private(set) var current: Int? = 0
  private var next = 1

  /// The id changed: the running work is superseded.
  mutating func supersede() {
    current = nil
  }

  /// The pacer's invocation: start a new run.
  mutating func start() {
    current = next
    next += 1
  }
}
