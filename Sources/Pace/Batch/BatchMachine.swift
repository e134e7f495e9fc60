/// The logic of ``Batcher`` as a value type: the buffered items in arrival order, the callers
/// waiting for room, the batches in flight, and when the next batch is due.
///
/// The machine holds no task, continuation, lock or clock: entries, callers and batches are ids,
/// `now` comes in and a ``BatchAction`` comes out. The driver keeps the callers' continuations by
/// those ids, starts a task per batch and arms its timer for ``BatchAction/timer``.
///
/// - A batch is due when `maxCount` items are buffered, when the oldest buffered item has waited
///   `maxWait`, or when the oldest was buffered before a `flush`. A due batch is sent as soon as
///   fewer than `maxInFlight` batches are in flight; it takes up to `maxCount` items, oldest first.
/// - A `load` whose item is already buffered (not yet sent) joins that entry: the item is sent
///   once. A `submit` always buffers an entry of its own. Entries are told apart for joining by
///   their key, which the driver gives (the item itself, where items are `Hashable`); an item
///   without a key can be neither joined nor join.
/// - At most `capacity` items are buffered; beyond that, ``BatchOverflow`` decides.
@usableFromInline
struct BatchMachine<Item> {
  // The events are `@inlinable`, so that a batcher's calls are specialised for its `Item`.

  /// One buffered item. Its key is kept apart, in `keys`: an entry without one is then as cheap
  /// to copy as its item (a key holds an existential, copied through the runtime).
  @usableFromInline
  struct Entry {
    @usableFromInline let id: UInt64
    @usableFromInline let item: Item
    /// When the item was buffered: the start of its `maxWait`.
    @usableFromInline let arrival: PaceInstant

    @inlinable init(id: UInt64, item: Item, arrival: PaceInstant) {
      self.id = id
      self.item = item
      self.arrival = arrival
    }
  }

  /// A caller waiting for room, under ``BatchOverflow/suspend``.
  @usableFromInline
  struct Waiter {
    @usableFromInline let caller: UInt64
    @usableFromInline let item: Item
    @usableFromInline var key: BatchKey?
    @usableFromInline let joins: Bool

    @inlinable init(caller: UInt64, item: Item, key: BatchKey?, joins: Bool) {
      self.caller = caller
      self.item = item
      self.key = key
      self.joins = joins
    }
  }

  @usableFromInline let maxCount: Int
  @usableFromInline let maxWaitNanoseconds: Int64
  @usableFromInline let maxInFlight: Int
  @usableFromInline let capacity: Int
  @usableFromInline let overflow: BatchOverflow

  /// The buffered entries from `head` on, oldest first; the slots before `head` are spent.
  @usableFromInline var entries: [Entry] = []
  @usableFromInline var head = 0
  /// What a `load` of an equal item joins each entry by (`nil`: it cannot be joined), at the
  /// entry's index, once any entry has had a key (``storesKeys``); empty until then.
  @usableFromInline var keys: [BatchKey?] = []
  @usableFromInline var storesKeys = false
  /// The newest buffered entry of each key, for `load`s to join.
  @usableFromInline var newest: [BatchKey: UInt64] = [:]
  /// Whether entries are indexed by key in `newest`: from the first `load` on. Until then (a
  /// batcher that only submits) no key is made or hashed: the driver passes `nil`.
  @usableFromInline var indexesKeys = false
  /// The callers waiting for room, in arrival order.
  @usableFromInline var waiters: [Waiter] = []
  /// Entries up to this id were buffered before a flush: they are due.
  @usableFromInline var flushedThrough: UInt64 = 0
  @usableFromInline var lastEntry: UInt64 = 0
  @usableFromInline var lastBatch: UInt64 = 0
  /// The deadline the driver's timer is armed for. While the oldest item waits for its
  /// `maxWait`, at or before that (an earlier timer is kept: ``sendDue(now:into:)``); `nil` once
  /// it fired, until an item waits again.
  @usableFromInline var armed: PaceInstant?
  /// How many batches are in flight.
  @usableFromInline var inFlight = 0

  /// How many items are buffered, not yet sent.
  @inlinable var bufferedCount: Int { entries.count - head }

  /// Whether a new entry is buffered at once: there is room, and no caller waits for it before.
  @inlinable var hasRoom: Bool { waiters.isEmpty && bufferedCount < capacity }

  /// How many callers wait for room.
  var waitingCount: Int { waiters.count }

  /// How many batches have been sent.
  var sentBatchCount: Int { Int(truncatingIfNeeded: lastBatch) }

  init(maxCount: Int, maxWaitNanoseconds: Int64, maxInFlight: Int, capacity: Int, overflow: BatchOverflow) {
    self.maxCount = maxCount
    self.maxWaitNanoseconds = max(0, maxWaitNanoseconds)
    self.maxInFlight = maxInFlight
    self.capacity = capacity
    self.overflow = overflow
  }

  /// The caller `caller` adds `item`, told apart by `key`, at `now`; `joins` for a `load`, which
  /// joins a buffered entry of the same key.
  @inlinable
  mutating func add(
    _ item: Item, key: BatchKey?, caller: UInt64, joins: Bool, now: PaceInstant
  ) -> BatchAction<Item> {
    var action = BatchAction<Item>()
    if joins, let key, let id = newest[key] {
      action.admitted.append(.init(caller: caller, entry: id))
    } else if bufferedCount < capacity {
      action.admitted.append(.init(caller: caller, entry: append(item, key: key, now: now)))
    } else {
      switch overflow {
      case .reject:
        action.rejected = caller
        return action
      case .dropOldest:
        action.dropped.append(dropFirst())
        action.admitted.append(.init(caller: caller, entry: append(item, key: key, now: now)))
      case .suspend:
        waiters.append(Waiter(caller: caller, item: item, key: key, joins: joins))
      }
    }
    sendDue(now: now, into: &action)
    return action
  }

  /// Indexes the buffered entries and the waiting callers by key, with `keyOf`, before the first
  /// `load` joins one; from then on the driver passes every item's key.
  @usableFromInline
  mutating func indexKeys(_ keyOf: (Item) -> BatchKey?) {
    indexesKeys = true
    storesKeys = true
    keys = entries.indices.map { $0 < head ? nil : keyOf(entries[$0].item) }
    for index in head..<entries.count {
      if let key = keys[index] { newest[key] = entries[index].id }
    }
    for index in waiters.indices { waiters[index].key = keyOf(waiters[index].item) }
  }

  /// A `submit` of `item` that finds room (``hasRoom``) at `now`: buffered at once, with no
  /// caller to admit, so that the driver needs no continuation for it.
  @inlinable
  mutating func buffer(_ item: Item, key: BatchKey?, now: PaceInstant) -> BatchAction<Item> {
    var action = BatchAction<Item>()
    _ = append(item, key: key, now: now)
    sendDue(now: now, into: &action)
    return action
  }

  /// A `submit` of `item` that finds room (``hasRoom``) and changes nothing but the buffer: it
  /// joins items that wait, either for the oldest one's `maxWait` (the timer is armed) without
  /// filling a batch, or for a slot (a batch is due), and it is not a batch's first item. It is
  /// buffered without the clock, its arrival never read, and with no action. Returns `false`,
  /// changing nothing, for any other item; ``buffer(_:key:now:)`` takes it.
  ///
  /// Only a batch's first item starts a `maxWait`, and the first items are those at multiples
  /// of `maxCount` from the oldest: a batch takes `maxCount` items, or every item buffered. A
  /// dropped oldest item would move them, which is why ``BatchOverflow/dropOldest`` always reads
  /// the clock. An oldest item whose `maxWait` has passed is sent by its timer.
  @inlinable
  mutating func bufferQuietly(_ item: Item, key: BatchKey?) -> Bool {
    guard takesItemQuietly else { return false }
    appendQuietly(item, key: key)
    if let key { newest[key] = lastEntry }
    return true
  }

  /// ``bufferQuietly(_:key:)`` for an item without a key, as every item of a batcher that only
  /// submits: no key is made, copied or destroyed on the way.
  @inlinable
  mutating func bufferQuietly(_ item: Item) -> Bool {
    guard takesItemQuietly else { return false }
    if storesKeys { keys.append(nil) }
    appendQuietly(item)
    return true
  }

  /// A call of `item` that joins a buffered entry (`joins`, by `key`), or is buffered quietly
  /// (``bufferQuietly(_:key:)``, with room and nobody waiting before it): it changes nothing but
  /// the buffer, needs no clock and makes no action. Returns the entry, or `nil`, changing
  /// nothing, for any other call; ``add(_:key:caller:joins:now:)`` takes it.
  ///
  /// A join is quiet while the timer is armed or every slot is taken: then ``add(_:key:caller:joins:now:)``
  /// would send nothing that the timer or a batch's end does not.
  @inlinable
  mutating func addQuietly(_ item: Item, key: BatchKey?, joins: Bool) -> UInt64? {
    guard joins, let key else { return hasRoom && bufferQuietly(item, key: key) ? lastEntry : nil }
    // One look-up of the key, to join it or to claim it for the new entry.
    let claim = hasRoom && takesItemQuietly ? lastEntry &+ 1 : nil
    if let id = Self.joinOrClaim(&newest[key], claim) {
      return armed != nil || inFlight >= maxInFlight ? id : nil
    }
    guard claim != nil else { return nil }
    appendQuietly(item, key: key)
    return lastEntry
  }

  /// The entry in `slot`, if any; otherwise `claim` takes the slot (`nil`: it stays empty).
  @inlinable
  static func joinOrClaim(_ slot: inout UInt64?, _ claim: UInt64?) -> UInt64? {
    if let id = slot { return id }
    slot = claim
    return nil
  }

  /// Whether a new item, with room for it, would change nothing but the buffer
  /// (``bufferQuietly(_:key:)``).
  @inlinable
  var takesItemQuietly: Bool {
    let count = bufferedCount
    guard count > 0, count % maxCount != 0, overflow != .dropOldest else { return false }
    // No slot: nothing is sent before a batch's end, whatever is due. A free slot: nothing waiting
    // is due (it would have been sent), the timer is armed for the oldest's maxWait or before, and
    // the item must not fill a batch.
    return inFlight >= maxInFlight || (armed != nil && count &+ 1 < maxCount)
  }

  /// ``appendQuietly(_:)`` for an item that may have a key, which it keeps (``store(_:)``).
  @inlinable
  mutating func appendQuietly(_ item: Item, key: BatchKey?) {
    store(key)
    appendQuietly(item)
  }

  /// Appends a quiet item, which joins the wait of the oldest, as its arrival. Its key, if any,
  /// is the caller's to keep: an item without one (a batcher that only submits) then makes,
  /// copies and destroys no `Optional` key on the way.
  @inlinable
  mutating func appendQuietly(_ item: Item) {
    let arrival = entries[head].arrival
    lastEntry &+= 1
    entries.append(Entry(id: lastEntry, item: item, arrival: arrival))
  }

  /// The caller `caller`, waiting for room, is cancelled: it is refused. Nothing if it no longer
  /// waits.
  @inlinable
  mutating func cancel(caller: UInt64) -> BatchAction<Item> {
    var action = BatchAction<Item>()
    guard let index = waiters.firstIndex(where: { $0.caller == caller }) else { return action }
    waiters.remove(at: index)
    action.refused = caller
    return action
  }

  /// `flush()` at `now`: every item buffered now is due, and sent as slots allow.
  @inlinable
  mutating func flush(now: PaceInstant) -> BatchAction<Item> {
    flushedThrough = lastEntry
    var action = BatchAction<Item>()
    sendDue(now: now, into: &action)
    return action
  }

  /// The driver's timer, armed for the oldest item's `maxWait`, fired at `now`.
  @inlinable
  mutating func timerFired(now: PaceInstant) -> BatchAction<Item> {
    armed = nil
    var action = BatchAction<Item>()
    sendDue(now: now, into: &action)
    return action
  }

  /// A batch in flight ended (delivered or failed) at `now`: its slot is free.
  @inlinable
  mutating func batchEnded(now: PaceInstant) -> BatchAction<Item> {
    inFlight -= 1
    var action = BatchAction<Item>()
    sendDue(now: now, into: &action)
    return action
  }

  /// Buffers `item` as a new entry; returns its id.
  @inlinable
  mutating func append(_ item: Item, key: BatchKey?, now: PaceInstant) -> UInt64 {
    store(key)
    lastEntry &+= 1
    entries.append(Entry(id: lastEntry, item: item, arrival: now))
    if let key { newest[key] = lastEntry }
    return lastEntry
  }

  /// Keeps the key of the entry about to be appended; from the first key on, every entry's.
  @inlinable
  mutating func store(_ key: BatchKey?) {
    if !storesKeys {
      guard key != nil else { return }
      storesKeys = true
      keys = Array(repeating: nil, count: entries.count)
    }
    keys.append(key)
  }

  /// The entry leaves the buffer: a `load` can no longer join it.
  @inlinable
  mutating func forget(at index: Int) {
    guard storesKeys, let key = keys[index] else { return }
    Self.empty(&newest[key], ifItHolds: entries[index].id)
  }

  /// Empties `slot` if it holds `id`: one look-up of the key, where a read and a removal are two.
  @inlinable
  static func empty(_ slot: inout UInt64?, ifItHolds id: UInt64) {
    if slot == id { slot = nil }
  }

  /// Drops the oldest buffered entry; returns its id.
  @inlinable
  mutating func dropFirst() -> UInt64 {
    let id = entries[head].id
    forget(at: head)
    head += 1
    return id
  }

  /// Whether the oldest buffered items make a batch due at `now`.
  @inlinable
  func isDue(now: PaceInstant) -> Bool {
    guard head < entries.count else { return false }
    // Fields read in place: a copy of the entry would copy its item.
    return bufferedCount >= maxCount || entries[head].id <= flushedThrough
      || entries[head].arrival.advanced(byNanoseconds: maxWaitNanoseconds) <= now
  }

  /// Sends the due batches that slots allow, lets waiting callers in as room appears, and sets the
  /// timer for the next batch that only `maxWait` will make due.
  @inlinable
  mutating func sendDue(now: PaceInstant, into action: inout BatchAction<Item>) {
    while inFlight < maxInFlight, isDue(now: now) {
      let end = min(entries.count, head + maxCount)
      // The driver's lock is held meanwhile, and the callers adding items wait for it: the items
      // are copied in one pass, and the ids, consecutive, are a range.
      if storesKeys {
        for index in head..<end { forget(at: index) }
      }
      let items = Array(entries[head..<end].lazy.map(\.item))
      let ids = entries[head].id..<(entries[end - 1].id &+ 1)
      head = end
      lastBatch &+= 1
      inFlight += 1
      action.batches.append(.init(id: lastBatch, entries: ids, items: items))
      admitWaiters(now: now, into: &action)
    }
    if head > 64, head * 2 > entries.count {
      entries.removeFirst(head)
      if storesKeys { keys.removeFirst(head) }
      head = 0
    }
    let deadline: PaceInstant? =
      if head < entries.count, !isDue(now: now) {
        entries[head].arrival.advanced(byNanoseconds: maxWaitNanoseconds)
      } else {
        nil
      }
    // Due but no slot: the end of a batch sends it. A timer armed for an earlier deadline, or for
    // items already sent, is kept rather than cancelled: it fires early, finds nothing due, and
    // arms for the deadline of then. Batches that fill before `maxWait` so cost one timer a
    // `maxWait`, not one a batch (each a task to start, and one to cancel).
    if let deadline, armed.map({ deadline < $0 }) ?? true {
      armed = deadline
      action.arm = deadline
    }
  }

  /// Lets waiting callers in, oldest first, while there is room.
  @inlinable
  mutating func admitWaiters(now: PaceInstant, into action: inout BatchAction<Item>) {
    var admitted = 0
    while admitted < waiters.count {
      let waiter = waiters[admitted]
      if waiter.joins, let key = waiter.key, let id = newest[key] {
        action.admitted.append(.init(caller: waiter.caller, entry: id))
      } else if bufferedCount < capacity {
        action.admitted.append(.init(caller: waiter.caller, entry: append(waiter.item, key: waiter.key, now: now)))
      } else {
        break
      }
      admitted += 1
    }
    waiters.removeFirst(admitted)
  }
}

/// What a `load` joins a buffered item by: the item, where it is `Hashable`.
///
/// It holds the item itself, `Sendable` as `Batcher`'s items are, and the item's hash value,
/// computed once where the key is made: the machine looks a key up, stores it and removes it,
/// each a hash, and a probe compares the keys it passes, each through the existential. So a key
/// hashes as its stored hash value, and two keys whose hash values differ are unequal without a
/// look at their items; equal items have equal hash values, whichever kind holds them.
///
/// A statically `Hashable` item compares as itself, through its own witnesses, and its key is
/// made in the caller's module (`@inlinable`), where the holder's type is known: unspecialised,
/// it was looked up at run time for every key. An item found `Hashable` at run time only
/// (`Batcher`'s initialiser for any item) compares through `AnyHashable`.
@usableFromInline
struct BatchKey: Hashable, Sendable {
  @usableFromInline let item: any HashableItem
  @usableFromInline let itemHash: Int

  @inlinable init(_ item: some Hashable & Sendable) {
    self.item = StaticallyHashable(item: item)
    itemHash = item.hashValue
  }

  /// The key of an item whose type is `Hashable` at run time only (`Batcher`'s initialiser for
  /// any item), or `nil` where it is not.
  @usableFromInline init?(ifHashable item: some Sendable) {
    guard let hashable = item as? any Hashable else { return nil }
    self.item = DynamicallyHashable(item: item)
    itemHash = hashable.hashValue
  }

  @inlinable static func == (left: BatchKey, right: BatchKey) -> Bool {
    left.itemHash == right.itemHash && left.item.isEqual(to: right.item)
  }

  @inlinable func hash(into hasher: inout Hasher) {
    hasher.combine(itemHash)
  }
}

/// A `Sendable` item seen as `Hashable`.
@usableFromInline
protocol HashableItem: Sendable {
  var anyHashable: AnyHashable { get }
  func isEqual(to other: any HashableItem) -> Bool
}

/// An item whose type is `Hashable`.
@usableFromInline
struct StaticallyHashable<Item: Hashable & Sendable>: HashableItem {
  @usableFromInline let item: Item

  @inlinable init(item: Item) {
    self.item = item
  }

  @usableFromInline var anyHashable: AnyHashable { AnyHashable(item) }

  @inlinable func isEqual(to other: any HashableItem) -> Bool {
    if let other = other as? Self { return item == other.item }
    return anyHashable == other.anyHashable
  }
}

/// An item found `Hashable` at run time, when its key was made.
private struct DynamicallyHashable<Item: Sendable>: HashableItem {
  let item: Item

  var anyHashable: AnyHashable {
    guard let hashable = item as? any Hashable else {
      preconditionFailure("BatchKey: made only from an item found Hashable")
    }
    return AnyHashable(hashable)
  }

  func isEqual(to other: any HashableItem) -> Bool { anyHashable == other.anyHashable }
}

extension BatchMachine where Item: Hashable & Sendable {
  /// ``add(_:key:caller:joins:now:)`` for an item that is its own key.
  mutating func add(_ item: Item, caller: UInt64, joins: Bool, now: PaceInstant) -> BatchAction<Item> {
    add(item, key: BatchKey(item), caller: caller, joins: joins, now: now)
  }
}

/// What a ``BatchMachine`` asks its driver to do.
@usableFromInline
struct BatchAction<Item> {
  /// A caller whose item is buffered, in the entry `entry` (new, or joined).
  @usableFromInline
  struct Admission: Equatable {
    @usableFromInline let caller: UInt64
    @usableFromInline let entry: UInt64

    @inlinable init(caller: UInt64, entry: UInt64) {
      self.caller = caller
      self.entry = entry
    }
  }

  /// A batch to send now: its entries' ids and items, in the same order.
  @usableFromInline
  struct Batch {
    @usableFromInline let id: UInt64
    /// The entries' ids, consecutive: entries are numbered as they are buffered, leave the buffer
    /// oldest first, and a batch takes the oldest.
    @usableFromInline let entries: Range<UInt64>
    @usableFromInline let items: [Item]

    @inlinable init(id: UInt64, entries: Range<UInt64>, items: [Item]) {
      self.id = id
      self.entries = entries
      self.items = items
    }

    /// A batch of the entries `entries`, which must be consecutive ids (a test's expectation).
    init(id: UInt64, entries: [UInt64], items: [Item]) {
      let range = (entries.first ?? 1)..<((entries.last ?? 0) &+ 1)
      precondition(range.elementsEqual(entries), "BatchAction.Batch: entries must be consecutive (got \(entries))")
      self.init(id: id, entries: range, items: items)
    }
  }

  /// The callers whose items are buffered, in order.
  @usableFromInline var admitted: [Admission] = []
  /// The caller refused with ``BatcherError/bufferFull``.
  @usableFromInline var rejected: UInt64?
  /// The caller waiting for room that leaves, with `CancellationError`.
  @usableFromInline var refused: UInt64?
  /// The entries dropped to make room, whose loaders get ``BatcherError/dropped``.
  @usableFromInline var dropped: [UInt64] = []
  /// The batches to send, in order.
  @usableFromInline var batches: [Batch] = []
  /// The deadline to arm the driver's timer for, in place of any armed; `nil`: the timer stays
  /// as it is.
  @usableFromInline var arm: PaceInstant?

  @inlinable init(
    admitted: [Admission] = [], rejected: UInt64? = nil, refused: UInt64? = nil, dropped: [UInt64] = [],
    batches: [Batch] = [], arm: PaceInstant? = nil
  ) {
    self.admitted = admitted
    self.rejected = rejected
    self.refused = refused
    self.dropped = dropped
    self.batches = batches
    self.arm = arm
  }
}

extension BatchAction: Equatable where Item: Equatable {}
extension BatchAction.Batch: Equatable where Item: Equatable {}
extension BatchMachine: Sendable where Item: Sendable {}
extension BatchMachine.Entry: Sendable where Item: Sendable {}
extension BatchMachine.Waiter: Sendable where Item: Sendable {}
extension BatchAction: Sendable where Item: Sendable {}
extension BatchAction.Batch: Sendable where Item: Sendable {}
extension BatchAction.Admission: Sendable {}
