import Pace

/// A ``ConnectivitySignal`` that the caller sets: for platforms without Network's path monitor
/// (Linux, Android, Windows), for an app that learns of the network its own way, and for tests.
///
/// ```swift
/// let connectivity = ManualConnectivity(isReachable: false)
/// Task { try await connectivity.waitUntilReachable(); print("online") }
/// connectivity.setReachable(true)   // the waiting task goes on
/// ```
public final class ManualConnectivity: ConnectivitySignal {
  private struct State {
    var machine: ReachabilityMachine
    var continuations: [UInt64: UnsafeContinuation<Void, any Error>] = [:]
    var nextID: UInt64 = 0
  }

  private let state: LockedState<State>

  /// A signal that starts as `isReachable` says: reachable by default.
  public init(isReachable: Bool = true) {
    state = LockedState(State(machine: ReachabilityMachine(isReachable: isReachable)))
  }

  /// Whether the path is up now.
  public var isReachable: Bool { state.withLock { $0.machine.isReachable } }

  /// How many callers wait in ``waitUntilReachable()`` now.
  public var waitingCount: Int { state.withLock { $0.machine.waiting.count } }

  /// Says whether the path is up; `true` resumes every caller waiting in ``waitUntilReachable()``.
  public func setReachable(_ reachable: Bool) {
    let ready = state.withLock { state in
      state.machine.setReachable(reachable).compactMap { state.continuations.removeValue(forKey: $0) }
    }
    // Resumed with the lock released: a resumed caller may run at once and call in again.
    for continuation in ready { continuation.resume() }
  }

  /// Returns at once when the path is up, else when ``setReachable(_:)`` says it is; throws
  /// `CancellationError` if the task is cancelled meanwhile.
  public func waitUntilReachable() async throws {
    let id = state.withLock { state in
      state.nextID &+= 1
      return state.nextID
    }
    try await withTaskCancellationHandler(
      operation: {
        try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
          let action = state.withLock { state in
            // Cancelled before it could wait: the handler below found nothing to resume.
            if Task.isCancelled { return ReachabilityMachine.WaitAction?.none }
            let action = state.machine.wait(id: id)
            if action == .suspend { state.continuations[id] = continuation }
            return action
          }
          switch action {
          case .proceed?: continuation.resume()
          case .suspend?: break
          case nil: continuation.resume(throwing: CancellationError())
          }
        }
      },
      onCancel: {
        let cancelled = state.withLock { state in
          state.machine.cancel(id: id) ? state.continuations.removeValue(forKey: id) : nil
        }
        cancelled?.resume(throwing: CancellationError())
      })
  }
}
