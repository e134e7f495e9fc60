import PaceTesting

@testable import Pace

/// An unbounded channel of test events: code under test posts, the test awaits them in order.
/// Continuation-based: the test never polls or yields.
final class Signals<Value: Sendable>: Sendable {
  /// Noncopyable, because the values wait in a ``RingBuffer``, which owns them.
  private struct State: ~Copyable {
    var queue = RingBuffer<Value>()
    var waiter: UnsafeContinuation<Value, Never>?
  }

  private let state = LockedState(State())

  func post(_ value: Value) {
    let waiter = state.withLock { state -> UnsafeContinuation<Value, Never>? in
      if let waiter = state.waiter.take() { return waiter }
      state.queue.append(value)
      return nil
    }
    waiter?.resume(returning: value)
  }

  /// The next value posted, waiting for it if needed.
  func next() async -> Value {
    await withUnsafeContinuation { waiter in
      let value = state.withLock { state -> Value? in
        if let value = state.queue.popFirst() { return value }
        state.waiter = waiter
        return nil
      }
      if let value { waiter.resume(returning: value) }
    }
  }

  /// The values posted and not yet taken.
  var queued: [Value] {
    state.withLock { state in
      var values: [Value] = []
      values.reserveCapacity(state.queue.count)
      while let value = state.queue.popFirst() { values.append(value) }
      return values
    }
  }
}

/// A gate that work waits at until the test opens it; waiting honours cancellation.
final class Gate: Sendable {
  private struct State {
    var isOpen = false
    var waiters: [Int: UnsafeContinuation<Void, any Error>] = [:]
    var nextID = 0
  }

  private let state = LockedState(State())

  func open() {
    let waiters = state.withLock { state in
      state.isOpen = true
      defer { state.waiters = [:] }
      return Array(state.waiters.values)
    }
    for waiter in waiters { waiter.resume() }
  }

  func wait() async throws {
    let id = state.withLock { state in
      state.nextID += 1
      return state.nextID
    }
    try await withTaskCancellationHandler {
      try await withUnsafeThrowingContinuation { (waiter: UnsafeContinuation<Void, any Error>) in
        let result = state.withLock { state -> Result<Void, any Error>? in
          if state.isOpen { return .success(()) }
          if Task.isCancelled { return .failure(CancellationError()) }
          state.waiters[id] = waiter
          return nil
        }
        if let result { waiter.resume(with: result) }
      }
    } onCancel: {
      let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
      waiter?.resume(throwing: CancellationError())
    }
  }
}

/// A thread-safe log for test callbacks.
final class Log<Value: Sendable>: Sendable {
  private let state = LockedState<[Value]>([])

  func append(_ value: Value) {
    state.withLock { $0.append(value) }
  }

  var all: [Value] { state.withLock { $0 } }
}
