import Pace

/// Runs `body` on the main actor: at once when already there, otherwise on the main queue.
///
/// Teardowns use it, because a connection may be disposed (or released) on any thread while
/// UIKit and AppKit objects must be touched on the main thread.
func onMainActor(_ body: @escaping @MainActor @Sendable () -> Void) {
  let main = DispatchScheduler.main
  if main.isCurrent {
    MainActor.assumeIsolated(body)
  } else {
    main.enqueue { MainActor.assumeIsolated(body) }
  }
}
