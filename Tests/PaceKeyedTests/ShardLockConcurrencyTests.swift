import Dispatch
import Foundation
import Testing

@testable import Pace

/// The keyed shards' lock under contention: no update lost, and a holder that keeps the lock
/// long (as a timer's firing does) makes the others sleep and wakes them all. CI runs
/// `ConcurrencyTests` under the thread sanitizer, which sees the lock through its annotations.
@Suite struct ShardLockConcurrencyTests {
  @Test func concurrentUpdatesOfOneShardAreNeitherLostNorRaced() {
    let shards = Shards<Int>(count: 2) { 0 }
    let threads = 4
    let perThread = 50_000
    DispatchQueue.concurrentPerform(iterations: threads) { _ in
      for _ in 0..<perThread { shards.withLock(1) { $0 += 1 } }
    }
    let counts = (shards.withLock(0) { $0 }, shards.withLock(1) { $0 })
    #expect(counts == (0, threads * perThread))
  }

  @Test func threadsThatSleptOnAHeldLockAreAllWoken() {
    let shards = Shards<[Int]>(count: 1) { [] }
    let threads = 6
    DispatchQueue.concurrentPerform(iterations: threads) { thread in
      for round in 0..<20 {
        shards.withLock(0) { state in
          state.append(thread)
          // Held well beyond the others' spin, so that they sleep on the lock.
          // real-time: a long hold, not a wait for an event
          if round % 5 == 0 { usleep(2_000) }
        }
      }
    }
    let order = shards.withLock(0) { $0 }
    #expect(order.count == threads * 20)
    for thread in 0..<threads { #expect(order.filter { $0 == thread }.count == 20) }
  }
}
