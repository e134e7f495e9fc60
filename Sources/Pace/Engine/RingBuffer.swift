/// A first-in first-out queue in a ring of ``KeyedStorage``, which doubles when full and is given
/// back with ``releaseStorage()`` or ``removeAll(keepingCapacity:)``: the queue of a keyed shard's
/// undelivered invocations, of an async operator's undelivered outputs and of a rate limiter's
/// waiting requests (``RateLimitQueue``, which copies it on write).
///
/// On ``KeyedStorage`` rather than an `Array`, so that a keyed shard's outbox, grown on the
/// callers' threads and emptied on the timer's, leaves nothing in either thread's malloc arena
/// (see ``KeyedStorage``).
///
/// Noncopyable, because it owns its storage and the elements in it, which `deinit` deinitialises.
@usableFromInline
struct RingBuffer<Element>: ~Copyable {
  @usableFromInline var storage = KeyedStorage<Element>()
  /// Where the oldest element is.
  @usableFromInline var head = 0
  @usableFromInline var count = 0

  @inlinable init() {}

  @inlinable deinit {
    deinitializeElements()
  }

  @inlinable var isEmpty: Bool { count == 0 }
  @inlinable var capacity: Int { storage.capacity }

  /// The oldest element, left in place, for a consumer that looks before it takes.
  @inlinable
  var first: Element? {
    count > 0 ? storage.unsafeBase.unsafelyUnwrapped[head] : nil
  }

  @inlinable
  mutating func append(_ element: Element) {
    if count == storage.capacity { grow() }
    var tail = head + count
    if tail >= storage.capacity { tail -= storage.capacity }
    (storage.unsafeBase.unsafelyUnwrapped + tail).initialize(to: element)
    count += 1
  }

  @inlinable
  mutating func popFirst() -> Element? {
    guard count > 0 else { return nil }
    let element = (storage.unsafeBase.unsafelyUnwrapped + head).move()
    head += 1
    if head == storage.capacity { head = 0 }
    count -= 1
    if count == 0 { head = 0 }
    return element
  }

  /// Drops every element and gives the storage back, unless `keepingCapacity`: a queue that
  /// empties and fills in turn keeps its storage rather than allocating it again.
  @inlinable
  mutating func removeAll(keepingCapacity: Bool = false) {
    deinitializeElements()
    count = 0
    head = 0
    if !keepingCapacity { releaseStorage() }
  }

  /// A ring of the same elements in the same order, in storage of the same capacity (none when
  /// empty): the copy on write of an owner that gives a noncopyable ring value semantics.
  @inlinable
  func copy() -> RingBuffer {
    var ring = RingBuffer()
    guard count > 0, let base = storage.unsafeBase else { return ring }
    ring.storage = KeyedStorage(capacity: storage.capacity)
    // The oldest elements first: from `head` to the end, then from the start.
    let first = Swift.min(count, storage.capacity - head)
    let target = ring.storage.unsafeBase.unsafelyUnwrapped
    target.initialize(from: base + head, count: first)
    (target + first).initialize(from: base, count: count - first)
    ring.count = count
    return ring
  }

  /// Frees the storage of an empty ring.
  @inlinable
  mutating func releaseStorage() {
    precondition(count == 0, "RingBuffer.releaseStorage: \(count) elements left")
    storage = KeyedStorage()
    head = 0
  }

  /// Deinitialises the elements, oldest first, leaving `count` to the caller.
  @inlinable
  func deinitializeElements() {
    guard let base = storage.unsafeBase else { return }
    // From `head` to the end of the storage, then from its start.
    let first = Swift.min(count, storage.capacity - head)
    (base + head).deinitialize(count: first)
    base.deinitialize(count: count - first)
  }

  @inlinable @inline(never)  // out of the hot path
  mutating func grow() {
    var new = KeyedStorage<Element>(capacity: Swift.max(16, storage.capacity * 2))
    if let base = storage.unsafeBase {
      // The oldest elements first: from `head` to the end, then from the start.
      let first = Swift.min(count, storage.capacity - head)
      new.unsafeBase.unsafelyUnwrapped.moveInitialize(from: base + head, count: first)
      (new.unsafeBase.unsafelyUnwrapped + first).moveInitialize(from: base, count: count - first)
    }
    swap(&storage, &new)
    head = 0
  }
}
