import Pace
import PaceTestSupport
import Testing

@testable import PaceHTTPClient

/// `ReachabilityMachine`, driven directly: who proceeds, who waits, who is resumed.
@Suite struct ReachabilityMachineTests {
  @Test func aWaitProceedsAtOnceWhileThePathIsUp() {
    var machine = ReachabilityMachine(isReachable: true)
    #expect(machine.wait(id: 1) == .proceed)
    #expect(machine.waiting.isEmpty)
  }

  @Test func waitersAreResumedInOrderWhenThePathComesBackAndNotWhenItStaysDown() {
    var machine = ReachabilityMachine(isReachable: false)
    #expect(machine.wait(id: 1) == .suspend)
    #expect(machine.wait(id: 2) == .suspend)
    #expect(machine.setReachable(false) == [])
    #expect(machine.setReachable(true) == [1, 2])
    #expect(machine.waiting.isEmpty)
    #expect(machine.setReachable(true) == [])
  }

  @Test func aCancelledWaiterIsTakenOutOnce() {
    var machine = ReachabilityMachine(isReachable: false)
    _ = machine.wait(id: 1)
    _ = machine.wait(id: 2)
    #expect(machine.cancel(id: 1) == true)
    #expect(machine.cancel(id: 1) == false)
    #expect(machine.setReachable(true) == [2])
    #expect(machine.cancel(id: 2) == false)
  }
}

/// `ManualConnectivity`, the driver: waits, cancellation, many waiters.
@Suite(.timeLimit(.minutes(1))) struct ManualConnectivityTests {
  /// Waits (real time, bounded) until `count` callers wait.
  func waitForWaiters(_ count: Int, on connectivity: ManualConnectivity) async {
    let deadline = ContinuousClock.now.advanced(by: .seconds(30))
    while connectivity.waitingCount < count, ContinuousClock.now < deadline {
      // real-time: a bounded poll for tasks registering their wait
      try? await Task.sleep(for: .milliseconds(1))
    }
    #expect(connectivity.waitingCount == count)
  }

  @Test func returnsAtOnceWhenReachable() async throws {
    let connectivity = ManualConnectivity()
    try await connectivity.waitUntilReachable()
    #expect(connectivity.waitingCount == 0)
  }

  @Test func waitsUntilThePathComesBack() async throws {
    let connectivity = ManualConnectivity(isReachable: false)
    let done = Counter()
    let waiter = Task {
      try await connectivity.waitUntilReachable()
      done.increment()
    }
    await waitForWaiters(1, on: connectivity)
    connectivity.setReachable(false)
    #expect(done.count == 0)
    #expect(connectivity.waitingCount == 1)
    connectivity.setReachable(true)
    try await waiter.value
    #expect(done.count == 1)
    #expect(connectivity.waitingCount == 0)
  }

  @Test func aCancelledWaiterThrowsAndLeavesTheOthersWaiting() async throws {
    let connectivity = ManualConnectivity(isReachable: false)
    let cancelled = Task { try await connectivity.waitUntilReachable() }
    let kept = Task { try await connectivity.waitUntilReachable() }
    await waitForWaiters(2, on: connectivity)
    cancelled.cancel()
    await #expect(throws: CancellationError.self) { try await cancelled.value }
    #expect(connectivity.waitingCount == 1)
    connectivity.setReachable(true)
    try await kept.value
  }

  @Test func aTaskCancelledBeforeItWaitsThrowsWithoutWaiting() async {
    let connectivity = ManualConnectivity(isReachable: false)
    let task = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      try await connectivity.waitUntilReachable()
    }
    await #expect(throws: CancellationError.self) { try await task.value }
    #expect(connectivity.waitingCount == 0)
  }

  @Test func aThousandWaitersAreAllResumedByOneChange() async throws {
    let connectivity = ManualConnectivity(isReachable: false)
    let resumed = Counter()
    try await withThrowingTaskGroup(of: Void.self) { group in
      for _ in 0..<1000 {
        group.addTask {
          try await connectivity.waitUntilReachable()
          resumed.increment()
        }
      }
      await waitForWaiters(1000, on: connectivity)
      #expect(resumed.count == 0)
      connectivity.setReachable(true)
      try await group.waitForAll()
    }
    #expect(resumed.count == 1000)
  }

  @Test func aResumedWaiterMayCallInAgainAtOnce() async throws {
    // No lock is held while resuming: a waiter that goes down and waits again does not deadlock.
    let connectivity = ManualConnectivity(isReachable: false)
    let again = Task {
      try await connectivity.waitUntilReachable()
      connectivity.setReachable(false)
      try await connectivity.waitUntilReachable()
    }
    await waitForWaiters(1, on: connectivity)
    connectivity.setReachable(true)
    await waitForWaiters(1, on: connectivity)
    #expect(!connectivity.isReachable)
    connectivity.setReachable(true)
    try await again.value
  }
}
