/// The deadlines of every key in one shard, in a binary min-heap, behind one scheduler timer.
///
/// A keyed primitive never arms a scheduler timer per key: each key's deadline goes in its
/// shard's heap (O(log n), O(1) on average for deadlines that grow with time, as they do), and
/// the shard arms one scheduler timer for the earliest deadline. A million idle keys cost no
/// timer at all. Entries are never removed from the middle: an entry whose key has moved on
/// (cancelled, re-armed, evicted) is recognised as stale when it comes out, which keeps
/// re-arming O(1) for the caller.
@usableFromInline
struct ShardTimer<Key> {
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

  @usableFromInline var heap: [Entry] = []
  /// The deadline the scheduler timer is armed for; `nil` when none is.
  @usableFromInline var armedAt: PaceInstant?
  @usableFromInline var handle: (any PaceCancellable)?
  /// Identifies the latest arming; a timer that fires with an older generation is stale.
  @usableFromInline var generation: UInt64 = 0

  @usableFromInline init() {}

  @inlinable var count: Int { heap.count }

  /// Adds `key`'s deadline. Call ``armIfNeeded()`` before releasing the lock.
  @inlinable
  mutating func add(_ deadline: PaceInstant, for key: Key) {
    heap.append(Entry(deadline: deadline, key: key))
    var child = heap.count - 1
    while child > 0 {
      let parent = (child - 1) / 2
      guard heap[child].deadline < heap[parent].deadline else { break }
      heap.swapAt(child, parent)
      child = parent
    }
  }

  /// Whether ``armIfNeeded()`` would arm: a cheap test for the hot path, which then arms after
  /// releasing the lock (taking it again briefly).
  @inlinable
  var needsArming: Bool {
    guard let earliest = heap.first?.deadline else { return false }
    guard let armedAt else { return true }
    return earliest < armedAt
  }

  /// Arms the scheduler timer for the earliest deadline unless it is armed for that or earlier.
  @inlinable
  mutating func armIfNeeded() -> Arming? {
    guard let earliest = heap.first?.deadline else { return nil }
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

  /// The scheduler timer of `generation` fired at `now`: takes the entries due by then, earliest
  /// first, or returns `nil` if that timer was stale. Call ``armIfNeeded()`` afterwards.
  @inlinable
  mutating func fired(generation: UInt64, now: PaceInstant) -> [Entry]? {
    guard generation == self.generation else { return nil }
    handle = nil
    armedAt = nil
    var due: [Entry] = []
    while let first = heap.first, first.deadline <= now {
      due.append(popFirst())
    }
    // Keys that went idle leave the heap small; give the memory back (amortised O(1)).
    if heap.capacity > 64, heap.count < heap.capacity / 4 {
      // A new buffer: `Array(heap)` would share the old one, capacity and all.
      var smaller: [Entry] = []
      smaller.reserveCapacity(heap.count * 2)
      smaller.append(contentsOf: heap)
      heap = smaller
    }
    return due
  }

  /// Forgets every deadline and disarms; returns the timer to cancel.
  @inlinable
  mutating func removeAll() -> (any PaceCancellable)? {
    heap = []
    armedAt = nil
    generation &+= 1
    return handle.take()
  }

  @inlinable
  mutating func popFirst() -> Entry {
    let first = heap[0]
    let last = heap.removeLast()
    guard !heap.isEmpty else { return first }
    heap[0] = last
    var parent = 0
    while true {
      let left = 2 * parent + 1
      guard left < heap.count else { break }
      let right = left + 1
      let child = right < heap.count && heap[right].deadline < heap[left].deadline ? right : left
      guard heap[child].deadline < heap[parent].deadline else { break }
      heap.swapAt(child, parent)
      parent = child
    }
    return first
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
