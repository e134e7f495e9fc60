import Foundation
import Observation
import Pace
import PaceObservation
import Testing

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
@MainActor @Observable
final class SearchModel {
  var query = ""
  var scope = 0
  var untracked = 0
}

/// Collects the events of a connection; dispatch is `@Sendable`.
final class Events<Value: Sendable>: @unchecked Sendable {
  // @unchecked Sendable: `values` is read and written only while `lock` is held.
  private let lock = NSLock()
  private var values: [Value] = []

  @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
  func record(_ value: Value) {
    lock.lock()
    values.append(value)
    lock.unlock()
  }

  var all: [Value] {
    lock.lock()
    defer { lock.unlock() }
    return values
  }
}

@MainActor
@Suite("Fuser.observing on virtual time")
struct FuserObservingTests {
  let scheduler = TestScheduler()
  let model = SearchModel()

  @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
  @Test func eachChangeAfterConnectIsAnEventAndTheValueAtConnectIsNot() {
    model.query = "before"
    let events = Events<String>()
    let connection = Fuser.observing(scheduler: scheduler) { [model] in model.query }.connect(events.record)

    scheduler.advance()
    #expect(events.all == [])
    model.query = "s"
    scheduler.advance()
    model.query = "sw"
    scheduler.advance()
    #expect(events.all == ["s", "sw"])
    connection.dispose()
  }

  @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
  @Test func changesInOneTurnArriveAsOneEventWithTheLatestValue() {
    let events = Events<String>()
    let connection = Fuser.observing(scheduler: scheduler) { [model] in model.query }.connect(events.record)

    model.query = "s"
    model.query = "sw"
    model.query = "swi"
    #expect(events.all == [], "read again one turn later")
    scheduler.advance()
    #expect(events.all == ["swi"])
    connection.dispose()
  }

  @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
  @Test func everyPropertyTheExpressionReadsIsTracked() {
    let events = Events<String>()
    let connection = Fuser.observing(scheduler: scheduler) { [model] in "\(model.query):\(model.scope)" }
      .connect(events.record)

    model.scope = 1
    scheduler.advance()
    model.untracked = 7
    scheduler.advance()
    model.query = "a"
    scheduler.advance()
    #expect(events.all == [":1", "a:1"])
    connection.dispose()
  }

  @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
  @Test func disposeStopsTracking() {
    let events = Events<String>()
    let connection = Fuser.observing(scheduler: scheduler) { [model] in model.query }.connect(events.record)
    model.query = "a"
    scheduler.advance()
    connection.dispose()

    model.query = "b"
    scheduler.advance()
    model.query = "c"
    scheduler.advance()
    #expect(events.all == ["a"])
    #expect(scheduler.pendingCount == 0)
  }

  @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
  @Test func disposeBetweenAChangeAndItsTurnDropsTheEvent() {
    let events = Events<String>()
    let connection = Fuser.observing(scheduler: scheduler) { [model] in model.query }.connect(events.record)
    model.query = "a"
    connection.dispose()
    scheduler.advance()
    #expect(events.all == [])
  }

  @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
  @Test func connectionsAreIndependent() {
    let first = Events<String>()
    let second = Events<String>()
    let queries = Fuser.observing(scheduler: scheduler) { [model] in model.query }
    let firstConnection = queries.connect(first.record)
    let secondConnection = queries.connect(second.record)
    model.query = "a"
    scheduler.advance()
    firstConnection.dispose()
    model.query = "b"
    scheduler.advance()
    #expect(first.all == ["a"])
    #expect(second.all == ["a", "b"])
    secondConnection.dispose()
  }

  @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
  @Test func composesWithDebounceOnVirtualTime() {
    let events = Events<String>()
    let times = Events<Duration>()
    let scheduler = scheduler
    let connection = Fuser.observing(scheduler: scheduler) { [model] in model.query }
      .debounced(for: .milliseconds(300), maximumWait: .seconds(1), scheduler: scheduler)
      .connect { query in
        events.record(query)
        times.record(PaceInstant.zero.duration(to: scheduler.now))
      }

    // Typing every 100 ms for 1.5 s, then a pause.
    for (step, letter) in "abcdefghijklmnop".enumerated() {
      scheduler.advance(to: PaceInstant.zero.advanced(by: .milliseconds(100 * step)))
      model.query.append(letter)
    }
    scheduler.advance(by: .seconds(2))

    // maximumWait cuts the burst at 1 s, with what was typed before (the "k" typed at 1000 ms comes
    // after the timer due then); the trailing edge comes 300 ms after the last letter.
    #expect(events.all == ["abcdefghij", "abcdefghijklmnop"])
    #expect(times.all == [.milliseconds(1_000), .milliseconds(1_800)])
    connection.dispose()
  }

  @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
  @Test func streamsTheChanges() async {
    let stream = Fuser.observing(scheduler: scheduler) { [model] in model.query }.stream()
    var iterator = stream.makeAsyncIterator()
    model.query = "a"
    scheduler.advance()
    model.query = "b"
    scheduler.advance()
    #expect(await iterator.next() == "a")
    #expect(await iterator.next() == "b")
  }
}
