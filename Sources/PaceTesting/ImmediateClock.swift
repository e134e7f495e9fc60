/// A clock on which nothing waits: `sleep` returns at once, and time jumps to its deadline.
///
/// The async twin of ``ImmediateScheduler``: pass it where async code under test takes a
/// `Clock` (`AsyncDebouncer`, `.debounced`, a view model's `clock.sleep`) when the timing is not
/// the point, and the code runs straight through.
///
/// ```swift
/// @Test func theSearchReturnsItsResults() async throws {
///   let search = AsyncDebouncer(for: .milliseconds(300), clock: ImmediateClock()) { (query: String) in
///     query.uppercased()
///   }
///   #expect(try await search.submit("swift").value == "SWIFT")   // no time to advance
/// }
/// ```
///
/// `now` starts at `PaceInstant.zero` (or the instant you pass) and moves forward to each
/// deadline slept until, never back. A sleep still throws `CancellationError` in a cancelled
/// task. Pace's own timers arm as tasks that sleep on it, so they fire on the next turn of the
/// concurrency runtime, not synchronously: await the result, not a time.
public final class ImmediateClock: Clock, Sendable {
  private let current: LockedState<PaceInstant>

  /// A clock whose time starts at `now`.
  public init(now: PaceInstant = .zero) {
    current = LockedState(now)
  }

  /// The latest deadline slept until, or the starting instant.
  public var now: PaceInstant {
    current.withLock { $0 }
  }

  /// One nanosecond.
  public var minimumResolution: Duration { .nanoseconds(1) }

  /// Moves time to `deadline` if it is later, and returns without waiting.
  ///
  /// - Parameters:
  ///   - deadline: The instant to move to.
  ///   - tolerance: Ignored.
  /// - Throws: `CancellationError` if the task is cancelled.
  public func sleep(until deadline: PaceInstant, tolerance: Duration? = nil) async throws {
    try Task.checkCancellation()
    current.withLock { $0 = max($0, deadline) }
  }
}
