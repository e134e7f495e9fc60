import Testing
@testable import Pace

@Test func smoke() {
  #expect(PaceInstant.zero.nanoseconds == 0)
}

final class Recorder<Value: Sendable>: Sendable {
  let values = LockedState<[Value]>([])
  func append(_ v: Value) { values.withLock { $0.append(v) } }
  var all: [Value] { values.withLock { $0 } }
}

@Test func coalescerVoidInference() {
  let scheduler = TestScheduler()
  let runs = Recorder<Int>()
  let reload = Coalescer(scheduler: scheduler) { runs.append(1) }
  reload.signal(); reload.signal(); reload()
  scheduler.advance()
  #expect(runs.all == [1])
  let sum = Coalescer<Int>(merge: .sum, scheduler: scheduler) { runs.append($0) }
  sum(2); sum(3)
  scheduler.advance()
  #expect(runs.all == [1, 5])
}

@MainActor final class FakeLabel { var text = "" }
@MainActor final class FakeViewController {
  let label = FakeLabel()
  var search: Debouncer<String>?
  var throttle: Throttler<Int>?
  var reload: Coalescer<Void>?
  func setUp() {
    search = Debouncer(for: .milliseconds(300)) { self.label.text = $0 }
    throttle = Throttler(for: .milliseconds(300)) { self.label.text = "\($0)" }
    reload = Coalescer { self.label.text = "" }
  }
}
