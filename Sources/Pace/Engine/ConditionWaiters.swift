/// Tests waiting for a condition on a primitive's state (`Condition`: "at least 3 callers wait
/// for this key", "no run is in flight"), each with an id that its time limit withdraws it by.
/// Kept in the primitive's state, under its lock; ``LockedState/waitUntil(_:in:timeout:holds:)``
/// waits on them.
@usableFromInline
package struct ConditionWaiters<Condition> {
  @usableFromInline
  struct Entry {
    let id: UInt64
    let condition: Condition
    let continuation: UnsafeContinuation<Bool, Never>
  }

  private var nextID: UInt64 = 0
  @usableFromInline var entries: [Entry] = []

  package init() {}

  /// Whether no test waits: what a primitive's hot path checks (inlined) before anything else.
  @inlinable package var isEmpty: Bool { entries.isEmpty }

  /// A new waiter's id, made before it waits so that its time limit can withdraw it.
  package mutating func makeID() -> UInt64 {
    nextID &+= 1
    return nextID
  }

  /// Adds a waiter for `condition`; `false` (not added) when it `holdsNow`, and the caller
  /// resumes the continuation with `true`.
  package mutating func add(
    id: UInt64, _ condition: Condition, _ continuation: UnsafeContinuation<Bool, Never>, holdsNow: Bool
  ) -> Bool {
    guard !holdsNow else { return false }
    entries.append(Entry(id: id, condition: condition, continuation: continuation))
    return true
  }

  /// Takes the waiters whose condition holds now.
  package mutating func takeReady(holds: (Condition) -> Bool) -> [UnsafeContinuation<Bool, Never>] {
    if entries.isEmpty { return [] }
    var ready: [UnsafeContinuation<Bool, Never>] = []
    entries.removeAll { entry in
      guard holds(entry.condition) else { return false }
      ready.append(entry.continuation)
      return true
    }
    return ready
  }

  /// Takes the waiter `id` out, when its time limit is up; `nil` if it was resumed already.
  package mutating func remove(id: UInt64) -> UnsafeContinuation<Bool, Never>? {
    guard let index = entries.firstIndex(where: { $0.id == id }) else { return nil }
    return entries.remove(at: index).continuation
  }
}

extension LockedState {
  /// Waits until `condition` holds on the state: `true` once it does (at once if it does now),
  /// resumed by whoever changes the state and takes the ready waiters from `waiters`, not by
  /// polling; `false` after `timeout` of real time (`nil`: no limit).
  ///
  /// - Parameters:
  ///   - condition: What to wait for.
  ///   - waiters: Where in the state the waiters are kept.
  ///   - timeout: The real time to wait at most.
  ///   - holds: Whether `condition` holds on the state now, asked under the lock.
  package func waitUntil<Condition>(
    _ condition: Condition, in waiters: any WritableKeyPath<State, ConditionWaiters<Condition>> & Sendable,
    timeout: Duration?, holds: (State, Condition) -> Bool
  ) async -> Bool {
    let id = withLock { $0[keyPath: waiters].makeID() }
    return await waitBounded(
      id: id, timeout: timeout, withdraw: { [weak self] id in self?.withLock { $0[keyPath: waiters].remove(id: id) } }
    ) { continuation in
      withLock { state in
        let holdsNow = holds(state, condition)
        return state[keyPath: waiters].add(id: id, condition, continuation, holdsNow: holdsNow)
      }
    }
  }
}
