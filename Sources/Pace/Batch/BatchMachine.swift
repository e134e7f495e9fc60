/// The logic of ``Batcher`` as a value type: the buffered items in arrival order, the callers
/// waiting for room, the batches in flight, and when the next batch is due.
///
/// The machine holds no task, continuation, lock or clock: entries, callers and batches are ids,
/// `now` comes in and a ``BatchAction`` comes out. The driver keeps the callers' continuations by
/// those ids, sends each batch (in a task of its own, or in the task of the batch whose end made
/// it due) and arms its timer for ``BatchAction/arm``.
///
/// - A batch is due when `maxCount` items are buffered, when the oldest buffered item has waited
///   `maxWait`, or when the oldest was buffered before a `flush`. A due batch is sent as soon as
///   fewer than `maxInFlight` batches are in flight; it takes up to `maxCount` items, oldest first.
/// - A `load` whose item is already buffered (not yet sent) joins that entry: the item is sent
///   once. A `submit` always buffers an entry of its own. An entry is found for joining by its
///   item's hash value, which the driver gives, and then by the items' equality
///   (``BatchIdentity``); an item without a hash value (not `Hashable`) can be neither joined nor
///   join.
/// - At most `capacity` items are buffered; beyond that, ``BatchOverflow`` decides.
@usableFromInline
struct BatchMachine<Item> {
  // The events are `@inlinable`, so that a batcher's calls are specialised for its `Item`.

  /// One buffered item. Its hash value is kept apart, in `links`: an entry of a batcher that only
  /// submits is then as cheap to copy as its item.
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
    @usableFromInline var hash: Int?
    @usableFromInline let joins: Bool

    @inlinable init(caller: UInt64, item: Item, hash: Int?, joins: Bool) {
      self.caller = caller
      self.item = item
      self.hash = hash
      self.joins = joins
    }
  }

  /// What a `load` joins an entry by: its item's hash value, and the next older buffered entry
  /// whose item has the same hash value (`0`: none), for unequal items that hash alike.
  @usableFromInline
  struct Link {
    @usableFromInline let hash: Int
    @usableFromInline let older: UInt64

    @inlinable init(hash: Int, older: UInt64) {
      self.hash = hash
      self.older = older
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
  /// entry's index, once any entry has had a hash value (``storesKeys``); empty until then.
  @usableFromInline var links: [Link?] = []
  @usableFromInline var storesKeys = false
  /// The newest buffered entry of each hash value, for `load`s to join; it links to the older
  /// ones. The entries leave the buffer oldest first, so an entry that leaves is either the
  /// newest of its hash value, and forgotten here, or linked only from entries still buffered,
  /// and passed over as sent.
  /// Keyed by hash value without hashing it again (``IntegerKeyTable``).
  @usableFromInline var newest = IntegerKeyTable<Int, UInt64>()
  /// Whether two items of one hash value are equal: the driver's, from the first `load` on.
  @usableFromInline var areEqual: @Sendable (Item, Item) -> Bool = { _, _ in false }
  /// Whether entries are indexed by hash value in `newest`: from the first `load` on. Until then
  /// (a batcher that only submits) no item is hashed: the driver passes `nil`.
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

  /// The caller `caller` adds `item`, whose hash value is `hash`, at `now`; `joins` for a
  /// `load`, which joins a buffered entry of an equal item.
  @inlinable
  mutating func add(
    _ item: Item, hash: Int?, caller: UInt64, joins: Bool, now: PaceInstant
  ) -> BatchAction<Item> {
    var action = BatchAction<Item>()
    if joins, let hash, let id = bufferedEntry(equalTo: item, hash: hash) {
      action.admitted.append(.init(caller: caller, entry: id))
    } else if bufferedCount < capacity {
      action.admitted.append(.init(caller: caller, entry: append(item, hash: hash, now: now)))
    } else {
      switch overflow {
      case .reject:
        action.rejected = caller
        return action
      case .dropOldest:
        action.dropped.append(dropFirst())
        action.admitted.append(.init(caller: caller, entry: append(item, hash: hash, now: now)))
      case .suspend:
        waiters.append(Waiter(caller: caller, item: item, hash: hash, joins: joins))
      }
    }
    sendDue(now: now, into: &action)
    return action
  }

  /// Indexes the buffered entries and the waiting callers by hash value, with `identity`,
  /// before the first `load` joins one; from then on the driver passes every item's hash value.
  @usableFromInline
  mutating func indexKeys(_ identity: BatchIdentity<Item>) {
    indexesKeys = true
    storesKeys = true
    areEqual = identity.areEqual
    links = Array(repeating: nil, count: head)
    for index in head..<entries.count {
      guard let hash = identity.hash(entries[index].item) else {
        links.append(nil)
        continue
      }
      let older = newest.updateValue(entries[index].id, forKey: hash) ?? 0
      links.append(Link(hash: hash, older: older))
    }
    for index in waiters.indices { waiters[index].hash = identity.hash(waiters[index].item) }
  }

  /// The buffered entry of an item equal to `item`, whose hash value is `hash`: the newest of
  /// that hash value, or an older one it links to.
  @inlinable
  func bufferedEntry(equalTo item: Item, hash: Int) -> UInt64? {
    guard let id = newest[hash] else { return nil }
    return entry(equalTo: item, from: id)
  }

  /// The buffered entry `id`, the newest of its hash value, or the first of the older ones it
  /// links to, whose item is equal to `item`; `nil` once the links reach an entry already sent.
  @inlinable
  func entry(equalTo item: Item, from id: UInt64) -> UInt64? {
    // Ids are consecutive across `entries`: an id's index is its distance from the first.
    let first = entries[0].id
    let oldestBuffered = entries[head].id
    var id = id
    while id >= oldestBuffered {
      let index = Int(truncatingIfNeeded: id &- first)
      if areEqual(entries[index].item, item) { return id }
      id = links[index]?.older ?? 0
    }
    return nil
  }

  /// A `submit` of `item` that finds room (``hasRoom``) at `now`: buffered at once, with no
  /// caller to admit, so that the driver needs no continuation for it.
  @inlinable
  mutating func buffer(_ item: Item, hash: Int?, now: PaceInstant) -> BatchAction<Item> {
    var action = BatchAction<Item>()
    _ = append(item, hash: hash, now: now)
    sendDue(now: now, into: &action)
    return action
  }

  /// A `submit` of `item` that finds room (``hasRoom``) and changes nothing but the buffer: it
  /// joins items that wait, either for the oldest one's `maxWait` (the timer is armed) without
  /// filling a batch, or for a slot (a batch is due), and it is not a batch's first item. It is
  /// buffered without the clock, its arrival never read, and with no action. Returns `false`,
  /// changing nothing, for any other item; ``buffer(_:hash:now:)`` takes it.
  ///
  /// Only a batch's first item starts a `maxWait`, and the first items are those at multiples
  /// of `maxCount` from the oldest: a batch takes `maxCount` items, or every item buffered. A
  /// dropped oldest item would move them, which is why ``BatchOverflow/dropOldest`` always reads
  /// the clock. An oldest item whose `maxWait` has passed is sent by its timer.
  @inlinable
  mutating func bufferQuietly(_ item: Item, hash: Int?) -> Bool {
    guard takesItemQuietly else { return false }
    appendQuietly(item, hash: hash)
    return true
  }

  /// ``bufferQuietly(_:hash:)`` for an item without a hash value, as every item of a batcher
  /// that only submits: no `Optional` is made or stored on the way.
  @inlinable
  mutating func bufferQuietly(_ item: Item) -> Bool {
    guard takesItemQuietly else { return false }
    if storesKeys { links.append(nil) }
    appendQuietly(item)
    return true
  }

  /// A call of `item` that joins a buffered entry (`joins`, of an equal item), or is buffered
  /// quietly (``bufferQuietly(_:hash:)``, with room and nobody waiting before it): it changes
  /// nothing but the buffer, needs no clock and makes no action. Returns the entry, or `nil`,
  /// changing nothing, for any other call; ``add(_:hash:caller:joins:now:)`` takes it.
  ///
  /// A join is quiet while the timer is armed or every slot is taken: then
  /// ``add(_:hash:caller:joins:now:)`` would send nothing that the timer or a batch's end does not.
  @inlinable
  mutating func addQuietly(_ item: Item, hash: Int?, joins: Bool) -> UInt64? {
    guard joins, let hash else { return hasRoom && bufferQuietly(item, hash: hash) ? lastEntry : nil }
    // One look-up of the hash value, to join its entry or to claim it for the new entry.
    let claim = hasRoom && takesItemQuietly ? lastEntry &+ 1 : nil
    guard let newestOfHash = Self.joinOrClaim(&newest[hash], claim) else {
      guard claim != nil else { return nil }
      store(Link(hash: hash, older: 0))
      appendQuietly(item)
      return lastEntry
    }
    if let id = entry(equalTo: item, from: newestOfHash) {
      return armed != nil || inFlight >= maxInFlight ? id : nil
    }
    // Only unequal items hash alike: a new entry, which links to them.
    guard claim != nil else { return nil }
    appendQuietly(item, hash: hash)
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
  /// (``bufferQuietly(_:hash:)``).
  @inlinable
  var takesItemQuietly: Bool {
    let count = bufferedCount
    guard count > 0, count % maxCount != 0, overflow != .dropOldest else { return false }
    // No slot: nothing is sent before a batch's end, whatever is due. A free slot: nothing waiting
    // is due (it would have been sent), the timer is armed for the oldest's maxWait or before, and
    // the item must not fill a batch.
    return inFlight >= maxInFlight || (armed != nil && count &+ 1 < maxCount)
  }

  /// ``appendQuietly(_:)`` for an item that may have a hash value, which it keeps
  /// (``link(_:)``).
  @inlinable
  mutating func appendQuietly(_ item: Item, hash: Int?) {
    link(hash)
    appendQuietly(item)
  }

  /// Appends a quiet item, which joins the wait of the oldest, as its arrival. Its link, if any,
  /// is the caller's to keep: an item without one (a batcher that only submits) then makes and
  /// stores no `Optional` on the way.
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
  mutating func append(_ item: Item, hash: Int?, now: PaceInstant) -> UInt64 {
    link(hash)
    lastEntry &+= 1
    entries.append(Entry(id: lastEntry, item: item, arrival: now))
    return lastEntry
  }

  /// Makes the entry about to be appended, whose item's hash value is `hash`, the newest of that
  /// hash value, linked to the one that was (one look-up); keeps its link (``store(_:)``).
  @inlinable
  mutating func link(_ hash: Int?) {
    guard let hash else { return store(nil) }
    store(Link(hash: hash, older: newest.updateValue(lastEntry &+ 1, forKey: hash) ?? 0))
  }

  /// Keeps the link of the entry about to be appended; from the first link on, every entry's.
  @inlinable
  mutating func store(_ link: Link?) {
    if !storesKeys {
      guard link != nil else { return }
      storesKeys = true
      links = Array(repeating: nil, count: entries.count)
    }
    links.append(link)
  }

  /// The entry leaves the buffer: a `load` can no longer join it. It is the oldest buffered, so
  /// it is the newest of its hash value only if it is the last one.
  @inlinable
  mutating func forget(at index: Int) {
    guard storesKeys, let link = links[index] else { return }
    Self.empty(&newest[link.hash], ifItHolds: entries[index].id)
  }

  /// Empties `slot` if it holds `id`: one look-up of the hash value, where a read and a removal
  /// are two.
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
      if storesKeys { links.removeFirst(head) }
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
      if waiter.joins, let hash = waiter.hash, let id = bufferedEntry(equalTo: waiter.item, hash: hash) {
        action.admitted.append(.init(caller: waiter.caller, entry: id))
      } else if bufferedCount < capacity {
        action.admitted.append(.init(caller: waiter.caller, entry: append(waiter.item, hash: waiter.hash, now: now)))
      } else {
        break
      }
      admitted += 1
    }
    waiters.removeFirst(admitted)
  }
}

/// How a `load` finds a buffered item equal to its own: by the item's hash value, then by the
/// items' equality. The machine keeps only hash values (`Int`s, as cheap to hash, copy and compare
/// as the dictionary's own keys) and compares items only where their hash values are equal, so no
/// item is boxed or cast per call: equal items have equal hash values under `Hashable`'s contract.
@usableFromInline
struct BatchIdentity<Item>: Sendable {
  /// The item's hash value; `nil` for an item that cannot be joined (not `Hashable`).
  @usableFromInline let hash: @Sendable (Item) -> Int?
  /// Whether two items with equal hash values are equal.
  @usableFromInline let areEqual: @Sendable (Item, Item) -> Bool

  @inlinable init(hash: @escaping @Sendable (Item) -> Int?, areEqual: @escaping @Sendable (Item, Item) -> Bool) {
    self.hash = hash
    self.areEqual = areEqual
  }
}

extension BatchIdentity where Item: Sendable {
  /// For an item that may be `Hashable` at run time only (`Batcher`'s initialiser for any
  /// item): such an item is hashed and compared as an `AnyHashable`; any other has no hash value.
  @usableFromInline static var ifHashable: Self {
    Self(
      hash: { ($0 as? any Hashable)?.hashValue },
      areEqual: { left, right in
        guard let left = left as? any Hashable, let right = right as? any Hashable else { return false }
        return AnyHashable(left) == AnyHashable(right)
      })
  }
}

extension BatchIdentity where Item: Hashable & Sendable {
  /// For a `Hashable` item: its own hash value and equality, specialised where the batcher is
  /// made (`@inlinable`).
  @inlinable static var hashable: Self {
    Self(hash: { $0.hashValue }, areEqual: { $0 == $1 })
  }
}

extension BatchMachine where Item: Hashable & Sendable {
  /// ``add(_:hash:caller:joins:now:)`` for a `Hashable` item, indexing entries by hash value
  /// first if the machine does not yet.
  mutating func add(_ item: Item, caller: UInt64, joins: Bool, now: PaceInstant) -> BatchAction<Item> {
    if !indexesKeys { indexKeys(.hashable) }
    return add(item, hash: item.hashValue, caller: caller, joins: joins, now: now)
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
extension BatchMachine.Link: Sendable {}
extension BatchAction: Sendable where Item: Sendable {}
extension BatchAction.Batch: Sendable where Item: Sendable {}
extension BatchAction.Admission: Sendable {}
