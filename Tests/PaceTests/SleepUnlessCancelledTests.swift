import Testing

@testable import Pace

/// `sleepUnlessCancelled(for:)`: the sleep of the timeouts and workers that cancellation
/// ends on purpose.
@Suite struct SleepUnlessCancelledTests {
  @Test func aSleepThatRunsItsCourseSaysSo() async {
    // The helper exists for real-clock timeouts; 1 ms keeps the test short.
    #expect(await Task.sleepUnlessCancelled(for: .milliseconds(1)))  // real-time: 1 ms
  }

  @Test func aCancelledSleepEndsAtOnceAndSaysSo() async {
    let clock = ContinuousClock()
    let started = clock.now
    let sleeper = Task { await Task.sleepUnlessCancelled(for: .seconds(3600)) }  // real-time: cancelled at once
    sleeper.cancel()
    #expect(await sleeper.value == false)
    // An hour's sleep that ended with the cancellation, on however busy a machine.
    #expect(clock.now - started < .seconds(600))
  }

  @Test func aSleepInACancelledTaskDoesNotStart() async {
    let sleeper = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      return await Task.sleepUnlessCancelled(for: .seconds(3600))  // real-time: never starts
    }
    #expect(await sleeper.value == false)
  }
}
