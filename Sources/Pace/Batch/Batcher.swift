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

/// Collects items and sends them as one batch: when `maximumCount` are waiting, `maximumWait`
/// after the first one, or on ``flush()``.
///
/// ```swift
/// let users = Batcher<User.ID, User>(maximumCount: 100, maximumWait: .milliseconds(10)) { ids in
///   try await api.users(ids: ids)      // one request for the batch: [User.ID: User]
/// }
/// let user = try await users.load(id)  // this id's output
///
/// let analytics = Batcher<Event, Void>(
///   maximumCount: 50, maximumWait: .seconds(30),
///   onFailure: { events, error in outbox.keep(events) }   // what a failed batch did not deliver
/// ) { events in
///   try await upload(events)
/// }
/// try await analytics.submit(event)    // returns once buffered; never waits for the batch
/// analytics.trySubmit(event)            // from synchronous code: buffered if there is room
/// ```
///
/// - ``load(_:isolation:)`` waits for its item's output: the batch's `send` returns a dictionary,
///   and each loader gets its item's value, the batch's error, or ``BatcherError/noResult``. A
///   `load` of an item already buffered and not yet sent joins it: the item is sent once. Only a
///   batcher of `Hashable` items loads.
/// - ``submit(_:)`` returns as soon as the item is buffered (fire-and-forget); every
///   submitted item is sent, duplicates included. ``trySubmit(_:)`` does the same from
///   synchronous code where that needs no wait, and says whether it did. Items need not be `Hashable`. When a batch's
///   `send` throws, the items nobody waits for (the submitted ones, and those whose loaders were
///   cancelled) go to `onFailure` with the error: retry them there, or keep them for later.
/// - Batches are made in the order their items arrived and handed to `send` in that order, at most
///   `maximumInFlight` at a time; a due batch waits for a slot, and items keep collecting meanwhile
///   (up to `maximumCount` a batch). With more than one in flight, their sends run at once, each in
///   a task of its own, so two sends handed over together may reach their first line in either
///   order: with `maximumInFlight` 1 (the default) every batch is sent after the one before ended.
/// - At most `bufferCapacity` items wait to be sent; a new item beyond that is handled by the
///   ``BatchOverflow`` policy.
///
/// Items still buffered when the batcher is released are not sent: call ``flush()`` first (an app
/// going to the background does). Safe from any task; the lock is never held while `send` or
/// `onFailure` runs, a caller is resumed, or a loaded item's output is looked up in what `send`
/// returned.
public final class Batcher<Item: Sendable, Output: Sendable>: Sendable {
  @usableFromInline let storage: BatcherStorage<Item, Output>

  @usableFromInline
  init(
    maximumCount: Int, maximumWait: Duration, maximumInFlight: Int, bufferCapacity: Int, overflow: BatchOverflow,
    clock: AsyncClock, identity: BatchIdentity<Item>,
    onFailure: (@Sendable ([Item], any Error) -> Void)?,
    send: @escaping @Sendable ([Item]) async throws -> @Sendable (Int) -> Output?
  ) {
    precondition(maximumCount > 0, "Batcher: maximumCount must be positive (got \(maximumCount))")
    precondition(maximumWait >= .zero, "Batcher: maximumWait must not be negative (got \(maximumWait))")
    precondition(maximumInFlight > 0, "Batcher: maximumInFlight must be positive (got \(maximumInFlight))")
    precondition(bufferCapacity > 0, "Batcher: bufferCapacity must be positive (got \(bufferCapacity))")
    let machine = BatchMachine<Item>(
      maxCount: maximumCount, maxWaitNanoseconds: maximumWait.paceNanoseconds, maxInFlight: maximumInFlight,
      capacity: bufferCapacity, overflow: overflow)
    storage = BatcherStorage(machine: machine, clock: clock, identity: identity, onFailure: onFailure, send: send)
  }

  /// Adds `item` to the next batch, and returns once it is buffered: at once, unless the buffer
  /// is full and the policy is ``BatchOverflow/suspend``.
  ///
  /// It runs on the caller's executor (`nonisolated(nonsending)`): with room in the buffer it
  /// neither suspends nor hops, from the main actor as from any task.
  ///
  /// - Parameter item: The item; sent even if an equal item is buffered.
  /// - Throws: ``BatcherError/bufferFull`` under ``BatchOverflow/reject``; `CancellationError` if
  ///   the task is cancelled where the call would wait for room, or while it waits (the item is
  ///   then not buffered). With room, a cancelled task's item is buffered, as a call that does
  ///   not wait has nothing to cancel.
  @inlinable
  nonisolated(nonsending) public func submit(_ item: Item) async throws {
    if storage.bufferIfRoom(item) { return }
    try await storage.waitForRoom(item, isolation: #isolation)
  }

  /// ``submit(_:)``, which now runs on its caller's executor without being told it.
  @available(
    *, deprecated, renamed: "submit(_:)", message: "submit(_:) runs on the caller's executor; drop the argument"
  )
  @inlinable
  public func submit(_ item: Item, isolation: isolated (any Actor)?) async throws {
    if storage.bufferIfRoom(item) { return }
    try await storage.waitForRoom(item, isolation: isolation)
  }

  /// Adds `item` to the next batch if that needs no wait, from synchronous code (a tap's handler,
  /// a delegate callback): never suspends, never throws.
  ///
  /// ```swift
  /// func buttonTapped() {
  ///   if !analytics.trySubmit(.tap("buy")) { droppedEvents += 1 }
  /// }
  /// ```
  ///
  /// - Parameter item: The item; sent even if an equal item is buffered.
  /// - Returns: `true` if the item is buffered (under ``BatchOverflow/dropOldest``, in place of
  ///   the oldest item when the buffer is full); `false` if the buffer is full, or callers wait
  ///   for room before it, under ``BatchOverflow/suspend`` or ``BatchOverflow/reject``: the item
  ///   is then not buffered.
  @inlinable @discardableResult
  public func trySubmit(_ item: Item) -> Bool {
    storage.bufferIfRoom(item) || storage.bufferDroppingOldest(item)
  }

  /// Makes every item buffered now due: they are sent at once, in batches of up to
  /// `maximumCount`, as `maximumInFlight` allows.
  public func flush() {
    storage.flush()
  }

  /// How many items wait to be sent.
  public var bufferedCount: Int { storage.bufferedCount }

  /// How many batches are in flight.
  public var inFlightCount: Int { storage.inFlightCount }

  /// Returns `true` once at least `count` callers wait for room; `false` after `timeout`.
  package func waitUntilWaitingCount(_ count: Int, timeout: Duration? = nil) async -> Bool {
    await storage.waitUntil(.waitingForRoom(count), timeout: timeout)
  }

  /// How many batches have been sent; for tests.
  package var sentBatchCount: Int { storage.sentBatchCount }

  /// How many loaders wait for their items' outputs; for tests.
  package var loaderCount: Int { storage.loaderCount }

  /// Returns `true` once at least `count` calls have reached the batcher; `false` after
  /// `timeout`. For PaceTesting's `waitForCalls(_:timeout:)`.
  package func waitUntilCallCount(_ count: Int, timeout: Duration? = nil) async -> Bool {
    await storage.waitUntil(.calls(count), timeout: timeout)
  }

  /// Returns `true` once at least `count` batches have ended; `false` after `timeout`. For
  /// PaceTesting's `waitForEndedBatches(_:timeout:)`.
  package func waitUntilEndedBatchCount(_ count: Int, timeout: Duration? = nil) async -> Bool {
    await storage.waitUntil(.endedBatches(count), timeout: timeout)
  }

  /// Returns `true` once at least `count` loaders wait for their items' outputs; `false` after
  /// `timeout`.
  package func waitUntilLoaderCount(_ count: Int, timeout: Duration? = nil) async -> Bool {
    await storage.waitUntil(.loaders(count), timeout: timeout)
  }
}

extension Batcher where Item: Hashable {
  /// A batcher sending with `send`, which returns each item's output.
  ///
  /// - Parameters:
  ///   - maximumCount: The most items in a batch; a batch is sent as soon as this many wait.
  ///     Positive.
  ///   - maximumWait: How long the oldest waiting item waits before its batch is sent. Not
  ///     negative; `.zero` sends every item at once (in batches of what arrived together, as
  ///     slots allow). A duration beyond the end of the clock's timeline waits for
  ///     `maximumCount` or ``flush()``.
  ///   - maximumInFlight: How many batches may be in flight at once; 1 by default. Positive.
  ///   - bufferCapacity: How many items may wait to be sent; 10,000 by default. At least 1.
  ///   - overflow: What a new item does when `bufferCapacity` items wait:
  ///     ``BatchOverflow/suspend`` by default.
  ///   - clock: The clock that measures `maximumWait`: `ContinuousClock` by default, or a
  ///     ``TestScheduler``.
  ///   - onFailure: Called with the items of a batch whose `send` threw that no caller waits for
  ///     (submitted items; loaded items whose loaders were cancelled), and the error; `nil` by
  ///     default, which drops them. Runs in the batch's task, without the batcher's lock.
  ///   - send: Sends one batch, and returns each item's output. Runs in a task the batcher starts,
  ///     never a caller's; a batch that waited for a slot is sent by the task whose batch freed
  ///     it, after that batch's loaders are resumed.
  @inlinable
  public convenience init<C: Clock>(
    maximumCount: Int, maximumWait: Duration, maximumInFlight: Int = 1, bufferCapacity: Int = 10_000,
    overflow: BatchOverflow = .suspend, clock: C = ContinuousClock(),
    onFailure: (@Sendable (_ items: [Item], _ error: any Error) -> Void)? = nil,
    send: @escaping @Sendable ([Item]) async throws -> [Item: Output]
  ) where C.Duration == Duration {
    self.init(
      maximumCount: maximumCount, maximumWait: maximumWait, maximumInFlight: maximumInFlight,
      bufferCapacity: bufferCapacity, overflow: overflow, clock: AsyncClock(clock), identity: .hashable,
      onFailure: onFailure
    ) { items in
      let outputs = try await send(items)
      return { outputs[items[$0]] }
    }
  }

  /// Adds `item` to the next batch and waits for its output.
  ///
  /// The load's bookkeeping (the lock, the batch's state, its continuation) runs on the caller's
  /// executor: from an actor, with no hop, and the loads an actor starts arrive in the order it
  /// runs them. Where one actor starts many loads at once and their order does not matter (an
  /// app's main actor loading a list's rows), pass `isolation: nil`: the bookkeeping then runs on
  /// the global executor, as a snippet's own actor's would, which keeps the pool's threads working
  /// through the burst; each load makes two hops, and those loads arrive in no set order.
  ///
  /// - Parameters:
  ///   - item: The item; an equal item buffered and not yet sent is joined, not sent twice.
  ///   - isolation: The caller's actor by default; `nil` to keep the load's bookkeeping off it.
  /// - Returns: The output `send` returned for the item.
  /// - Throws: The batch's error; ``BatcherError/noResult`` if `send` returned no output for the
  ///   item; ``BatcherError/bufferFull`` or ``BatcherError/dropped`` by the overflow policy;
  ///   `CancellationError` at once if the task is cancelled (the item is still sent).
  @inlinable
  public func load(_ item: Item, isolation: isolated (any Actor)? = #isolation) async throws -> Output {
    try await storage.load(item, hash: item.hashValue, isolation: isolation)
  }
}

extension Batcher where Output == Void {
  /// A batcher for items that have no output, such as analytics events: `send` delivers a batch
  /// or throws. The items need not be `Hashable` (`Hashable` ones can also be loaded: the load
  /// returns once the item's batch is delivered).
  ///
  /// The parameters are those of the initialiser whose `send` returns each item's output.
  @inlinable
  public convenience init<C: Clock>(
    maximumCount: Int, maximumWait: Duration, maximumInFlight: Int = 1, bufferCapacity: Int = 10_000,
    overflow: BatchOverflow = .suspend, clock: C = ContinuousClock(),
    onFailure: (@Sendable (_ items: [Item], _ error: any Error) -> Void)? = nil,
    send: @escaping @Sendable ([Item]) async throws -> Void
  ) where C.Duration == Duration {
    self.init(
      maximumCount: maximumCount, maximumWait: maximumWait, maximumInFlight: maximumInFlight,
      bufferCapacity: bufferCapacity, overflow: overflow, clock: AsyncClock(clock),
      // A `Hashable` item (found at run time: this initialiser takes any) is joined by a `load`.
      identity: .ifHashable, onFailure: onFailure
    ) { items in
      try await send(items)
      return { _ in () }
    }
  }
}
