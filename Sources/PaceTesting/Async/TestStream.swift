/// An async sequence that a test drives one element at a time, and that says when its consumer
/// has dealt with each one.
///
/// ``send(_:)`` returns once the consumer has *processed* the element: when it asks for the next
/// one (or goes away). A consumer handles an element between two calls to `next()`, so after
/// `await stream.send(x)` the operator reading this stream (`.debounced`, `.throttled`, a view
/// model's `for await` loop) has seen `x` at the current virtual time, and the test may advance
/// its `TestScheduler`. No `Task.yield()`, no sleeping, no polling:
///
/// ```swift
/// @Test func theLastQueryIsSearched() async {
///   let scheduler = TestScheduler()
///   let queries = TestStream<String>()
///   let timeline = VirtualTimeline(scheduler: scheduler,
///                                  queries.debounced(for: .milliseconds(300), clock: scheduler))
///   await queries.send("s")
///   scheduler.advance(by: .milliseconds(100))
///   await queries.send("sw")
///   timeline.advance(by: .milliseconds(300))
///   #expect(timeline.emissions == [.value("sw", at: PaceInstant(.milliseconds(400)))])
/// }
/// ```
///
/// It can be iterated once: it is a test's stand-in for one producer. When the consumer is
/// cancelled or releases its iterator, the stream ends and pending ``send(_:)`` calls return.
public final class TestStream<Element: Sendable>: AsyncSequence, Sendable {
  /// What the stream can deliver next.
  public enum Event {
    /// An element.
    case element(Element)
    /// The normal end.
    case finish
    /// The end by an error.
    case failure(any Error)
  }

  /// A stream with nothing sent yet.
  public init() {}

  private struct State {
    var queue: [(event: Event, sender: UnsafeContinuation<Void, Never>?)] = []
    var consumer: UnsafeContinuation<Result<Element?, any Error>, Never>?
    /// The sender of the element the consumer took last, resumed at the consumer's next demand.
    var processing: UnsafeContinuation<Void, Never>?
    var ended = false
    var iteratorsMade = 0
    var released = false
    var releaseWaiters: [UnsafeContinuation<Void, Never>] = []
  }

  private let state = LockedState(State())

  private enum Step {
    case none
    case handOff(UnsafeContinuation<Result<Element?, any Error>, Never>, Result<Element?, any Error>)
    case refuse(UnsafeContinuation<Void, Never>)
  }

  /// Delivers `element` and returns once the consumer has processed it: when it asks for the next
  /// element, or is cancelled or gone. Elements sent before anyone iterates wait in order.
  public func send(_ element: Element) async {
    await withUnsafeContinuation { (sender: UnsafeContinuation<Void, Never>) in
      enqueue(.element(element), sender: sender)
    }
  }

  /// Ends the stream; returns at once, without waiting for the consumer.
  public func finish() {
    enqueue(.finish, sender: nil)
  }

  /// Ends the stream with `error`; returns at once, without waiting for the consumer.
  public func fail(_ error: any Error) {
    enqueue(.failure(error), sender: nil)
  }

  /// How many iterators were made: an operator should make one.
  public var iteratorsMade: Int { state.withLock { $0.iteratorsMade } }

  /// Returns once the iterator has been released: whoever read the stream has let go of it.
  public func released() async {
    await withUnsafeContinuation { (waiter: UnsafeContinuation<Void, Never>) in
      let done = state.withLock { state -> Bool in
        if state.released { return true }
        state.releaseWaiters.append(waiter)
        return false
      }
      if done { waiter.resume() }
    }
  }

  private func enqueue(_ event: Event, sender: UnsafeContinuation<Void, Never>?) {
    let step = state.withLock { state -> Step in
      if state.ended { return sender.map(Step.refuse) ?? .none }
      guard let consumer = state.consumer.take() else {
        state.queue.append((event, sender))
        return .none
      }
      return .handOff(consumer, take(event, sender: sender, in: &state))
    }
    switch step {
    case .none: break
    case .handOff(let consumer, let result): consumer.resume(returning: result)
    case .refuse(let sender): sender.resume()
    }
  }

  private func take(
    _ event: Event, sender: UnsafeContinuation<Void, Never>?, in state: inout State
  ) -> Result<Element?, any Error> {
    switch event {
    case .element(let element):
      state.processing = sender
      return .success(element)
    case .finish:
      state.ended = true
      return .success(nil)
    case .failure(let error):
      state.ended = true
      return .failure(error)
    }
  }

  fileprivate func next() async -> Result<Element?, any Error> {
    await withTaskCancellationHandler {
      await withUnsafeContinuation { (consumer: UnsafeContinuation<Result<Element?, any Error>, Never>) in
        let (processed, immediate) = state.withLock {
          state -> (UnsafeContinuation<Void, Never>?, Result<Element?, any Error>?) in
          let processed = state.processing.take()
          if state.ended || Task.isCancelled {
            state.ended = true
            return (processed, .success(nil))
          }
          if !state.queue.isEmpty {
            let (event, sender) = state.queue.removeFirst()
            return (processed, take(event, sender: sender, in: &state))
          }
          state.consumer = consumer
          return (processed, nil)
        }
        processed?.resume()
        if let immediate { consumer.resume(returning: immediate) }
      }
    } onCancel: {
      end()
    }
  }

  /// The consumer was cancelled or released its iterator: no more elements, no sender waits.
  fileprivate func end(released: Bool = false) {
    let (consumer, senders, waiters) = state.withLock { state in
      state.ended = true
      if released { state.released = true }
      let senders = [state.processing.take()].compactMap { $0 } + state.queue.compactMap(\.sender)
      state.queue.removeAll()
      let waiters = released ? state.releaseWaiters : []
      if released { state.releaseWaiters = [] }
      return (state.consumer.take(), senders, waiters)
    }
    consumer?.resume(returning: .success(nil))
    for sender in senders { sender.resume() }
    for waiter in waiters { waiter.resume() }
  }

  /// An iterator over what the test sends.
  public func makeAsyncIterator() -> Iterator {
    state.withLock { $0.iteratorsMade += 1 }
    return Iterator(lifetime: Lifetime(upstream: self))
  }

  /// The iterator of a ``TestStream``.
  public struct Iterator: AsyncIteratorProtocol {
    fileprivate let lifetime: Lifetime

    /// The next element the test sends, `nil` after ``TestStream/finish()``.
    public mutating func next() async throws -> Element? {
      try await lifetime.upstream.next().get()
    }
  }

  fileprivate final class Lifetime: Sendable {
    let upstream: TestStream

    init(upstream: TestStream) {
      self.upstream = upstream
    }

    deinit {
      upstream.end(released: true)
    }
  }
}
