/// The deadlines of every key in one shard, in a binary min-heap, behind one scheduler timer.
///
/// A keyed primitive never arms a scheduler timer per key: each key's deadline goes in its
/// shard's heap (O(log n), O(1) on average for deadlines that grow with time, as they do), and
/// the shard arms one scheduler timer for the earliest deadline. A million idle keys cost no
/// timer at all. Entries are never removed from the middle: an entry whose key has moved on
/// (cancelled, re-armed, evicted) is recognised as stale when it comes out, which keeps
/// re-arming O(1) for the caller.
///
/// The heap is a ``KeyedStorage``, which shrinks in place as keys go idle and is freed once
/// empty, and a firing takes its due entries out one at a time instead of into an array: the
/// timer thread, which runs the firings, allocates nothing from its malloc arena.
///
/// Noncopyable, because it owns its storage; it lives in its shard's state, under the shard's
/// lock.
@usableFromInline
struct ShardTimer<Key>: ~Copyable {
  @usableFromInline
  struct Entry {
    @usableFromInline let deadline: PaceInstant
    @usableFromInline let key: Key

    @inlinable init(deadline: PaceInstant, key: Key) {
      self.deadline = deadline
      self.key = key
    }
  }

  /// A request to arm the scheduler timer, carried out once the shard's lock is released.
  @usableFromInline
  struct Arming {
    @usableFromInline let deadline: PaceInstant
    @usableFromInline let generation: UInt64
    /// The timer this one replaces, to cancel.
    @usableFromInline let superseded: (any PaceCancellable)?

    @inlinable init(deadline: PaceInstant, generation: UInt64, superseded: (any PaceCancellable)?) {
      self.deadline = deadline
      self.generation = generation
      self.superseded = superseded
    }
  }

  /// The first `count` entries are initialised, in heap order.
  @usableFromInline var storage = KeyedStorage<Entry>()
  @usableFromInline var count = 0
  /// The deadline the scheduler timer is armed for; `nil` when none is.
  @usableFromInline var armedAt: PaceInstant?
  @usableFromInline var handle: (any PaceCancellable)?
  /// Identifies the latest arming; a timer that fires with an older generation is stale.
  @usableFromInline var generation: UInt64 = 0
  /// While a firing takes its entries out, the instant it fires at: a deadline added meanwhile
  /// that is already due waits in `deferred`, for the scheduler's next turn.
  @usableFromInline var firingAt: PaceInstant?
  @usableFromInline var deferred: [Entry] = []

  @usableFromInline init() {}

  @inlinable
  deinit {
    storage.base?.deinitialize(count: count)
  }

  @inlinable var capacity: Int { storage.capacity }

  /// Adds `key`'s deadline. Call ``armIfNeeded()`` before releasing the lock.
  @inlinable
  mutating func add(_ deadline: PaceInstant, for key: Key) {
    if let firingAt, deadline <= firingAt {
      deferred.append(Entry(deadline: deadline, key: key))
      return
    }
    if count == capacity { grow() }
    let entries = storage.base.unsafelyUnwrapped
    // Sift the hole up from the end, then fill it.
    var child = count
    while child > 0 {
      let parent = (child - 1) / 2
      guard deadline < entries[parent].deadline else { break }
      (entries + child).moveInitialize(from: entries + parent, count: 1)
      child = parent
    }
    (entries + child).initialize(to: Entry(deadline: deadline, key: key))
    count += 1
  }

  /// The earliest deadline; `nil` when the heap is empty.
  @inlinable
  var earliest: PaceInstant? { count == 0 ? nil : storage.base.unsafelyUnwrapped.pointee.deadline }

  /// Whether ``armIfNeeded()`` would arm: a cheap test for the hot path, which then arms after
  /// releasing the lock (taking it again briefly).
  @inlinable
  var needsArming: Bool {
    guard let earliest else { return false }
    guard let armedAt else { return true }
    return earliest < armedAt
  }

  /// Arms the scheduler timer for the earliest deadline unless it is armed for that or earlier.
  @inlinable
  mutating func armIfNeeded() -> Arming? {
    guard let earliest else { return nil }
    if let armedAt, armedAt <= earliest { return nil }
    generation &+= 1
    armedAt = earliest
    return Arming(deadline: earliest, generation: generation, superseded: handle.take())
  }

  /// Keeps the handle of the timer armed for `generation`; `false` if a newer arming or
  /// ``removeAll()`` came in between, so the caller must cancel it.
  @inlinable
  mutating func armed(_ timer: any PaceCancellable, generation: UInt64) -> Bool {
    guard generation == self.generation else { return false }
    handle = timer
    return true
  }

  // MARK: Firing

  /// The scheduler timer of `generation` fired at `now`: returns `false` if that timer was
  /// stale. Otherwise take the due entries with ``nextDue()``, then call ``endFiring()``, all
  /// under the lock, and ``armIfNeeded()`` afterwards.
  @inlinable
  mutating func beginFiring(generation: UInt64, now: PaceInstant) -> Bool {
    guard generation == self.generation else { return false }
    handle = nil
    armedAt = nil
    firingAt = now
    return true
  }

  /// The next entry due by the firing's instant, earliest first; `nil` once there is none.
  /// Deadlines added in between that are already due are kept for the next firing.
  @inlinable
  mutating func nextDue() -> Entry? {
    guard let firingAt, let earliest, earliest <= firingAt else { return nil }
    return popFirst()
  }

  /// Ends a firing: the deadlines deferred during it go into the heap, and the storage of a heap
  /// that keys going idle have left sparse shrinks (amortised O(1)).
  @inlinable
  mutating func endFiring() {
    firingAt = nil
    if !deferred.isEmpty {
      for entry in deferred { add(entry.deadline, for: entry.key) }
      deferred = []
    }
    shrinkIfSparse()
  }

  /// Takes out `key`'s deadlines, which will invoke nothing (the key was flushed or cancelled):
  /// see ``removeDeadlines(where:)``.
  @inlinable
  mutating func removeDeadlines(of key: Key) -> (any PaceCancellable)? where Key: Equatable {
    removeDeadlines { $0.key == key }
  }

  /// Takes out the deadlines that will invoke nothing: O(n log n) in the shard's deadlines, for
  /// `flush`, `flushAll` and `cancel`, not for the hot path. Returns the scheduler timer to
  /// cancel when it was armed for an earlier instant than any deadline left (or none is left);
  /// ``needsArming`` then tells whether to arm for the new earliest.
  @inlinable
  mutating func removeDeadlines(where isStale: (Entry) -> Bool) -> (any PaceCancellable)? {
    var kept: [Entry] = []
    while count > 0 {
      let entry = popFirst()
      if !isStale(entry) { kept.append(entry) }
    }
    for entry in kept { add(entry.deadline, for: entry.key) }
    shrinkIfSparse()
    guard let armed = armedAt, earliest.map({ $0 > armed }) ?? true else { return nil }
    armedAt = nil
    generation &+= 1
    return handle.take()
  }

  /// The key of the earliest deadline; `nil` when the heap is empty.
  @inlinable
  var earliestKey: Key? { count == 0 ? nil : storage.base.unsafelyUnwrapped.pointee.key }

  /// Forgets every deadline and disarms; returns the timer to cancel.
  @inlinable
  mutating func removeAll() -> (any PaceCancellable)? {
    storage.base?.deinitialize(count: count)
    count = 0
    deferred = []
    shrinkIfSparse()
    armedAt = nil
    generation &+= 1
    return handle.take()
  }

  // MARK: Storage

  @inlinable
  mutating func popFirst() -> Entry {
    let entries = storage.base.unsafelyUnwrapped
    let first = entries.move()
    count -= 1
    guard count > 0 else { return first }
    // Sift the hole at the root down, then fill it with the last entry.
    let last = (entries + count).move()
    var parent = 0
    while true {
      let left = 2 * parent + 1
      guard left < count else { break }
      let right = left + 1
      let child = right < count && entries[right].deadline < entries[left].deadline ? right : left
      guard entries[child].deadline < last.deadline else { break }
      (entries + parent).moveInitialize(from: entries + child, count: 1)
      parent = child
    }
    (entries + parent).initialize(to: last)
    return first
  }

  /// Frees the storage of an empty heap, and shrinks that of a heap of more than 64 entries
  /// that fills less than a quarter of it to the power of two that it would half fill.
  @inlinable
  mutating func shrinkIfSparse() {
    if count == 0 {
      if capacity > 0 { storage = KeyedStorage() }
    } else if capacity > 64, count < capacity / 4 {
      // The least power of two of at least `2 * count`.
      storage.shrink(to: Swift.max(16, 1 << (Int.bitWidth - (count * 2 - 1).leadingZeroBitCount)), keeping: count)
    }
  }

  @inlinable @inline(never)  // specialised for the key type, but out of the hot path
  mutating func grow() {
    storage.replace(with: Swift.max(16, capacity * 2), moving: count)
  }
}

/// How many shards a keyed primitive splits its keys into: enough that threads calling
/// different keys rarely meet on one lock, few enough that an instance with a handful of keys
/// stays small.
@usableFromInline
let keyedShardCount = 64

/// A key's shard is the top `log2(keyedShardCount)` bits of its hash.
@usableFromInline
let keyedShardShift: UInt64 = 58

extension Dictionary {
  /// Gives back the storage of a table that has shrunk to a quarter of its capacity, so that
  /// evicted keys take no memory; amortised O(1) per removal.
  @inlinable
  mutating func shrinkIfSparse() {
    if isEmpty {
      if capacity > 0 { self = [:] }
    } else if capacity > 64, count < capacity / 4 {
      var smaller = Dictionary(minimumCapacity: count * 2)
      for (key, value) in self { smaller[key] = value }
      self = smaller
    }
  }
}
