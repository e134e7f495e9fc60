import AsyncAlgorithms
import Pace
import Testing

/// Pace and swift-async-algorithms imported together: each library's operators resolve without
/// ambiguity, and they chain both ways. Pace's operators get an interval of an hour, which never
/// elapses during a test, so what comes out depends only on their rules for a finishing base
/// sequence.
@Suite struct InteropTests {
  let hour = Duration.seconds(3600)

  @Test func debounceAndDebouncedLiveSideBySide() async {
    let theirs = await Array([1, 2, 3].async.debounce(for: hour))
    let ours = await Array([1, 2, 3].async.debounced(for: hour))
    #expect(theirs == [3])
    #expect(ours == [3])

    let withClock = [1, 2, 3].async.debounce(for: hour, tolerance: .milliseconds(1), clock: ContinuousClock())
    let oursWithClock = [1, 2, 3].async.debounced(for: hour, edges: .both, maximumWait: hour, clock: ContinuousClock())
    #expect(await Array(withClock) == [3])
    #expect(await Array(oursWithClock) == [1, 3])
  }

  @Test func throttleAndThrottledLiveSideBySide() async {
    // Theirs sleeps out the interval before its last element, so it gets a short one.
    let theirs = await Array([1, 2, 3].async._throttle(for: .milliseconds(1)))
    let theirsWithClock = await Array(
      [1, 2, 3].async._throttle(for: .milliseconds(1), clock: SuspendingClock(), latest: false))
    let ours = await Array([1, 2, 3].async.throttled(for: hour))
    #expect(theirs.first == 1)
    #expect(theirsWithClock.first == 1)
    // The pending trailing element is delivered before the end: the last element is not lost.
    #expect(ours == [1, 3])
  }

  @Test func theyChainBothWays() async {
    let batches = [1, 2, 3, 4, 5].async
      .throttled(for: hour, edges: .trailing, merge: .custom { $0 + $1 })  // Pace: 15 at the end
      .chunks(ofCount: 2)  // swift-async-algorithms
    #expect(await Array(batches) == [[15]])

    let deduplicated = [1, 1, 2, 2].async.removeDuplicates().debounced(for: hour, merge: .sum)
    #expect(await Array(deduplicated) == [3])

    let channel = AsyncChannel<String>()
    let debounced = channel.debounced(for: hour)
    let sender = Task {
      await channel.send("a")
      await channel.send("b")
      channel.finish()
    }
    #expect(await Array(debounced) == ["b"])
    await sender.value
  }

  @Test func testSchedulerIsAClockForEitherLibrary() {
    let scheduler = TestScheduler()
    let theirs = [1].async.debounce(for: .milliseconds(300), clock: scheduler)
    let ours = [1].async.debounced(for: .milliseconds(300), clock: scheduler)
    let timer = AsyncTimerSequence(interval: .seconds(1), clock: scheduler)
    _ = (theirs, ours, timer)
  }
}
