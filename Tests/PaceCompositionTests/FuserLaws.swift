// The Fuser laws, written once. PaceCompositionTests runs them against every constructor and
// operator of `Fuser`; PaceUITests runs the same file (a symlink) against the UI sources.

import PaceTestSupport
import Testing

@testable import Pace

/// Drives one way of building a fuser for the laws: connects to it, makes its sources emit,
/// lets virtual time pass, and counts what reached the sources.
protocol LawHarness: Sendable {
  /// How many sources one connection connects to, so how many teardowns one dispose makes.
  var sourcesPerConnection: Int { get }
  /// How many times a source was connected to.
  var sourceConnections: Int { get }
  /// How many times a source was torn down.
  var teardowns: Int { get }
  /// Connects to the fuser under test; `record` receives each event's integers, in order.
  func connect(_ record: @escaping @Sendable (Int) -> Void) -> AnyDisposable
  /// Waits until every connection made so far is listening.
  func ready() async
  /// Makes the sources produce `value` and waits until every live connection has handled it.
  func emit(_ value: Int) async
  /// Lets time pass until rate-limited events are out.
  func settle()
}

/// One constructor or operator under the laws.
struct FuserLawSubject: Sendable, CustomTestStringConvertible {
  var name: String
  /// The events a connection receives when the sources emit `inputs` and time is let pass.
  var expected: @Sendable (_ inputs: [Int]) -> [Int] = { $0 }
  var makeHarness: @Sendable () -> any LawHarness

  var testDescription: String { name }
}

/// Collects the integers a connection receives.
final class LawRecorder: Sendable {
  private let values = LockedState<[Int]>([])
  func record(_ value: Int) { values.withLock { $0.append(value) } }
  var all: [Int] { values.withLock { $0 } }
}

/// The laws. Each runs in its caller's isolation, so the UI tests run them on the main actor,
/// where UI sources must be connected.
enum FuserLaws {
  /// Events arrive in the order their sources produced them.
  static func eventsArriveInOrder(_ subject: FuserLawSubject, isolation: isolated (any Actor)? = #isolation) async {
    let harness = subject.makeHarness()
    let output = LawRecorder()
    let connection = harness.connect(output.record)
    await harness.ready()
    let inputs = Array(1...9)
    for value in inputs { await harness.emit(value) }
    harness.settle()
    #expect(output.all == subject.expected(inputs), "\(subject.name)")
    connection.dispose()
  }

  /// A fuser is a description: no source is connected and nothing is dispatched before `connect`.
  static func nothingBeforeConnect(_ subject: FuserLawSubject, isolation: isolated (any Actor)? = #isolation) async {
    let harness = subject.makeHarness()
    await harness.emit(1)
    await harness.emit(2)
    harness.settle()
    #expect(harness.sourceConnections == 0, "\(subject.name): connected before connect")

    let output = LawRecorder()
    let connection = harness.connect(output.record)
    await harness.ready()
    #expect(harness.sourceConnections == harness.sourcesPerConnection, "\(subject.name)")
    await harness.emit(3)
    harness.settle()
    #expect(output.all == subject.expected([3]), "\(subject.name)")
    connection.dispose()
  }

  /// Nothing is dispatched once `dispose()` has returned, not even an event that was pending,
  /// and not even from a source that keeps emitting after its teardown.
  static func nothingAfterDispose(_ subject: FuserLawSubject, isolation: isolated (any Actor)? = #isolation) async {
    let harness = subject.makeHarness()
    let output = LawRecorder()
    let connection = harness.connect(output.record)
    await harness.ready()
    await harness.emit(1)
    await harness.emit(2)
    connection.dispose()
    let atDispose = output.all
    await harness.emit(3)
    harness.settle()
    #expect(output.all == atDispose, "\(subject.name)")
    #expect(!output.all.contains(3), "\(subject.name)")
  }

  /// `dispose()` reaches every source exactly once, however often it is called, and so does
  /// releasing the connection (Pace's rule).
  static func disposeReachesEverySourceExactlyOnce(
    _ subject: FuserLawSubject, isolation: isolated (any Actor)? = #isolation
  ) async {
    let harness = subject.makeHarness()
    do {
      let connection = harness.connect { _ in }
      await harness.ready()
      #expect(harness.teardowns == 0, "\(subject.name)")
      connection.dispose()
      #expect(harness.teardowns == harness.sourcesPerConnection, "\(subject.name)")
      connection.dispose()
      #expect(harness.teardowns == harness.sourcesPerConnection, "\(subject.name)")
    }
    #expect(harness.teardowns == harness.sourcesPerConnection, "\(subject.name): released after dispose")

    do {
      let released = harness.connect { _ in }
      await harness.ready()
      _ = released
    }
    #expect(harness.teardowns == 2 * harness.sourcesPerConnection, "\(subject.name): released without dispose")
  }

  /// Each connection has its own listeners; disposing one leaves the other working.
  static func connectionsAreIndependent(_ subject: FuserLawSubject, isolation: isolated (any Actor)? = #isolation) async
  {
    let harness = subject.makeHarness()
    let first = LawRecorder()
    let second = LawRecorder()
    let firstConnection = harness.connect(first.record)
    let secondConnection = harness.connect(second.record)
    await harness.ready()
    #expect(harness.sourceConnections == 2 * harness.sourcesPerConnection, "\(subject.name)")

    await harness.emit(1)
    await harness.emit(2)
    harness.settle()
    #expect(first.all == subject.expected([1, 2]), "\(subject.name)")
    #expect(second.all == subject.expected([1, 2]), "\(subject.name)")

    firstConnection.dispose()
    #expect(harness.teardowns == harness.sourcesPerConnection, "\(subject.name)")
    await harness.emit(3)
    await harness.emit(4)
    harness.settle()
    #expect(first.all == subject.expected([1, 2]), "\(subject.name)")
    #expect(second.all == subject.expected([1, 2, 3, 4]), "\(subject.name)")
    secondConnection.dispose()
    #expect(harness.teardowns == 2 * harness.sourcesPerConnection, "\(subject.name)")
  }
}

/// A synchronous source for the laws. It counts connections and teardowns, and it misbehaves on
/// purpose: a torn-down listener keeps receiving, so the laws check Fuser's own gate. Its
/// teardown is not idempotent, so the laws see a double dispose.
final class LawSource: Sendable {
  private struct State {
    var listeners: [@Sendable (Int) -> Void] = []
    var connections = 0
    var teardowns = 0
  }

  private let state = LockedState(State())

  var fuser: Fuser<Int> {
    Fuser { [self] dispatch in
      state.withLock { state in
        state.listeners.append(dispatch)
        state.connections += 1
      }
      return Teardown(source: self)
    }
  }

  private struct Teardown: Disposable {
    let source: LawSource
    func dispose() { source.state.withLock { $0.teardowns += 1 } }
  }

  func emit(_ value: Int) {
    let listeners = state.withLock { $0.listeners }
    for listener in listeners { listener(value) }
  }

  var connections: Int { state.withLock { $0.connections } }
  var teardowns: Int { state.withLock { $0.teardowns } }
}

/// A harness over synchronous sources and a ``TestScheduler``: `emit` makes source
/// `value % sources.count` produce the value, then lets `step` of virtual time pass.
struct SyncLawHarness<Output>: LawHarness {
  let sources: [LawSource]
  let scheduler: TestScheduler
  let fuser: Fuser<Output>
  let flatten: @Sendable (Output) -> [Int]
  var step: Duration = .milliseconds(40)

  var sourcesPerConnection: Int { sources.count }
  var sourceConnections: Int { sources.reduce(0) { $0 + $1.connections } }
  var teardowns: Int { sources.reduce(0) { $0 + $1.teardowns } }

  func connect(_ record: @escaping @Sendable (Int) -> Void) -> AnyDisposable {
    let flatten = self.flatten
    return fuser.connect { output in flatten(output).forEach(record) }
  }

  func ready() async {}

  func emit(_ value: Int) async {
    sources[value % sources.count].emit(value)
    scheduler.advance(by: step)
  }

  func settle() {
    scheduler.advance(by: .seconds(60))
  }
}

extension SyncLawHarness where Output == Int {
  init(sources: [LawSource], scheduler: TestScheduler, fuser: Fuser<Int>) {
    self.init(sources: sources, scheduler: scheduler, fuser: fuser, flatten: { [$0] })
  }
}

extension FuserLawSubject {
  /// A subject built from `sourceCount` synchronous sources and a ``TestScheduler``.
  static func sync<Output>(
    _ name: String,
    sources sourceCount: Int = 1,
    expected: @escaping @Sendable ([Int]) -> [Int] = { $0 },
    flatten: @escaping @Sendable (Output) -> [Int],
    _ build: @escaping @Sendable ([Fuser<Int>], TestScheduler) -> Fuser<Output>
  ) -> FuserLawSubject {
    FuserLawSubject(name: name, expected: expected) {
      let sources = (0..<sourceCount).map { _ in LawSource() }
      let scheduler = TestScheduler()
      return SyncLawHarness(
        sources: sources, scheduler: scheduler, fuser: build(sources.map(\.fuser), scheduler), flatten: flatten
      )
    }
  }

  /// A subject of integer events built from `sourceCount` synchronous sources.
  static func sync(
    _ name: String,
    sources sourceCount: Int = 1,
    expected: @escaping @Sendable ([Int]) -> [Int] = { $0 },
    _ build: @escaping @Sendable ([Fuser<Int>], TestScheduler) -> Fuser<Int>
  ) -> FuserLawSubject {
    sync(name, sources: sourceCount, expected: expected, flatten: { [$0] }, build)
  }
}
