/// What a ``Batcher`` does with a new item when its buffer is full.
public enum BatchOverflow: Sendable, Equatable {
  /// The caller waits for room, in arrival order (cancellable); the default.
  case suspend
  /// The oldest buffered item is dropped to make room; its loaders throw
  /// ``BatcherError/dropped``.
  case dropOldest
  /// The new item is refused: the call throws ``BatcherError/bufferFull``.
  case reject
}

/// Why a ``Batcher`` call failed without its batch's own error.
public enum BatcherError: Error, Equatable, Sendable {
  /// The buffer was full and the overflow policy is ``BatchOverflow/reject``.
  case bufferFull
  /// The item was dropped from a full buffer, under ``BatchOverflow/dropOldest``.
  case dropped
  /// The batch was sent, and its `send` returned no output for the item.
  case noResult
}

/// Collects items and sends them as one batch: when `maxCount` are waiting, `maxWait` after the
/// first one, or on ``flush()``.
///
/// ```swift
/// let users = Batcher<User.ID, User>(maxCount: 100, maxWait: .milliseconds(10)) { ids in
///   try await api.users(ids: ids)      // one request for the batch: [User.ID: User]
/// }
/// let user = try await users.load(id)  // this id's output
///
/// let analytics = Batcher<Event, Void>(maxCount: 50, maxWait: .seconds(30)) { events in
///   try await upload(events)
/// }
/// try await analytics.submit(event)    // returns once buffered; never waits for the batch
/// ```
///
/// - ``load(_:isolation:)`` waits for its item's output: the batch's `send` returns a dictionary,
///   and each loader gets its item's value, the batch's error, or ``BatcherError/noResult``. A
///   `load` of an item already buffered and not yet sent joins it: the item is sent once.
/// - ``submit(_:isolation:)`` returns as soon as the item is buffered (fire-and-forget); every
///   submitted item is sent, duplicates included, and its output or error is not reported.
/// - Batches are sent in order, at most `maxInFlight` at a time; a due batch waits for a slot, and
///   items keep collecting meanwhile (up to `maxCount` a batch).
/// - At most `bufferCapacity` items wait to be sent; a new item beyond that is handled by the
///   ``BatchOverflow`` policy.
///
/// Items still buffered when the batcher is released are not sent: call ``flush()`` first (an app
/// going to the background does). Safe from any task; the lock is never held while `send` runs or
/// a caller is resumed.
public final class Batcher<Item: Hashable & Sendable, Output: Sendable>: Sendable {
  let storage: BatcherStorage<Item, Output>

  /// A batcher sending with `send`.
  ///
  /// - Parameters:
  ///   - maxCount: The most items in a batch; a batch is sent as soon as this many wait. Positive.
  ///   - maxWait: How long the oldest waiting item waits before its batch is sent. Not negative;
  ///     `.zero` sends every item at once (in batches of what arrived together, as slots allow).
  ///     A duration beyond the end of the clock's timeline waits for `maxCount` or ``flush()``.
  ///   - maxInFlight: How many batches may be in flight at once; 1 by default. Positive.
  ///   - bufferCapacity: How many items may wait to be sent; 10,000 by default. At least 1.
  ///   - overflow: What a new item does when `bufferCapacity` items wait: ``BatchOverflow/suspend``
  ///     by default.
  ///   - clock: The clock that measures `maxWait`: `ContinuousClock` by default, or a
  ///     ``TestScheduler``.
  ///   - send: Sends one batch, and returns each item's output. Runs in a task of its own.
  @inlinable
  public convenience init<C: Clock>(
    maxCount: Int, maxWait: Duration, maxInFlight: Int = 1, bufferCapacity: Int = 10_000,
    overflow: BatchOverflow = .suspend, clock: C = ContinuousClock(),
    send: @escaping @Sendable ([Item]) async throws -> [Item: Output]
  ) where C.Duration == Duration {
    self.init(
      maxCount: maxCount, maxWait: maxWait, maxInFlight: maxInFlight, bufferCapacity: bufferCapacity,
      overflow: overflow, clock: AsyncClock(clock), send: send)
  }

  @usableFromInline
  init(
    maxCount: Int, maxWait: Duration, maxInFlight: Int, bufferCapacity: Int, overflow: BatchOverflow,
    clock: AsyncClock, send: @escaping @Sendable ([Item]) async throws -> [Item: Output]
  ) {
    precondition(maxCount > 0, "Batcher: maxCount must be positive (got \(maxCount))")
    precondition(maxWait >= .zero, "Batcher: maxWait must not be negative (got \(maxWait))")
    precondition(maxInFlight > 0, "Batcher: maxInFlight must be positive (got \(maxInFlight))")
    precondition(bufferCapacity > 0, "Batcher: bufferCapacity must be positive (got \(bufferCapacity))")
    let machine = BatchMachine<Item>(
      maxCount: maxCount, maxWaitNanoseconds: maxWait.paceNanoseconds, maxInFlight: maxInFlight,
      capacity: bufferCapacity, overflow: overflow)
    storage = BatcherStorage(machine: machine, clock: clock, send: send)
  }

  /// Adds `item` to the next batch and waits for its output.
  ///
  /// - Parameters:
  ///   - item: The item; an equal item buffered and not yet sent is joined, not sent twice.
  ///   - isolation: The caller's actor; leave the default.
  /// - Returns: The output `send` returned for the item.
  /// - Throws: The batch's error; ``BatcherError/noResult`` if `send` returned no output for the
  ///   item; ``BatcherError/bufferFull`` or ``BatcherError/dropped`` by the overflow policy;
  ///   `CancellationError` at once if the task is cancelled (the item is still sent).
  public func load(_ item: Item, isolation: isolated (any Actor)? = #isolation) async throws -> Output {
    try await storage.load(item, isolation: isolation)
  }

  /// Adds `item` to the next batch, and returns once it is buffered: at once, unless the buffer
  /// is full and the policy is ``BatchOverflow/suspend``.
  ///
  /// - Parameters:
  ///   - item: The item; sent even if an equal item is buffered.
  ///   - isolation: The caller's actor; leave the default.
  /// - Throws: ``BatcherError/bufferFull`` under ``BatchOverflow/reject``; `CancellationError` if
  ///   the task is cancelled while it waits for room (the item is then not buffered).
  public func submit(_ item: Item, isolation: isolated (any Actor)? = #isolation) async throws {
    try await storage.submit(item, isolation: isolation)
  }

  /// Makes every item buffered now due: they are sent at once, in batches of up to `maxCount`, as
  /// `maxInFlight` allows.
  public func flush() {
    storage.flush()
  }

  /// How many items wait to be sent.
  public var bufferedCount: Int { storage.bufferedCount }

  /// How many batches are in flight.
  public var inFlightCount: Int { storage.inFlightCount }

  /// Returns once at least `count` callers wait for room; for tests.
  package func waitUntilWaitingCount(_ count: Int) async {
    await storage.waitUntil(.waitingForRoom(count))
  }

  /// How many batches have been sent; for tests.
  package var sentBatchCount: Int { storage.sentBatchCount }

  /// How many loaders wait for their items' outputs; for tests.
  package var loaderCount: Int { storage.loaderCount }

  /// Returns once at least `count` calls have reached the batcher; for tests.
  package func waitUntilCallCount(_ count: Int) async {
    await storage.waitUntil(.calls(count))
  }

  /// Returns once at least `count` batches have ended; for tests.
  package func waitUntilEndedBatchCount(_ count: Int) async {
    await storage.waitUntil(.endedBatches(count))
  }

  /// Returns once at least `count` loaders wait for their items' outputs; for tests.
  package func waitUntilLoaderCount(_ count: Int) async {
    await storage.waitUntil(.loaders(count))
  }
}

extension Batcher where Output == Void {
  /// A batcher for items that have no output, such as analytics events: `send` delivers a batch
  /// or throws.
  ///
  /// The parameters are those of the initialiser whose `send` returns each item's output.
  @inlinable
  public convenience init<C: Clock>(
    maxCount: Int, maxWait: Duration, maxInFlight: Int = 1, bufferCapacity: Int = 10_000,
    overflow: BatchOverflow = .suspend, clock: C = ContinuousClock(),
    send: @escaping @Sendable ([Item]) async throws -> Void
  ) where C.Duration == Duration {
    self.init(
      maxCount: maxCount, maxWait: maxWait, maxInFlight: maxInFlight, bufferCapacity: bufferCapacity,
      overflow: overflow, clock: AsyncClock(clock)
    ) { items in
      try await send(items)
      return Dictionary(items.map { ($0, ()) }, uniquingKeysWith: { first, _ in first })
    }
  }
}
