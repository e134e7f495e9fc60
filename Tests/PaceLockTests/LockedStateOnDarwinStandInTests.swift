import DarwinStandIn
import Dispatch
import Testing

@testable import PaceLockOnDarwinStandIn

/// `LockedState`'s Darwin path (`os_unfair_lock`), compiled on Linux against `DarwinStandIn`,
/// which declares Apple's API and, like Apple's lock, aborts on misuse.
@Suite struct LockedStateOnDarwinStandInTests {
  @Test func theStandInBehavesLikeAppleLock() {
    let lock = UnsafeMutablePointer<os_unfair_lock>.allocate(capacity: 1)
    defer { lock.deallocate() }
    lock.initialize(to: os_unfair_lock())
    #expect(lock.pointee._os_unfair_lock_opaque == 0)
    #expect(os_unfair_lock_trylock(lock))
    os_unfair_lock_assert_owner(lock)
    #expect(!os_unfair_lock_trylock(lock))
    os_unfair_lock_unlock(lock)
    os_unfair_lock_assert_not_owner(lock)
    os_unfair_lock_lock(lock)
    os_unfair_lock_unlock(lock)
    #expect(lock.pointee._os_unfair_lock_opaque == 0)
  }

  @Test func withLockHoldsTheUnfairLockOnlyWhileItsBodyRuns() {
    let box = LockedState([1, 2])
    let sum = box.withLock { state -> Int in
      os_unfair_lock_assert_owner(box.lock)
      state.append(3)
      return state.reduce(0, +)
    }
    #expect(sum == 6)
    os_unfair_lock_assert_not_owner(box.lock)
    #expect(box.lock.pointee._os_unfair_lock_opaque == 0)
    #expect(box.withLock { $0 } == [1, 2, 3])
  }

  @Test func lockingAgainInsideWithLockAbortsAsOnApplePlatforms() async {
    await #expect(processExitsWith: .failure) {
      let box = LockedState(0)
      box.withLock { _ in box.withLock { $0 += 1 } }
    }
  }
}

/// The same path under contention; CI runs `ConcurrencyTests` under the thread sanitizer,
/// which sees the stand-in's atomics.
@Suite struct LockedStateOnDarwinStandInConcurrencyTests {
  @Test func concurrentIncrementsAreNeitherLostNorRaced() {
    let counter = LockedState(0)
    DispatchQueue.concurrentPerform(iterations: 4) { _ in
      for _ in 0..<2_000 { counter.withLock { $0 += 1 } }
    }
    #expect(counter.withLock { $0 } == 8_000)
  }
}
