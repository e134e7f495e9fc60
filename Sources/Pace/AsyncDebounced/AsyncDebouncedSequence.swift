extension AsyncSequence where Self: Sendable, Element: Sendable {
  /// Emits an element once the base sequence has been quiet for `interval`, with the semantics of
  /// ``Debouncer`` (lodash's `debounce`).
  ///
  /// ```swift
  /// for await query in searchField.queries.debounced(for: .milliseconds(300)) {
  ///   await search(query)
  /// }
  /// ```
  ///
  /// - A burst of elements emits their merge once `interval` has passed with no element (the
  ///   **trailing** edge). With ``Edges/leading`` the first element after a quiet period is
  ///   emitted at once; a lone element with both edges is emitted once.
  /// - `maximumWait` (raised to `interval` if smaller) bounds how long an element waits to be
  ///   covered by an emission, even while elements keep coming.
  /// - When the base sequence finishes, a pending emission is delivered at once, then the
  ///   sequence finishes. When it fails, a pending emission is delivered at once, then the error
  ///   is thrown.
  /// - Cancelling the consuming task ends the sequence (`next()` returns `nil`) and cancels the
  ///   task that reads the base sequence and the timer.
  ///
  /// The base sequence is read as fast as it produces, so timing follows the base sequence, not
  /// the consumer. The name ends in -ed so that it never clashes with swift-async-algorithms'
  /// `debounce(for:tolerance:clock:)` in a file that imports both.
  ///
  /// - Parameters:
  ///   - interval: How long the base sequence must be quiet before the trailing emission. Not
  ///     negative.
  ///   - edges: Which edges emit: `.trailing` (the default), `.leading`, or both. Not empty.
  ///   - maximumWait: The longest an element waits for its emission; `nil` (the default) for no bound.
  ///   - merge: How the elements of a burst combine into the emitted one; `.latest` by default.
  ///   - clock: The clock that measures time: `ContinuousClock` by default, any clock whose
  ///     duration is `Duration`, or a ``TestScheduler`` for virtual time.
  /// - Returns: The debounced sequence.
  @inlinable
  public func debounced<C: Clock>(
    for interval: Duration,
    edges: Edges = .trailing,
    maximumWait: Duration? = nil,
    merge: Merge<Element> = .latest,
    clock: C = ContinuousClock()
  ) -> AsyncDebouncedSequence<Self> where C.Duration == Duration {
    AsyncDebouncedSequence(
      base: self, interval: interval, edges: edges, maximumWait: maximumWait, merge: merge, clock: AsyncClock(clock)
    )
  }
}

/// An asynchronous sequence that emits an element once its base sequence has been quiet for an
/// interval; made by ``_Concurrency/AsyncSequence/debounced(for:edges:maximumWait:merge:clock:)``.
public struct AsyncDebouncedSequence<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable
where Base.Element: Sendable {
  /// The base sequence's element.
  public typealias Element = Base.Element

  let base: Base
  /// A fresh machine, which each iterator copies.
  let machine: DebounceStateMachine<Element>
  let clock: AsyncClock

  @usableFromInline
  init(base: Base, interval: Duration, edges: Edges, maximumWait: Duration?, merge: Merge<Element>, clock: AsyncClock) {
    self.base = base
    machine = .checked("debounced", interval: interval, edges: edges, maximumWait: maximumWait, merge: merge)
    self.clock = clock
  }

  /// Makes an iterator with a state machine of its own; nothing is read before its first `next()`.
  public func makeAsyncIterator() -> Iterator {
    Iterator(handle: AsyncPacingIteratorHandle(AsyncPacingStorage(base: base, machine: machine, clock: clock)))
  }

  /// The iterator of a debounced sequence. The base sequence is read from its first `next()`
  /// until it ends, the consuming task is cancelled, or the iterator is released.
  public struct Iterator: AsyncIteratorProtocol {
    @usableFromInline let handle: AsyncPacingIteratorHandle<Base, DebounceStateMachine<Element>>

    /// The next emission; `nil` once the base sequence has finished or the task is cancelled.
    /// Throws the base sequence's error, after any pending emission.
    @inlinable
    public mutating func next() async rethrows -> Element? {
      try await handle.storage.next().rethrowingGet()
    }
  }
}

@available(*, unavailable)
extension AsyncDebouncedSequence.Iterator: Sendable {}
