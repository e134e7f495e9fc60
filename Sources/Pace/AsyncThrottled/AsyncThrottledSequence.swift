extension AsyncSequence where Self: Sendable, Element: Sendable {
  /// Emits at most one element per `interval`, at a steady cadence, with the semantics of
  /// ``Throttler``.
  ///
  /// ```swift
  /// for await offset in scrollOffsets.throttled(for: .milliseconds(100)) {
  ///   await render(offset)   // at 0, 100, 200 ms ... while offsets keep coming
  /// }
  /// ```
  ///
  /// - The first element after a quiet period opens a window of `interval` and, with
  ///   ``Edges/leading`` (in the default), is emitted at once. When the window ends, if elements
  ///   came in during it and ``Edges/trailing`` is set (also in the default), their merge is
  ///   emitted and the next window opens at once; otherwise the sequence goes quiet. While
  ///   elements keep coming, emissions are exactly `interval` apart.
  /// - When the base sequence finishes, the pending trailing element is delivered at once, then
  ///   the sequence finishes: the last element is never dropped. When it fails, the pending
  ///   element is delivered at once, then the error is thrown.
  /// - Cancelling the consuming task ends the sequence (`next()` returns `nil`) and cancels the
  ///   task that reads the base sequence and the timer.
  ///
  /// The name ends in -ed so that it never clashes with swift-async-algorithms' `_throttle` in a
  /// file that imports both.
  ///
  /// - Parameters:
  ///   - interval: The window length: the least time between emissions. Not negative.
  ///   - edges: Which edges emit; both by default. Not empty.
  ///   - merge: How the elements of a window combine into the emitted one; `.latest` by default.
  ///   - clock: The clock that measures time: `ContinuousClock` by default, any clock whose
  ///     duration is `Duration`, or a ``TestScheduler`` for virtual time.
  /// - Returns: The throttled sequence.
  @inlinable
  public func throttled<C: Clock>(
    for interval: Duration,
    edges: Edges = .both,
    merge: Merge<Element> = .latest,
    clock: C = ContinuousClock()
  ) -> AsyncThrottledSequence<Self> where C.Duration == Duration {
    AsyncThrottledSequence(base: self, interval: interval, edges: edges, merge: merge, clock: AsyncClock(clock))
  }
}

/// An asynchronous sequence that emits at most one element per interval, at a steady cadence;
/// made by ``_Concurrency/AsyncSequence/throttled(for:edges:merge:clock:)``.
public struct AsyncThrottledSequence<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable
where Base.Element: Sendable {
  /// The base sequence's element.
  public typealias Element = Base.Element

  let base: Base
  /// A fresh machine, which each iterator copies.
  let machine: ThrottleStateMachine<Element>
  let clock: AsyncClock

  @usableFromInline
  init(base: Base, interval: Duration, edges: Edges, merge: Merge<Element>, clock: AsyncClock) {
    self.base = base
    machine = .checked("throttled", interval: interval, edges: edges, merge: merge)
    self.clock = clock
  }

  /// Makes an iterator with a state machine of its own; nothing is read before its first `next()`.
  public func makeAsyncIterator() -> Iterator {
    Iterator(handle: AsyncPacingIteratorHandle(AsyncPacingStorage(base: base, machine: machine, clock: clock)))
  }

  /// The iterator of a throttled sequence. The base sequence is read from its first `next()`
  /// until it ends, the consuming task is cancelled, or the iterator is released.
  public struct Iterator: AsyncIteratorProtocol {
    @usableFromInline let handle: AsyncPacingIteratorHandle<Base, ThrottleStateMachine<Element>>

    /// The next emission; `nil` once the base sequence has finished or the task is cancelled.
    /// Throws the base sequence's error, after any pending emission.
    @inlinable
    public mutating func next() async rethrows -> Element? {
      try await handle.storage.next().rethrowingGet()
    }
  }
}

@available(*, unavailable)
extension AsyncThrottledSequence.Iterator: Sendable {}
