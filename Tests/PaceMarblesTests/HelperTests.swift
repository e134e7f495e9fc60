import Foundation
import Testing

@testable import PaceTesting

@Suite struct ExpectMarblesTests {
  @Test func ownCodeTakingAScheduler() {
    expectMarbles(
      "a-b-c------d---", step: .milliseconds(100),
      through: { marbles in
        let model = SearchModel(scheduler: marbles.scheduler) { marbles.emit($0) }
        return MarbleCalls { model.queryChanged($0) }
      }, equals: "-------c------d")
  }

  @Test func headerInsteadOfParameter() {
    expectMarbles("step: 100ms a-b-c", through: { $0.debouncer(for: .milliseconds(300)) }, equals: "-------c")
  }

  @Test func trailingDashesAndSpacesDoNotMatter() {
    expectMarbles(
      "a", step: .milliseconds(100), through: { $0.debouncer(for: .milliseconds(300)) }, equals: "- - - a - - -")
  }

  @Test func aFailingComparisonIsAnIssueWithTheDiagramsAligned() {
    withKnownIssue {
      expectMarbles(
        "a-b-c", step: .milliseconds(100), through: { $0.debouncer(for: .milliseconds(300)) }, equals: "------c")
    } matching: { issue in
      issue.comments.map(\.rawValue) == [
        """
        Marble diagrams differ (step 100ms):
          input     a-b-c
          expected  ------c
          actual    -------c
        """
      ]
    }
  }

  @Test func alignmentWithWideTokens() {
    let outcome = MarbleComparison.run(
      "a-b-c", stepLength: .milliseconds(100), scheduler: TestScheduler(),
      through: { $0.debouncer(for: .milliseconds(300), merge: .append) }, expected: "-------'ab'-c")
    #expect(
      outcome.failure == """
        Marble diagrams differ (step 100ms):
          input     a-b-c
          expected  -------'ab' -c
          actual    -------'abc'
        """)
  }

  @Test func offGridOutputIsNamed() {
    let outcome = MarbleComparison.run(
      "a", stepLength: .milliseconds(100), scheduler: TestScheduler(),
      through: { $0.debouncer(for: .milliseconds(250)) }, expected: "---a")
    #expect(
      outcome.failure == """
        Marble diagrams differ (step 100ms):
          input     a
          expected  ---a
          actual    --a
        note: a at 250ms is not on the 100ms step grid (it falls between steps 2 and 3); draw with offGrid: .floor to put it in step 2
        """)
  }

  @Test func malformedDiagramsAreReported() {
    let badExpected = MarbleComparison.run(
      "a", stepLength: .milliseconds(100), scheduler: TestScheduler(),
      through: { $0.debouncer(for: .milliseconds(300)) }, expected: "--*")
    #expect(
      badExpected.failure == """
        The expected marble diagram is malformed, column 3: unexpected '*'; a value that is not a letter or digit is quoted, like '*'
          --*
            ^
        """)
    let badInput = MarbleComparison.run(
      "a-[b", stepLength: .milliseconds(100), scheduler: TestScheduler(),
      through: { $0.debouncer(for: .milliseconds(300)) }, expected: "---a")
    #expect(
      badInput.failure?.hasPrefix(
        "Cannot run the marble input: malformed marble diagram, column 3: the group is never closed") == true)
  }
}

@Suite struct NothingScheduledTests {
  @Test func passesWhenIdle() {
    let scheduler = TestScheduler()
    let save = Debouncer<String>(for: .seconds(1), scheduler: scheduler) { _ in }
    save("draft")
    save.cancel()
    expectNothingScheduled(on: scheduler)
  }

  @Test func failsListingTheDeadlines() {
    let scheduler = TestScheduler()
    let first = Debouncer<String>(for: .seconds(1), scheduler: scheduler) { _ in }
    let second = Throttler<String>(for: .seconds(2), edges: .trailing, scheduler: scheduler) { _ in }
    first("a")
    second("b")
    withKnownIssue {
      expectNothingScheduled(on: scheduler)
    } matching: { issue in
      issue.comments.map(\.rawValue) == ["TestScheduler still has 2 items scheduled, due at 1s, 2s (now is 0ms)"]
    }
  }
}

@Suite struct ImmediateSchedulerTests {
  @Test func debouncerPerformsEveryCallAtOnce() {
    let scheduler = ImmediateScheduler()
    let performed = Box<[String]>([])
    let search = Debouncer<String>(for: .milliseconds(300), scheduler: scheduler) { query in
      performed.mutate { $0.append(query) }
    }
    search("s")
    search("sw")
    #expect(performed.value == ["s", "sw"])
    #expect(scheduler.now == PaceInstant(.milliseconds(600)))
  }

  @Test func throttlerPerformsEveryCall() {
    let performed = Box<[Int]>([])
    let throttle = Throttler<Int>(for: .seconds(1), scheduler: ImmediateScheduler()) { value in
      performed.mutate { $0.append(value) }
    }
    for value in 1...3 { throttle(value) }
    #expect(performed.value == [1, 2, 3])
  }

  @Test func nestedWorkRunsAfterTheCurrentWorkInOrder() {
    let scheduler = ImmediateScheduler()
    let order = Box<[String]>([])
    scheduler.schedule(at: PaceInstant(.seconds(1))) {
      order.mutate { $0.append("outer start") }
      scheduler.schedule(at: PaceInstant(.seconds(3))) { order.mutate { $0.append("first nested") } }
      let cancelled = scheduler.schedule(at: PaceInstant(.seconds(4))) { order.mutate { $0.append("cancelled") } }
      scheduler.enqueue { order.mutate { $0.append("second nested at \(scheduler.now)") } }
      cancelled.cancel()
      order.mutate { $0.append("outer end") }
    }
    #expect(order.value == ["outer start", "outer end", "first nested", "second nested at 3 s"])
    #expect(scheduler.now == PaceInstant(.seconds(3)))
  }

  @Test func timeNeverGoesBack() {
    let scheduler = ImmediateScheduler(now: PaceInstant(.seconds(10)))
    scheduler.schedule(at: PaceInstant(.seconds(2))) {}
    #expect(scheduler.now == PaceInstant(.seconds(10)))
  }
}

@Suite struct UnimplementedSchedulerTests {
  @Test func usingItIsAnIssueNamingTheMember() {
    let scheduler = UnimplementedScheduler("search")
    withKnownIssue {
      let debouncer = Debouncer<String>(for: .milliseconds(300), scheduler: scheduler) { _ in Issue.record("performed")
      }
      debouncer("a")
    } matching: { issue in
      let text = issue.comments.map(\.rawValue).joined()
      return text.hasPrefix("UnimplementedScheduler \"search\" (made at HelperTests.swift:")
        && (text.hasSuffix("now was read") || text.hasSuffix("schedule(at: 300ms) was called; the work will never run"))
    }
  }

  @Test func unusedItIsFine() {
    let scheduler = UnimplementedScheduler()
    _ = Debouncer<String>(for: .milliseconds(300), scheduler: scheduler) { _ in }
  }

  @Test func everyMemberFails() {
    let scheduler = UnimplementedScheduler()
    withKnownIssue {
      _ = scheduler.now
      _ = scheduler.isCurrent
      scheduler.enqueue {}
      scheduler.schedule(at: .zero) {}.cancel()
    } matching: { issue in
      issue.comments.map(\.rawValue).joined().hasPrefix("UnimplementedScheduler (made at HelperTests.swift:")
    }
  }
}

/// A model written by a user: it takes any scheduler.
final class SearchModel: Sendable {
  private let debouncer: Debouncer<String>

  init(scheduler: some PaceScheduler, search: @escaping @Sendable (String) -> Void) {
    debouncer = Debouncer(for: .milliseconds(300), scheduler: scheduler, perform: search)
  }

  func queryChanged(_ query: String) {
    debouncer(query)
  }
}

/// A thread-safe box for values recorded in `perform`.
final class Box<Value: Sendable>: @unchecked Sendable {
  // @unchecked Sendable: `stored` is only touched while holding `lock`.
  private let lock = NSLock()
  private var stored: Value

  init(_ value: Value) { stored = value }

  var value: Value {
    lock.lock()
    defer { lock.unlock() }
    return stored
  }

  func mutate(_ body: (inout Value) -> Void) {
    lock.lock()
    defer { lock.unlock() }
    body(&stored)
  }
}
