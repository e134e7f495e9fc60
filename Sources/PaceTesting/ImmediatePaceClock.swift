/// A clock on which nothing waits: `sleep` returns at once, and time jumps to its deadline.
///
/// The async twin of ``ImmediateScheduler``: pass it where async code under test takes a
/// `Clock` (`AsyncDebouncer`, `.debounced`, a view model's `clock.sleep`) when the timing is not
/// the point, and the code runs straight through.
///
/// ```swift
/// @Test func theSearchReturnsItsResults() async throws {
///   let search = AsyncDebouncer(for: .milliseconds(300), clock: ImmediatePaceClock()) { (query: String) in
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
///
/// Named apart from swift-clocks' `ImmediateClock`, so that a test that imports both uses each
/// by its name (while the deprecated `ImmediateClock` alias of this one remains, such a file
/// writes `import class Clocks.ImmediateClock` to mean swift-clocks' by the bare name).
public final class ImmediatePaceClock: Clock, Sendable {
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

/// PaceTesting's immediate clock, by its former name.
@available(
  *, deprecated, renamed: "ImmediatePaceClock",
  message: "named apart from swift-clocks' ImmediateClock, so that a test can import both"
)
public typealias ImmediateClock = ImmediatePaceClock
