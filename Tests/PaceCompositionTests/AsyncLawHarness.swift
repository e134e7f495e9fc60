@testable import Pace

/// An `AsyncSequence` the laws control: each iteration is one listener. `emit` hands a value to
/// every live iterator and returns once each of them has asked for the next value, that is once
/// the value has been dispatched. Cancelling an iteration (disposing its connection) is its
/// teardown. No polling: every wait is a continuation resumed by the iterator.
final class ControlledSequence: AsyncSequence, Sendable {
  typealias Element = Int

  struct Iterator: AsyncIteratorProtocol {
    let sequence: ControlledSequence
    let id: Int

    mutating func next() async -> Int? {
      await sequence.next(for: id)
    }
  }

  private struct Listener {
    var buffer: [Int] = []
    var waiting: CheckedContinuation<Int?, Never>?
    var isCancelled = false
    var isIdle: Bool { isCancelled || waiting != nil }
  }

  private struct IdleWaiter {
    var listenersNeeded: Int
    var continuation: CheckedContinuation<Void, Never>
  }

  private struct State {
    var listeners: [Listener] = []
    var teardowns = 0
    var idleWaiters: [IdleWaiter] = []

    /// Takes the waiters whose condition holds: enough listeners started, every one idle.
    mutating func takeSatisfiedWaiters() -> [CheckedContinuation<Void, Never>] {
      guard listeners.allSatisfy(\.isIdle) else { return [] }
      let count = listeners.count
      let satisfied = idleWaiters.filter { $0.listenersNeeded <= count }
      idleWaiters.removeAll { $0.listenersNeeded <= count }
      return satisfied.map(\.continuation)
    }
  }

  private let state = LockedState(State())

  func makeAsyncIterator() -> Iterator {
    let id = state.withLock { state in
      state.listeners.append(Listener())
      return state.listeners.count - 1
    }
    return Iterator(sequence: self, id: id)
  }

  fileprivate func next(for id: Int) async -> Int? {
    await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<Int?, Never>) in
        let (immediate, wake) = state.withLock { state -> (Int??, [CheckedContinuation<Void, Never>]) in
          if state.listeners[id].isCancelled { return (.some(nil), []) }
          if !state.listeners[id].buffer.isEmpty { return (state.listeners[id].buffer.removeFirst(), []) }
          state.listeners[id].waiting = continuation
          return (nil, state.takeSatisfiedWaiters())
        }
        if let immediate { continuation.resume(returning: immediate) }
        for waiter in wake { waiter.resume() }
      }
    } onCancel: {
      let (waiting, wake) = state.withLock {
        state -> (CheckedContinuation<Int?, Never>?, [CheckedContinuation<Void, Never>]) in
        guard !state.listeners[id].isCancelled else { return (nil, []) }
        state.listeners[id].isCancelled = true
        state.teardowns += 1
        defer { state.listeners[id].waiting = nil }
        return (state.listeners[id].waiting, state.takeSatisfiedWaiters())
      }
      waiting?.resume(returning: nil)
      for waiter in wake { waiter.resume() }
    }
  }

  /// Hands `value` to every live listener.
  func send(_ value: Int) {
    let resumed = state.withLock { state -> [CheckedContinuation<Int?, Never>] in
      var resumed: [CheckedContinuation<Int?, Never>] = []
      for id in state.listeners.indices where !state.listeners[id].isCancelled {
        if let waiting = state.listeners[id].waiting {
          state.listeners[id].waiting = nil
          resumed.append(waiting)
        } else {
          state.listeners[id].buffer.append(value)
        }
      }
      return resumed
    }
    for continuation in resumed { continuation.resume(returning: value) }
  }

  /// Waits until at least `listeners` iterations have started and every one is idle.
  func waitUntilIdle(listeners: Int) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let ready = state.withLock { state -> Bool in
        if state.listeners.count >= listeners, state.listeners.allSatisfy(\.isIdle) { return true }
        state.idleWaiters.append(IdleWaiter(listenersNeeded: listeners, continuation: continuation))
        return false
      }
      if ready { continuation.resume() }
    }
  }

  var startedIterations: Int { state.withLock { $0.listeners.count } }
  var teardowns: Int { state.withLock { $0.teardowns } }
}

/// The laws' harness for ``Fuser/fromSequence(_:)``.
struct AsyncSequenceLawHarness: LawHarness {
  let sequence = ControlledSequence()
  private let connects = LockedState(0)

  var fuser: Fuser<Int> { .fromSequence(sequence) }
  var sourcesPerConnection: Int { 1 }
  var sourceConnections: Int { sequence.startedIterations }
  var teardowns: Int { sequence.teardowns }

  func connect(_ record: @escaping @Sendable (Int) -> Void) -> AnyDisposable {
    connects.withLock { $0 += 1 }
    return fuser.connect(record)
  }

  func ready() async {
    await sequence.waitUntilIdle(listeners: connects.withLock { $0 })
  }

  func emit(_ value: Int) async {
    sequence.send(value)
    await sequence.waitUntilIdle(listeners: connects.withLock { $0 })
  }

  func settle() {}
}
