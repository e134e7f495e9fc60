import PaceTestSupport
import Testing

@testable import Pace

/// The ring buffer that holds a keyed shard's undelivered invocations and an async operator's
/// undelivered outputs: seeded random appends and pops against an array (growth while the ring
/// wraps around its end included), and the lifetimes of its elements through growth,
/// `releaseStorage()`, `removeAll()` and `deinit`.
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
}
