import PaceTestSupport
import Testing

@testable import Pace

/// The ring buffer that holds a keyed shard's undelivered invocations and an async operator's
/// undelivered outputs: seeded random appends and pops against an array (growth while the ring
/// wraps around its end included), the lifetimes of its elements through growth,
/// `releaseStorage()`, `removeAll(keepingCapacity:)`, `copy()` and `deinit`, and `first`.
@Suite(.offThePool) struct RingBufferTests {
  typealias LiveInstances = KeyTableTests.LiveInstances
  typealias LifetimeProbe = KeyTableTests.LifetimeProbe

  @Test(arguments: 0..<50)
  func matchesAnArrayOnRandomAppendsAndPops(seed: UInt64) {
    var generator = SeededGenerator(seed: seed)
    var outbox = RingBuffer<Int>()
    var model: [Int] = []
    var next = 0
    var grewWhileWrapped = 0
    for step in 0..<2_000 {
      // Appends a little more often than pops, in runs, so the ring fills, wraps and grows.
      if Int.random(in: 0..<9, using: &generator) < 5 {
        for _ in 0..<Int.random(in: 1...8, using: &generator) {
          let (capacity, wrapped) = (outbox.capacity, outbox.head > 0)
          outbox.append(next)
          if outbox.capacity > capacity, wrapped { grewWhileWrapped += 1 }
          model.append(next)
          next += 1
        }
      } else {
        for _ in 0..<Int.random(in: 1...8, using: &generator) {
          let popped = outbox.popFirst()
          #expect(popped == (model.isEmpty ? nil : model.removeFirst()), "seed \(seed), step \(step)")
        }
      }
      let (count, isEmpty) = (outbox.count, outbox.isEmpty)
      #expect(count == model.count && isEmpty == model.isEmpty, "seed \(seed), step \(step)")
      if isEmpty, Int.random(in: 0..<10, using: &generator) == 0 {
        outbox.releaseStorage()
        let capacity = outbox.capacity
        #expect(capacity == 0)
      }
    }
    while let value = outbox.popFirst() {
      #expect(value == model.removeFirst(), "seed \(seed)")
    }
    #expect(model.isEmpty, "seed \(seed)")
    #expect(grewWhileWrapped > 0, "seed \(seed): the ring never grew while it wrapped")
  }

  @Test func elementsLiveUntilPoppedOrUntilTheOutboxIsDropped() {
    let instances = LiveInstances()
    do {
      var outbox = RingBuffer<LifetimeProbe>()
      for id in 0..<10 { outbox.append(LifetimeProbe(id, instances, hashModulus: .max)) }
      // Wrapped: the oldest 6 popped, then appends past the end of the 16-element ring.
      for id in 0..<6 { #expect(outbox.popFirst()?.id == id) }
      for id in 10..<22 { outbox.append(LifetimeProbe(id, instances, hashModulus: .max)) }
      let capacity = outbox.capacity
      #expect(capacity == 16)
      // Full: the next append grows the ring and keeps the order.
      outbox.append(LifetimeProbe(22, instances, hashModulus: .max))
      #expect(instances.live == 17)
      let grown = outbox.capacity
      #expect(grown == 32)
      for id in 6..<22 { #expect(outbox.popFirst()?.id == id) }
      #expect(instances.live == 1)
      // 20 more wrap around the end of the 32-element ring; deinit takes both parts.
      for id in 23..<43 { outbox.append(LifetimeProbe(id, instances, hashModulus: .max)) }
      let (head, count, capacityAfter) = (outbox.head, outbox.count, outbox.capacity)
      #expect(head + count > capacityAfter)
      #expect(instances.live == 21)
    }
    #expect(instances.live == 0)
    #expect(instances.deinitialisedTwice == 0)
  }

  @Test func removeAllReleasesTheElementsAndTheStorage() {
    let instances = LiveInstances()
    var ring = RingBuffer<LifetimeProbe>()
    for id in 0..<20 { ring.append(LifetimeProbe(id, instances, hashModulus: .max)) }
    for id in 0..<12 { #expect(ring.popFirst()?.id == id) }
    // Wrapped around the end of the 32-element storage.
    for id in 20..<40 { ring.append(LifetimeProbe(id, instances, hashModulus: .max)) }
    let (head, count, capacity) = (ring.head, ring.count, ring.capacity)
    #expect(head + count > capacity)
    ring.removeAll()
    let (emptied, released) = (ring.isEmpty, ring.capacity == 0)
    #expect(emptied && released)
    #expect(instances.live == 0)
    ring.append(LifetimeProbe(40, instances, hashModulus: .max))
    #expect(ring.popFirst()?.id == 40)
    #expect(instances.deinitialisedTwice == 0)
  }

  /// `removeAll(keepingCapacity: true)`, which a rate limiter's queue calls when its last waiter
  /// leaves, must release the elements and keep the storage, so that the next fill allocates
  /// nothing.
  @Test func removeAllKeepingCapacityReleasesTheElementsAndKeepsTheStorage() {
    let instances = LiveInstances()
    var ring = RingBuffer<LifetimeProbe>()
    for id in 0..<10 { ring.append(LifetimeProbe(id, instances, hashModulus: .max)) }
    for id in 0..<6 { #expect(ring.popFirst()?.id == id) }
    // Wrapped around the end of the 16-element storage.
    for id in 10..<20 { ring.append(LifetimeProbe(id, instances, hashModulus: .max)) }
    let (head, count, capacity) = (ring.head, ring.count, ring.capacity)
    #expect(head + count > capacity)
    ring.removeAll(keepingCapacity: true)
    let (emptied, headAfter, kept) = (ring.isEmpty, ring.head, ring.capacity)
    #expect(emptied && headAfter == 0 && kept == 16)
    #expect(instances.live == 0)
    // Full again in the same storage.
    for id in 20..<36 { ring.append(LifetimeProbe(id, instances, hashModulus: .max)) }
    let refilled = ring.capacity
    #expect(refilled == 16)
    for id in 20..<36 { #expect(ring.popFirst()?.id == id) }
    #expect(instances.live == 0)
    #expect(instances.deinitialisedTwice == 0)
  }

  /// `first` lets a consumer look at the oldest element before it takes it, also once the ring
  /// has wrapped around its end.
  @Test func firstIsTheOldestElementLeftInPlace() {
    var ring = RingBuffer<Int>()
    #expect(ring.first == nil)
    for value in 0..<10 { ring.append(value) }
    for value in 0..<8 { #expect(ring.popFirst() == value) }
    for value in 10..<22 { ring.append(value) }
    let (head, count, capacity) = (ring.head, ring.count, ring.capacity)
    #expect(head + count > capacity)
    for value in 8..<22 {
      #expect(ring.first == value)
      #expect(ring.first == value)
      #expect(ring.popFirst() == value)
    }
    #expect(ring.first == nil)
  }

  /// `copy()`, the copy on write of a rate limiter's queue, must copy a wrapped ring's two parts
  /// in order, retain every element once, and leave the copy and the original independent.
  @Test func aCopyHoldsTheSameElementsInOrderAndChangesAlone() {
    let instances = LiveInstances()
    var copy = RingBuffer<LifetimeProbe>()
    do {
      var ring = RingBuffer<LifetimeProbe>()
      let empty = ring.copy()
      let emptyCapacity = empty.capacity
      #expect(emptyCapacity == 0)
      for id in 0..<10 { ring.append(LifetimeProbe(id, instances, hashModulus: .max)) }
      for id in 0..<6 { #expect(ring.popFirst()?.id == id) }
      for id in 10..<22 { ring.append(LifetimeProbe(id, instances, hashModulus: .max)) }
      // Full and wrapped: 10 elements at the end of the storage, 6 at its start.
      let (head, count, capacity) = (ring.head, ring.count, ring.capacity)
      #expect(head == 6 && count == 16 && capacity == 16)
      copy = ring.copy()
      let (copyHead, copyCount, copyCapacity) = (copy.head, copy.count, copy.capacity)
      #expect(copyHead == 0 && copyCount == 16 && copyCapacity == 16)
      // The copy changes alone: it grows and loses its oldest.
      copy.append(LifetimeProbe(22, instances, hashModulus: .max))
      #expect(copy.popFirst()?.id == 6)
      let (countAfter, firstAfter) = (ring.count, ring.first?.id)
      #expect(countAfter == 16 && firstAfter == 6)
      #expect(instances.live == 17)
      // And the original alone.
      #expect(ring.popFirst()?.id == 6)
      #expect(copy.first?.id == 7)
      #expect(instances.live == 16)
    }
    // The original dropped: the elements the copy holds stay.
    #expect(instances.live == 16)
    for id in 7..<23 { #expect(copy.popFirst()?.id == id) }
    #expect(instances.live == 0)
    #expect(instances.deinitialisedTwice == 0)
  }
}
