import Dispatch
import Foundation
import Pace
import PaceCombine
import PaceTestSupport
import Testing

#if canImport(Combine)
import Combine
#else
import OpenCombine
#endif

/// A subscriber that requests one element at a time from another thread, and checks that it
/// never receives more than it requested and that its calls never overlap.
final class SlowSubscriber: Subscriber, @unchecked Sendable {
  // @unchecked Sendable: every stored var is read and written only while `lock` is held.
  typealias Input = [Int]
  typealias Failure = Never

  private let lock = NSLock()
  private var subscription: (any Subscription)?
  private var requested = 0
  private var received: [Int] = []
  private var receivedCount = 0
  private var inside = false
  private(set) var violations: [String] = []
  let finished = DispatchSemaphore(value: 0)

  func receive(subscription: any Subscription) {
    lock.withLock { self.subscription = subscription }
  }

  func request(_ count: Int) {
    let subscription = lock.withLock { () -> (any Subscription)? in
      requested += count
      return self.subscription
    }
    subscription?.request(.max(count))
  }

  func receive(_ input: [Int]) -> Subscribers.Demand {
    lock.withLock {
      if inside { violations.append("overlapping calls") }
      inside = true
      receivedCount += 1
      if receivedCount > requested { violations.append("more than requested") }
      received.append(contentsOf: input)
      inside = false
    }
    return .none
  }

  func receive(completion: Subscribers.Completion<Never>) {
    finished.signal()
  }

  var all: [Int] { lock.withLock { received } }
  var problems: [String] { lock.withLock { violations } }
}

/// Carries the subject to the sender thread.
struct SubjectBox: @unchecked Sendable {
  // @unchecked Sendable: PassthroughSubject guards its state with its own lock, and only the
  // sender thread sends while it is in flight.
  let subject: PassthroughSubject<[Int], Never>
}

/// Upstream sends, timers fire and downstream requests on three threads at once; CI runs this
/// suite under the thread sanitizer.
@Suite struct PaceCombineConcurrencyTests {
  @Test(arguments: ["debounced", "throttled"])
  func appendLosesNothingAndDemandIsNeverExceeded(_ operatorName: String) async {
    // real-time: Dispatch timers on a background queue; the checks are counts, not times.
    let scheduler = DispatchScheduler.queue(DispatchQueue(label: "PaceCombineConcurrencyTests.timers"))
    let subject = PassthroughSubject<[Int], Never>()
    let subscriber = SlowSubscriber()
    let paced: Publishers.Paced<PassthroughSubject<[Int], Never>> =
      operatorName == "debounced"
      ? subject.debounced(for: .microseconds(50), maximumWait: .microseconds(200), merge: .append, scheduler: scheduler)
      : subject.throttled(for: .microseconds(100), merge: .append, scheduler: scheduler)
    paced.subscribe(subscriber)

    let count = 20_000
    let sender = DispatchQueue(label: "PaceCombineConcurrencyTests.sender")
    let requester = DispatchQueue(label: "PaceCombineConcurrencyTests.requester")
    let group = DispatchGroup()
    let box = SubjectBox(subject: subject)
    sender.async(group: group) {
      for value in 0..<count { box.subject.send([value]) }
    }
    requester.async(group: group) {
      for _ in 0..<500 { subscriber.request(1) }
    }
    // Waited for off the cooperative pool, which the other suites' real-clock tests need.
    let finished = await offTheCooperativePool {
      group.wait()
      box.subject.send(completion: .finished)
      subscriber.request(1_000_000)
      return subscriber.finished.wait(timeout: .now() + 120)
    }

    #expect(finished == .success)
    #expect(subscriber.all == Array(0..<count))
    #expect(subscriber.problems.isEmpty)
  }
}
