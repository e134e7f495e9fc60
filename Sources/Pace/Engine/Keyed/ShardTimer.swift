/// The deadlines of every key in one shard behind one scheduler timer, armed by the package's
/// ``TimerSlot`` rule.
///
/// A keyed primitive never arms a scheduler timer per key: each key's deadline goes in its
/// shard's ``DeadlineHeap``, and the shard arms one timer for the earliest deadline. A million
/// idle keys cost no timer at all. An entry whose key has moved on (cancelled, re-armed,
/// evicted) is recognised as stale when it comes out, which keeps re-arming O(1) for the caller.
///
/// Arming takes the shard's lock twice: the event that adds a deadline reserves the timer with
/// ``reserveIfNeeded()`` before it releases the lock, the driver asks the scheduler for the timer
/// with the lock released, and ``install(_:for:)`` keeps its handle under the lock again.
///
/// A firing takes its due entries out one at a time instead of into an array, so the timer
/// thread allocates nothing from its malloc arena.
///
/// A firing takes the deadlines its own timer would have fired for: those up to the deadline it
/// was armed for, and those before the instant it fires at. A deadline at exactly that instant
/// waits for a timer armed for it, because a late scheduler may fire that timer later: one whose
/// timers fire at the first tick after their deadline fires the shard's timer, armed for an
/// earlier deadline, at a tick that is another key's deadline, and fires that key's own timer a
/// tick later. So each key's deadline comes when a timer armed for it alone would have come, on
/// any scheduler whose timers fire on a tick (at the first tick at or after their deadline, or
/// after it), exact or late, as one pacer per key would see it.
///
/// Noncopyable, because it owns its heap; it lives in its shard's state, under the shard's lock.
@usableFromInline
struct ShardTimer<Key>: ~Copyable {
  @usableFromInline typealias Entry = DeadlineHeap<Key>.Entry

  /// A reservation of the shard's timer, to arm once the shard's lock is released.
  @usableFromInline typealias Arming = TimerSlot.Ticket

  @usableFromInline var heap = DeadlineHeap<Key>()
  @usableFromInline var slot = TimerSlot()
  /// The timer a reservation replaced, handed to the driver by the reservation's ``install(_:for:)``
  /// to cancel: kept here rather than carried in the driver's effects, which stay plain values on
  /// the hot path.
  @usableFromInline var superseded: (any PaceCancellable)?
  /// While a firing takes its entries out, the instant it fires at: a deadline added meanwhile
  /// that is already due waits in `deferred`, for the scheduler's next turn.
  @usableFromInline var firingAt: PaceInstant?
  /// While a firing takes its entries out, the deadline its timer was armed for.
  @usableFromInline var firingFor = PaceInstant.zero
  @usableFromInline var deferred: [Entry] = []

  @usableFromInline init() {}

  @inlinable var count: Int { heap.count }
  @inlinable var capacity: Int { heap.capacity }

  /// The earliest deadline; `nil` when the heap is empty.
  @inlinable var earliest: PaceInstant? { heap.first?.deadline }

  /// The key of the earliest deadline; `nil` when the heap is empty.
  @inlinable var earliestKey: Key? { heap.first?.key }

  /// Adds `key`'s deadline. Call ``reserveIfNeeded()`` before releasing the lock.
  @inlinable
  mutating func add(_ deadline: PaceInstant, for key: Key) {
    if let firingAt, deadline <= firingAt {
      deferred.append((deadline: deadline, key: key))
      return
    }
    heap.insert((deadline: deadline, key: key))
  }

  // MARK: Arming

  /// Reserves the timer for the earliest deadline unless it is armed for that or earlier; the
  /// driver arms the reservation once the lock is released, then calls ``install(_:for:)``.
  @inlinable
  mutating func reserveIfNeeded() -> Arming? {
    guard let earliest else { return nil }
    if let armed = slot.deadline, armed <= earliest { return nil }
    let (ticket, replaced) = slot.reserve(at: earliest)
    // A reservation's install always follows and takes it; only a reservation made before the
    // last one installed finds a handle to replace, and by then the last one has taken its own.
    if let replaced { superseded = replaced }
    return ticket
  }

  /// Keeps the handle of the timer armed for `ticket` and returns `installed`, `false` if a newer
  /// reservation, a firing or ``removeAll()`` came in between (the caller then cancels `timer`),
  /// and the timer a reservation replaced, which the caller cancels once the lock is released.
  @inlinable
  mutating func install(
    _ timer: any PaceCancellable, for ticket: TimerSlot.Ticket
  ) -> (installed: Bool, superseded: (any PaceCancellable)?) {
    (slot.install(timer, for: ticket), superseded.take())
  }

  // MARK: Firing

  /// The timer of `generation` fired at `now`: returns `false` if that timer was stale.
  /// Otherwise take the due entries with ``nextDue()``, then call ``endFiring()`` and
  /// ``reserveIfNeeded()``, all under the lock.
  @inlinable
  mutating func beginFiring(generation: UInt64, now: PaceInstant) -> Bool {
    let armedFor = slot.deadline
    guard slot.fire(generation), let armedFor else { return false }
    firingAt = now
    firingFor = armedFor
    return true
  }

  /// The next entry the firing takes, earliest first; `nil` once there is none. It takes the
  /// deadlines up to the one the timer was armed for and those before the instant it fires at,
  /// never a later one; a deadline at exactly that instant (the timer was armed for an earlier
  /// one) stays for a timer armed for it, which the scheduler fires when it fires such a timer:
  /// at once on an exact scheduler, a tick later on one whose timers fire after their deadline.
  /// Deadlines added in between that are already due are kept for the next firing.
  @inlinable
  mutating func nextDue() -> Entry? {
    guard let firingAt, let earliest, earliest <= firingAt, earliest < firingAt || earliest <= firingFor else {
      return nil
    }
    return heap.removeFirst()
  }

  /// Ends a firing: the deadlines deferred during it go into the heap, and the storage of a heap
  /// that keys going idle have left sparse shrinks (amortised O(1)).
  @inlinable
  mutating func endFiring() {
    firingAt = nil
    if !deferred.isEmpty {
      for entry in deferred { heap.insert(entry) }
      deferred = []
    }
    heap.shrinkIfSparse()
  }

  // MARK: Removal

  /// Takes out the earliest deadline, which invokes nothing (its key has moved on); call
  /// ``shrinkIfSparse()`` once done.
  @inlinable
  mutating func dropEarliest() {
    _ = heap.removeFirst()
  }

  /// Gives back the storage of a heap left sparse or empty.
  @inlinable
  mutating func shrinkIfSparse() {
    heap.shrinkIfSparse()
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
  /// ``reserveIfNeeded()`` then arms for the new earliest.
  @inlinable
  mutating func removeDeadlines(where isStale: (Entry) -> Bool) -> (any PaceCancellable)? {
    heap.removeAll(where: isStale)
    guard let armed = slot.deadline, earliest.map({ $0 > armed }) ?? true else { return nil }
    return slot.disarm()
  }

  /// Forgets every deadline and disarms; returns the timer to cancel.
  @inlinable
  mutating func removeAll() -> (any PaceCancellable)? {
    heap.removeAll()
    deferred = []
    return slot.disarm()
  }
}
