// PaceObservation is its own module, not a file in Pace behind `#if canImport(Observation)`:
// `canImport` is true on every Apple SDK since 2023, so Pace itself would then link the
// Observation runtime for apps still deploying to iOS 16 or macOS 13, and Pace stays a module
// that needs nothing but the standard library, Dispatch and Synchronization.
#if canImport(Observation)
import Foundation
import Observation
import Pace

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension Fuser where Event: Sendable {
  /// A fuser whose events are the new values of an Observation-tracked expression.
  ///
  /// ```swift
  /// @MainActor @Observable final class SearchModel { var query = "" }
  ///
  /// let queries = Fuser.observing { model.query }
  ///   .debounced(for: .milliseconds(300))
  /// let connection = queries.connect { search($0) }
  /// ```
  ///
  /// Each change to a property that `value` reads, after connect, produces an event. Changes
  /// made in one turn of the scheduler arrive as one event with the latest value: Observation
  /// reports a change before it is made, so the value is read again one turn later, on
  /// `scheduler`. The current value at connect is not an event. `dispose()` stops tracking.
  ///
  /// `value` runs on the main actor, so a `@MainActor` model needs no hops; `scheduler` must run
  /// its work on the main thread (the main queue, or a `TestScheduler` advanced by a main-actor
  /// test), and must not run enqueued work inline (an immediate scheduler would read the value
  /// before the change is made).
  ///
  /// - Parameters:
  ///   - scheduler: Where the value is read again after a change; the main queue by default.
  ///   - value: The tracked expression, such as `{ model.query }`.
  public static func observing(
    scheduler: some PaceScheduler = .main,
    _ value: @escaping @MainActor @Sendable () -> Event
  ) -> Fuser<Event> {
    Fuser { dispatch in
      let tracking = ObservationTracking(scheduler: scheduler, value: value, dispatch: dispatch)
      tracking.start()
      return tracking
    }
  }
}

/// One connection of ``Pace/Fuser/observing(scheduler:_:)``: re-registers with Observation after
/// each change, until disposed.
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
final class ObservationTracking<Event: Sendable>: Disposable, Sendable {
  private let scheduler: any PaceScheduler
  private let value: @MainActor @Sendable () -> Event
  private let dispatch: @Sendable (Event) -> Void
  private let isDisposed = LockedState(false)

  init(
    scheduler: any PaceScheduler,
    value: @escaping @MainActor @Sendable () -> Event,
    dispatch: @escaping @Sendable (Event) -> Void
  ) {
    self.scheduler = scheduler
    self.value = value
    self.dispatch = dispatch
  }

  private var isActive: Bool {
    !isDisposed.withLock { $0 }
  }

  func start() {
    // Registered at once when connected on the scheduler, so no change after connect is missed.
    if scheduler.isCurrent {
      MainActor.assumeIsolated { track(dispatching: false) }
    } else {
      scheduler.enqueue { [weak self] in MainActor.assumeIsolated { self?.track(dispatching: false) } }
    }
  }

  func dispose() {
    isDisposed.withLock { $0 = true }
  }

  /// Reads `value` under tracking; the next change to what it read calls `changed()` once.
  @MainActor
  private func track(dispatching: Bool) {
    guard isActive else { return }
    let current = withObservationTracking {
      value()
    } onChange: { [weak self] in
      self?.changed()
    }
    if dispatching { dispatch(current) }
  }

  /// Called by Observation before the change is made, on the thread making it.
  private func changed() {
    guard isActive else { return }
    scheduler.enqueue { [weak self] in MainActor.assumeIsolated { self?.track(dispatching: true) } }
  }
}
#endif
