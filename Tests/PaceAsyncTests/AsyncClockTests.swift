import Dispatch
import Foundation
import PaceTestSupport
import Testing

@testable import Pace

@Suite struct AsyncClockTests {
  // real-time: ContinuousClock read through AsyncClock's fast path (CLOCK_BOOTTIME on Linux);
  // only orderings are checked, and the 120 s bound is only there to fail instead of hanging.
  @Test func continuousClockTimersNeverFireBeforeTheirDeadline() async throws {
    let clock = AsyncClock(ContinuousClock())
    let start = clock.now()
    #expect(start.nanoseconds >= 0)
    let reached = LockedState<[Bool]>([])
    for delay in [0, 1, 2, 5] {
      let deadline = clock.now().advanced(by: .milliseconds(delay))
      let fired = DispatchSemaphore(value: 0)
      _ = clock.schedule(deadline) {
        reached.withLock { $0.append(clock.now() >= deadline) }
        fired.signal()
      }
      // Waited for off the cooperative pool, whose threads the timer's task needs.
      let result = await offTheCooperativePool { fired.wait(timeout: .now() + 120) }
      #expect(result == .success, "the timer at +\(delay) ms never fired")
    }
    #expect(reached.withLock { $0 } == [true, true, true, true])
    // It advances with the clock it stands for.
    let before = ContinuousClock.now
    let elapsed = clock.now()
    try await Task.sleep(for: .milliseconds(3))  // real-time: the real clock must advance with it
    let later = clock.now()
    #expect(later.nanoseconds - elapsed.nanoseconds >= 3_000_000)
    #expect(later.nanoseconds - elapsed.nanoseconds <= before.duration(to: .now).paceNanoseconds + 1_000_000)
  }
}
