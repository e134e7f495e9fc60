import Dispatch
import PaceTestSupport
import Testing

@testable import Pace

/// A source that the test triggers by hand.
final class ManualSource<Event: Sendable>: Sendable {
  private let listeners = LockedState<[@Sendable (Event) -> Void]>([])
  let teardowns = Counter()

  var fuser: Fuser<Event> {
    Fuser { [self] dispatch in
      listeners.withLock { $0.append(dispatch) }
      return AnyDisposable { [self] in
        teardowns.increment()
        listeners.withLock { $0.removeAll() }
      }
    }
  }

  func send(_ event: Event) {
    for listener in listeners.withLock({ $0 }) { listener(event) }
  }
}

/// What the operators deliver, and when, beyond the laws.
@Suite struct FuserOperatorTests {
  @Test func mapFilterAndCompactMapTransformTheEvents() {
    let source = ManualSource<Int>()
    let mapped = Recorder<String>()
    let filtered = Recorder<Int>()
    let compacted = Recorder<Int>()
    let a = source.fuser.map { "#\($0)" }.connect(mapped.record)
    let b = source.fuser.filter { $0 > 1 }.connect(filtered.record)
    let c = source.fuser.compactMap { $0 == 2 ? nil : $0 * 2 }.connect(compacted.record)
    for value in 1...3 { source.send(value) }
    #expect(mapped.values == ["#1", "#2", "#3"])
    #expect(filtered.values == [2, 3])
    #expect(compacted.values == [2, 6])
    a.dispose()
    b.dispose()
    c.dispose()
  }

  @Test func extractTurnsSourceEventsIntoTheAppsEventType() {
    enum ScreenEvent: Equatable, Sendable {
      case tapped
      case typed(String)
    }
    let taps = ManualSource<Void>()
    let text = ManualSource<String>()
    let events: Fuser<ScreenEvent> = .fromAll(
      .extract({ _ in .tapped }, taps.fuser), .extract(ScreenEvent.typed, text.fuser))
    let output = Recorder<ScreenEvent>()
    let connection = events.connect(output.record)
    taps.send(())
    text.send("a")
    taps.send(())
    #expect(output.values == [.tapped, .typed("a"), .tapped])
    connection.dispose()
    #expect(taps.teardowns.count == 1)
    #expect(text.teardowns.count == 1)
  }

  @Test func debounceHasTheDebouncersExactTiming() {
    let scheduler = TestScheduler()
    let source = ManualSource<String>()
    let output = Recorder<String>(clock: scheduler)
    let connection = source.fuser.debounced(for: .milliseconds(100), scheduler: scheduler).connect(output.record)
    source.send("s")
    scheduler.advance(to: ms(50))
    source.send("sw")
    scheduler.advance(to: ms(120))
    source.send("swi")
    scheduler.advance(to: ms(219))
    #expect(output.values.isEmpty)
    scheduler.advance(to: ms(220))
    #expect(output.values == ["swi"])
    #expect(output.times == [ms(220)])
    connection.dispose()
  }

  @Test func debounceWithMaxWaitAndBothEdges() {
    let scheduler = TestScheduler()
    let source = ManualSource<[Int]>()
    let output = Recorder<[Int]>(clock: scheduler)
    let connection = source.fuser
      .debounced(
        for: .milliseconds(100), edges: .both, maximumWait: .milliseconds(250), merge: .append, scheduler: scheduler
      )
      .connect(output.record)
    // A call every 60 ms: leading at 0, maximumWait at 250, trailing 100 ms after the last call.
    for (index, time) in [0, 60, 120, 180, 240, 300].enumerated() {
      scheduler.advance(to: ms(Int64(time)))
      source.send([index])
    }
    scheduler.advance(to: ms(1000))
    #expect(output.values == [[0], [1, 2, 3, 4], [5]])
    #expect(output.times == [ms(0), ms(250), ms(400)])
    connection.dispose()
  }

  @Test func throttleKeepsASteadyCadence() {
    let scheduler = TestScheduler()
    let source = ManualSource<Int>()
    let output = Recorder<Int>(clock: scheduler)
    let connection = source.fuser.throttled(for: .milliseconds(100), scheduler: scheduler).connect(output.record)
    for time in stride(from: 0, through: 290, by: 10) {
      scheduler.advance(to: ms(Int64(time)))
      source.send(time)
    }
    scheduler.advance(to: ms(1000))
    #expect(output.values == [0, 90, 190, 290])
    #expect(output.times == [ms(0), ms(100), ms(200), ms(300)])
    connection.dispose()
  }

  @Test func coalesceMergesEverythingOfOneTurn() {
    let scheduler = TestScheduler()
    let source = ManualSource<Int>()
    let output = Recorder<Int>(clock: scheduler)
    let connection = source.fuser.coalesced(merge: .sum, scheduler: scheduler).connect(output.record)
    for _ in 0..<5 { source.send(1) }
    #expect(output.values.isEmpty)
    scheduler.advance()
    source.send(2)
    scheduler.advance()
    #expect(output.values == [5, 2])
    connection.dispose()
  }

  @Test func theOldOperatorNamesStillPace() {
    let scheduler = TestScheduler()
    let source = ManualSource<Int>()
    let output = Recorder<Int>(clock: scheduler)
    // Called through a protocol, so that the deprecated names are tested without a warning.
    let old: any DeprecatedPacingSpelling<Int> = source.fuser
    let connections = [
      old.debounce(for: .milliseconds(100), edges: .trailing, maxWait: nil, merge: .latest, scheduler: scheduler),
      old.throttle(for: .milliseconds(100), edges: .leading, merge: .latest, scheduler: scheduler),
      old.coalesce(window: .milliseconds(50), merge: .latest, scheduler: scheduler),
    ].map { $0.connect(output.record) }
    source.send(1)
    scheduler.advance(to: ms(1000))
    #expect(output.values == [1, 1, 1])
    #expect(output.times == [ms(0), ms(50), ms(100)])
    for connection in connections { connection.dispose() }
  }

  @Test func disposingARateLimitedConnectionCancelsItsTimer() {
    let scheduler = TestScheduler()
    let source = ManualSource<Int>()
    let output = Recorder<Int>()
    let connection = source.fuser.debounced(for: .milliseconds(100), scheduler: scheduler).connect(output.record)
    source.send(1)
    #expect(scheduler.pendingCount == 1)
    connection.dispose()
    #expect(scheduler.pendingCount == 0)
    #expect(source.teardowns.count == 1)
    scheduler.run()
    #expect(output.values.isEmpty)
  }

  @Test func eventsSentWhileConnectingAreDelivered() {
    let fuser = Fuser<Int> { dispatch in
      dispatch(1)
      dispatch(2)
      return AnyDisposable {}
    }
    let output = Recorder<Int>()
    let connection = fuser.connect(output.record)
    #expect(output.values == [1, 2])
    connection.dispose()
  }

  @Test func aConnectionDisposedBeforeItsSourceFinishedConnectingTearsItDownAtOnce() {
    // Another thread may dispose while the source's connect closure still runs: the teardown it
    // then returns runs at once, and the connection stays inactive.
    let connection = FuserConnection()
    connection.dispose()
    let teardowns = Counter()
    connection.attach(CountingDisposable(counter: teardowns))
    #expect(teardowns.count == 1)
    #expect(!connection.isActive)
    connection.dispose()
    #expect(teardowns.count == 1)
  }

  @Test func fromAllOfNothingConnectsAndDisposesCleanly() {
    let connection = Fuser<Int>.fromAll([]).connect { _ in }
    connection.dispose()
    #expect(connection.isDisposed)
  }
}

/// The `AsyncSequence` bridges, both ways.
@Suite struct FuserAsyncTests {
  @Test func fromSequenceDispatchesEveryElementInOrderThenEnds() async {
    let output = Recorder<Int>()
    let finished = AsyncStream<Void>.makeStream()
    let fuser = Fuser.fromSequence(FiniteSequence(values: Array(1...5), onEnd: { finished.continuation.finish() }))
    let connection = fuser.connect(output.record)
    for await _ in finished.stream {}
    #expect(output.values == [1, 2, 3, 4, 5])
    connection.dispose()
  }

  @Test func fromSequenceEndsQuietlyWhenTheSequenceThrows() async {
    let output = Recorder<Int>()
    let finished = AsyncStream<Void>.makeStream()
    let fuser = Fuser.fromSequence(
      FiniteSequence(values: [1, 2], failure: TestFailure(), onEnd: { finished.continuation.finish() })
    )
    let connection = fuser.connect(output.record)
    for await _ in finished.stream {}
    #expect(output.values == [1, 2])
    connection.dispose()
  }

  @Test func streamDeliversEventsInOrderIncludingThoseBeforeIteration() async {
    let source = ManualSource<Int>()
    func consume() async -> [Int] {
      let stream = source.fuser.stream()
      source.send(1)
      source.send(2)
      var received: [Int] = []
      for await value in stream {
        received.append(value)
        if value == 2 { source.send(3) }
        if value == 3 { break }
      }
      return received
    }
    #expect(await consume() == [1, 2, 3])
    #expect(source.teardowns.count == 1, "the released stream terminates and disposes its connection")
  }

  @Test func eachStreamIsItsOwnConnection() async {
    let source = ManualSource<Int>()
    let first = source.fuser.stream()
    let second = source.fuser.stream()
    source.send(7)
    var firstIterator = first.makeAsyncIterator()
    var secondIterator = second.makeAsyncIterator()
    #expect(await firstIterator.next() == 7)
    #expect(await secondIterator.next() == 7)
    #expect(source.teardowns.count == 0)
  }

  @Test func releasingAStreamDisposesItsConnection() {
    let source = ManualSource<Int>()
    do {
      let stream = source.fuser.stream()
      source.send(1)
      _ = stream
    }
    #expect(source.teardowns.count == 1)
  }

  @Test func cancellingTheConsumingTaskDisposesTheConnection() async {
    let source = ManualSource<Int>()
    let stream = source.fuser.stream()
    let firstValue = AsyncStream<Int>.makeStream()
    let consumer = Task {
      for await value in stream { firstValue.continuation.yield(value) }
    }
    source.send(1)
    var iterator = firstValue.stream.makeAsyncIterator()
    #expect(await iterator.next() == 1)
    consumer.cancel()
    await consumer.value
    #expect(source.teardowns.count == 1)
  }

  @Test func connectOnMainActorHandlesEventsOnTheMainActorInOrder() async {
    // real-time: events are produced on a background queue and hop to the main queue.
    let source = ManualSource<Int>()
    let done = AsyncStream<[Int]>.makeStream()
    let received = LockedState<[Int]>([])
    let connection = source.fuser.connectOnMainActor { value in
      MainActor.assertIsolated()
      let all = received.withLock {
        $0.append(value)
        return $0
      }
      if all.count == 100 { done.continuation.yield(all) }
    }
    DispatchQueue.global().async {
      for value in 0..<100 { source.send(value) }
    }
    var iterator = done.stream.makeAsyncIterator()
    #expect(await iterator.next() == Array(0..<100))
    connection.dispose()
  }

  @Test @MainActor func connectOnMainActorHandlesMainThreadEventsAtOnce() {
    let source = ManualSource<Int>()
    var received: [Int] = []
    let connection = source.fuser.connectOnMainActor { received.append($0) }
    source.send(1)
    #expect(received == [1])
    connection.dispose()
  }
}

struct TestFailure: Error {}

/// A finite async sequence that can be iterated any number of times.
struct FiniteSequence: AsyncSequence, Sendable {
  typealias Element = Int
  var values: [Int]
  var failure: TestFailure?
  var onEnd: @Sendable () -> Void

  init(values: [Int], failure: TestFailure? = nil, onEnd: @escaping @Sendable () -> Void) {
    self.values = values
    self.failure = failure
    self.onEnd = onEnd
  }

  struct Iterator: AsyncIteratorProtocol {
    var remaining: ArraySlice<Int>
    let failure: TestFailure?
    let onEnd: @Sendable () -> Void

    mutating func next() async throws -> Int? {
      if let value = remaining.popFirst() { return value }
      onEnd()
      if let failure { throw failure }
      return nil
    }
  }

  func makeAsyncIterator() -> Iterator {
    Iterator(remaining: values[...], failure: failure, onEnd: onEnd)
  }
}

/// The seed's names of the pacing operators, now deprecated; a protocol lets a test call them
/// without a deprecation warning.
protocol DeprecatedPacingSpelling<Event> {
  associatedtype Event: Sendable
  func debounce<S: PaceScheduler>(
    for interval: Duration, edges: Edges, maxWait: Duration?, merge: Merge<Event>, scheduler: S
  ) -> Fuser<Event>
  func throttle<S: PaceScheduler>(
    for interval: Duration, edges: Edges, merge: Merge<Event>, scheduler: S
  ) -> Fuser<Event>
  func coalesce<S: PaceScheduler>(window: Duration, merge: Merge<Event>, scheduler: S) -> Fuser<Event>
}

extension Fuser: DeprecatedPacingSpelling where Event == Int {}
