import Pace
import PaceCombine
import Testing

#if canImport(Combine)
import Combine
#else
import OpenCombine
#endif

/// A subscriber that records what it receives with the virtual time, and requests demand only
/// when told, so tests can hold it at zero demand.
final class Recorder<Input: Sendable, Failure: Error>: Subscriber, @unchecked Sendable {
  // @unchecked Sendable: used from one test thread only; the TestScheduler runs work on it.
  enum Event: Equatable, CustomStringConvertible {
    case value(Input, at: Duration)
    case finished(at: Duration)
    case failed(String, at: Duration)

    static func == (lhs: Event, rhs: Event) -> Bool { lhs.description == rhs.description }

    var description: String {
      switch self {
      case .value(let value, let time): "\(value)@\(time)"
      case .finished(let time): "|@\(time)"
      case .failed(let error, let time): "^\(error)@\(time)"
      }
    }
  }

  let scheduler: TestScheduler
  let initialDemand: Subscribers.Demand
  var subscription: (any Subscription)?
  var events: [Event] = []

  init(scheduler: TestScheduler, initialDemand: Subscribers.Demand = .unlimited) {
    self.scheduler = scheduler
    self.initialDemand = initialDemand
  }

  var time: Duration { PaceInstant.zero.duration(to: scheduler.now) }

  func receive(subscription: any Subscription) {
    self.subscription = subscription
    if initialDemand > .none { subscription.request(initialDemand) }
  }

  func receive(_ input: Input) -> Subscribers.Demand {
    events.append(.value(input, at: time))
    return .none
  }

  func receive(completion: Subscribers.Completion<Failure>) {
    switch completion {
    case .finished: events.append(.finished(at: time))
    case .failure(let error): events.append(.failed("\(error)", at: time))
    }
  }
}

struct Boom: Error, CustomStringConvertible {
  var description: String { "boom" }
}

/// Sends `values` at the given virtual times (milliseconds) into `subject`.
func send<Value, Failure: Error>(
  _ timeline: [(Int, Value)], to subject: PassthroughSubject<Value, Failure>, on scheduler: TestScheduler
) {
  for (time, value) in timeline {
    scheduler.advance(to: PaceInstant.zero.advanced(by: .milliseconds(time)))
    subject.send(value)
  }
}

func ms(_ milliseconds: Int) -> Duration { .milliseconds(milliseconds) }

@Suite("Publisher.debounced and .throttled on virtual time")
struct PacedPublisherTests {
  let scheduler = TestScheduler()

  @Test func debouncedEmitsTheTrailingEdgeAfterAQuietInterval() {
    let subject = PassthroughSubject<Int, Never>()
    let recorder = Recorder<Int, Never>(scheduler: scheduler)
    subject.debounced(for: ms(100), scheduler: scheduler).subscribe(recorder)

    send([(0, 1), (50, 2), (120, 3), (400, 4)], to: subject, on: scheduler)
    scheduler.advance(by: ms(1_000))

    #expect(recorder.events == [.value(3, at: ms(220)), .value(4, at: ms(500))])
  }

  @Test func debouncedWithLeadingEdgeAndMaxWait() {
    let subject = PassthroughSubject<Int, Never>()
    let recorder = Recorder<Int, Never>(scheduler: scheduler)
    subject.debounced(for: ms(100), edges: .both, maximumWait: ms(250), scheduler: scheduler).subscribe(recorder)

    // A call every 60 ms until 480 ms: leading at 0, then maximumWait at 250 and 500, which takes the
    // last call (8 at 480), so nothing is left for a trailing edge.
    send((0...8).map { (60 * $0, $0) }, to: subject, on: scheduler)
    scheduler.advance(by: ms(1_000))

    #expect(
      recorder.events == [
        .value(0, at: ms(0)), .value(4, at: ms(250)), .value(8, at: ms(500)),
      ]
    )
  }

  @Test func debouncedMergesWithAppend() {
    let subject = PassthroughSubject<[Int], Never>()
    let recorder = Recorder<[Int], Never>(scheduler: scheduler)
    subject.debounced(for: ms(100), merge: .append, scheduler: scheduler).subscribe(recorder)

    subject.send([1])
    scheduler.advance(by: ms(50))
    subject.send([2, 3])
    scheduler.advance(by: ms(1_000))

    #expect(recorder.events == [.value([1, 2, 3], at: ms(150))])
  }

  @Test func throttledKeepsASteadyCadence() {
    let subject = PassthroughSubject<Int, Never>()
    let recorder = Recorder<Int, Never>(scheduler: scheduler)
    subject.throttled(for: ms(100), scheduler: scheduler).subscribe(recorder)

    send([(0, 1), (10, 2), (20, 3), (150, 4), (260, 5)], to: subject, on: scheduler)
    scheduler.advance(by: ms(1_000))

    // Leading 1 at 0; window ends at 100 with 3; next window ends at 200 with 4; then 300 with 5.
    #expect(
      recorder.events == [
        .value(1, at: ms(0)), .value(3, at: ms(100)), .value(4, at: ms(200)), .value(5, at: ms(300)),
      ]
    )
  }

  @Test func throttledWithFirstMergeAndLeadingEdgeOnly() {
    let subject = PassthroughSubject<Int, Never>()
    let recorder = Recorder<Int, Never>(scheduler: scheduler)
    subject.throttled(for: ms(100), edges: .leading, merge: .first, scheduler: scheduler).subscribe(recorder)

    send([(0, 1), (10, 2), (120, 3), (130, 4)], to: subject, on: scheduler)
    scheduler.advance(by: ms(1_000))

    #expect(recorder.events == [.value(1, at: ms(0)), .value(3, at: ms(120))])
  }

  @Test func completionDeliversThePendingValueFirst() {
    let subject = PassthroughSubject<Int, Never>()
    let recorder = Recorder<Int, Never>(scheduler: scheduler)
    subject.debounced(for: ms(100), scheduler: scheduler).subscribe(recorder)

    send([(0, 1), (30, 2)], to: subject, on: scheduler)
    subject.send(completion: .finished)

    #expect(recorder.events == [.value(2, at: ms(30)), .finished(at: ms(30))])
    #expect(scheduler.pendingCount == 0)
  }

  @Test func failureDeliversThePendingValueFirst() {
    let subject = PassthroughSubject<Int, Boom>()
    let recorder = Recorder<Int, Boom>(scheduler: scheduler)
    subject.throttled(for: ms(100), scheduler: scheduler).subscribe(recorder)

    send([(0, 1), (30, 2), (40, 3)], to: subject, on: scheduler)
    subject.send(completion: .failure(Boom()))
    scheduler.advance(by: ms(1_000))

    #expect(recorder.events == [.value(1, at: ms(0)), .value(3, at: ms(40)), .failed("boom", at: ms(40))])
    #expect(scheduler.pendingCount == 0)
  }

  @Test func completionWithNothingPendingFinishesAtOnce() {
    let subject = PassthroughSubject<Int, Never>()
    let recorder = Recorder<Int, Never>(scheduler: scheduler)
    subject.debounced(for: ms(100), scheduler: scheduler).subscribe(recorder)

    send([(0, 1)], to: subject, on: scheduler)
    scheduler.advance(to: PaceInstant.zero.advanced(by: ms(300)))
    subject.send(completion: .finished)

    #expect(recorder.events == [.value(1, at: ms(100)), .finished(at: ms(300))])
  }

  @Test func cancellingCancelsTheTimerAndDropsThePendingValue() {
    let subject = PassthroughSubject<Int, Never>()
    let recorder = Recorder<Int, Never>(scheduler: scheduler)
    subject.debounced(for: ms(100), scheduler: scheduler).subscribe(recorder)

    send([(0, 1), (30, 2)], to: subject, on: scheduler)
    recorder.subscription?.cancel()
    #expect(scheduler.pendingCount == 0)

    subject.send(3)
    subject.send(completion: .finished)
    scheduler.advance(by: ms(1_000))
    #expect(recorder.events.isEmpty)
  }

  @Test func releasingTheCancellableWhilePendingLeavesNothingScheduled() {
    let subject = PassthroughSubject<Int, Never>()
    var received: [Int] = []
    var cancellable: AnyCancellable? = subject.debounced(for: ms(100), scheduler: scheduler)
      .sink { received.append($0) }

    subject.send(1)
    #expect(scheduler.pendingCount == 1)
    cancellable = nil
    #expect(cancellable == nil)
    #expect(scheduler.pendingCount == 0)
    scheduler.advance(by: ms(1_000))
    #expect(received.isEmpty)
  }

  @Test func zeroDemandHoldsAndMergesInvocationsUntilDemandArrives() {
    let subject = PassthroughSubject<[Int], Never>()
    let recorder = Recorder<[Int], Never>(scheduler: scheduler, initialDemand: .none)
    subject.throttled(for: ms(100), merge: .append, scheduler: scheduler).subscribe(recorder)

    // Invocations at 0 ([1]), 100 ([2, 3]) and 200 ([4]) meet no demand: held and merged.
    send([(0, [1]), (50, [2]), (60, [3]), (150, [4])], to: subject, on: scheduler)
    scheduler.advance(to: PaceInstant.zero.advanced(by: ms(500)))
    #expect(recorder.events.isEmpty)

    recorder.subscription?.request(.max(1))
    #expect(recorder.events == [.value([1, 2, 3, 4], at: ms(500))])

    // Demand left over is used by the next invocation, and never exceeded.
    recorder.subscription?.request(.max(1))
    send([(600, [5]), (610, [6])], to: subject, on: scheduler)
    scheduler.advance(by: ms(1_000))
    #expect(recorder.events == [.value([1, 2, 3, 4], at: ms(500)), .value([5], at: ms(600))])

    recorder.subscription?.request(.max(5))
    #expect(recorder.events.last == .value([6], at: ms(1_610)))
    #expect(recorder.events.count == 3)
  }

  @Test func completionWaitsForDemandWhenAValueIsHeld() {
    let subject = PassthroughSubject<Int, Never>()
    let recorder = Recorder<Int, Never>(scheduler: scheduler, initialDemand: .none)
    subject.debounced(for: ms(100), scheduler: scheduler).subscribe(recorder)

    send([(0, 1), (10, 2)], to: subject, on: scheduler)
    subject.send(completion: .finished)
    #expect(recorder.events.isEmpty)

    scheduler.advance(by: ms(40))
    recorder.subscription?.request(.max(1))
    #expect(recorder.events == [.value(2, at: ms(50)), .finished(at: ms(50))])
  }

  @Test func eachSubscriptionHasItsOwnMachine() {
    let subject = PassthroughSubject<Int, Never>()
    let paced = subject.debounced(for: ms(100), scheduler: scheduler)
    let first = Recorder<Int, Never>(scheduler: scheduler)
    paced.subscribe(first)
    subject.send(1)
    scheduler.advance(by: ms(50))
    let second = Recorder<Int, Never>(scheduler: scheduler)
    paced.subscribe(second)
    subject.send(2)
    scheduler.advance(by: ms(1_000))

    #expect(first.events == [.value(2, at: ms(150))])
    #expect(second.events == [.value(2, at: ms(150))])
  }

  @Test func downstreamMayRequestMoreFromInsideReceive() {
    let subject = PassthroughSubject<Int, Never>()
    var received: [Int] = []
    let sink = subject.throttled(for: ms(100), scheduler: scheduler).sink { received.append($0) }
    send([(0, 1), (10, 2), (120, 3)], to: subject, on: scheduler)
    scheduler.advance(by: ms(1_000))
    #expect(received == [1, 2, 3])
    sink.cancel()
  }
}

@Suite("Publisher.coalesced on virtual time")
struct CoalescedPublisherTests {
  let scheduler = TestScheduler()

  @Test func elementsOfOneTurnArriveAsOne() {
    let subject = PassthroughSubject<Int, Never>()
    let recorder = Recorder<Int, Never>(scheduler: scheduler)
    subject.coalesced(merge: .sum, scheduler: scheduler).subscribe(recorder)

    subject.send(1)
    subject.send(2)
    subject.send(3)
    #expect(recorder.events.isEmpty)
    scheduler.advance()
    scheduler.advance(by: ms(100))
    subject.send(10)
    subject.send(20)
    scheduler.advance(by: ms(1_000))

    #expect(recorder.events == [.value(6, at: .zero), .value(30, at: ms(100))])
  }

  @Test func aWindowGathersLonger() {
    let subject = PassthroughSubject<[Int], Never>()
    let recorder = Recorder<[Int], Never>(scheduler: scheduler)
    subject.coalesced(window: ms(50), merge: .append, scheduler: scheduler).subscribe(recorder)

    send([(0, [1]), (30, [2]), (60, [3]), (70, [4])], to: subject, on: scheduler)
    subject.send(completion: .finished)

    #expect(recorder.events == [.value([1, 2], at: ms(50)), .value([3, 4], at: ms(70)), .finished(at: ms(70))])
  }
}
