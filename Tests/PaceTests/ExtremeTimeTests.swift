import Dispatch
import PaceTestSupport
import Testing

@testable import Pace

/// The ends of the timeline: intervals of 0, 1 ns, below a nanosecond, `Int64.max` ns and
/// `.seconds(Int64.max)`, and schedulers that start at `Int64.min` or just before
/// ``PaceInstant/max``. Deadlines saturate at the end of the timeline, a timer that fires there
/// invokes or goes quiet, and ``TestScheduler/run()`` returns.
@Suite(.timeLimit(.minutes(3))) struct ExtremeTimeTests {
  static let end = PaceInstant.max
  static let forever = Duration.seconds(Int64.max)

  // MARK: Instants

  @Test func instantArithmeticSaturatesAndDurationsAreExact() {
    #expect(PaceInstant.zero.advanced(by: Self.forever) == .max)
    #expect(
      PaceInstant(nanoseconds: -1).advanced(by: .nanoseconds(Int64.max)) == PaceInstant(nanoseconds: Int64.max - 1))
    #expect(PaceInstant.max.advanced(by: .nanoseconds(1)) == .max)
    #expect(PaceInstant.zero.advanced(by: .seconds(Int64.min)) == PaceInstant(nanoseconds: .min))
    #expect(Self.forever.paceNanoseconds == .max)
    #expect(Duration.nanoseconds(0.5).paceNanoseconds == 0)
    // Across the whole timeline: no wrap-around.
    let first = PaceInstant(nanoseconds: .min)
    #expect(first.duration(to: .max) == .nanoseconds(Int64.max) * 2 + .nanoseconds(1))
    #expect(PaceInstant.max.duration(to: first) == .zero - .nanoseconds(Int64.max) * 2 - .nanoseconds(1))
    #expect(PaceInstant(nanoseconds: 5).duration(to: PaceInstant(nanoseconds: 2)) == .nanoseconds(-3))
  }

  @Test func theTestSchedulerStopsAtTheEndOfTheTimeline() {
    let scheduler = TestScheduler(now: PaceInstant(nanoseconds: .max - 5))
    let fired = LockedState(0)
    scheduler.schedule(after: Self.forever) { fired.withLock { $0 += 1 } }
    #expect(scheduler.pendingDeadlines == [.max])
    scheduler.advance(by: Self.forever)
    #expect(scheduler.now == .max)
    #expect(fired.withLock { $0 } == 1)
    scheduler.advance(by: Self.forever)  // nowhere further to go
    scheduler.advance(to: .max)
    scheduler.run()
    #expect(scheduler.now == .max)
  }

  @Test func dispatchNeverFiresAtTheEndOfTheTimeline() {
    #expect(DispatchScheduler.dispatchTime(for: .max) == .distantFuture)
    #expect(DispatchScheduler.dispatchTime(for: PaceInstant(nanoseconds: -5)) == DispatchTime(uptimeNanoseconds: 0))
    #expect(DispatchScheduler.dispatchTime(for: ms(7)) == DispatchTime(uptimeNanoseconds: 7_000_000))
  }

  @Test func aClockSchedulerSleepsTowardsTheEndOfTheTimelineAndCancels() async {
    // No timing is asserted: the task sleeps on a real clock for 292 years until cancelled.
    let scheduler = ClockScheduler(ContinuousClock())
    let timer = scheduler.schedule(at: .max) { Issue.record("the end of the timeline came") }
    timer.cancel()
    await (timer as? Task<Void, Never>)?.value
  }

  // MARK: Debounce machine

  @Test func aDebounceDeadlineBeyondTheEndFiresAtTheEndAndIsNotReArmed() {
    var m = DebounceStateMachine<String>(interval: Self.forever, edges: .trailing, maximumWait: nil, merge: .latest)
    #expect(m.call("a", now: .zero) == .schedule(at: Self.end))
    #expect(m.call("b", now: ms(5)) == .none)
    #expect(m.timerFired(now: Self.end) == .invoke("b"))
    #expect(m.armedDeadline == nil)
    #expect(m.timerFired(now: Self.end) == .none)
    // A call at the end of the timeline is a burst of its own, due at once.
    #expect(m.call("c", now: Self.end) == .schedule(at: Self.end))
    #expect(m.timerFired(now: Self.end) == .invoke("c"))
  }

  @Test func aDebounceStartedJustBeforeTheEndSaturates() {
    let start = PaceInstant(nanoseconds: .max - 10)
    var m = DebounceStateMachine<String>(interval: .nanoseconds(100), edges: .both, maximumWait: nil, merge: .latest)
    #expect(m.call("a", now: start) == .invoke("a"))
    #expect(m.call("b", now: start.advanced(by: .nanoseconds(5))) == .schedule(at: Self.end))
    #expect(m.timerFired(now: Self.end) == .invoke("b"))
    #expect(m.call("c", now: Self.end) == .invoke("c"))
    #expect(!m.hasTimer)
  }

  @Test func aSaturatedMaxWaitIsFinalToo() {
    var m = DebounceStateMachine<String>(
      interval: .nanoseconds(Int64.max), edges: .trailing, maximumWait: Self.forever, merge: .latest)
    #expect(m.call("a", now: PaceInstant(nanoseconds: 1)) == .schedule(at: Self.end))
    #expect(m.call("b", now: PaceInstant(nanoseconds: 2)) == .none)
    #expect(m.timerFired(now: Self.end) == .invoke("b"))
  }

  @Test func aDebounceIntervalBelowANanosecondIsZeroNotAnEndlessTimer() {
    var m = DebounceStateMachine<String>(
      interval: .nanoseconds(0.5), edges: .trailing, maximumWait: nil, merge: .latest)
    #expect(m.call("a", now: ms(1)) == .schedule(at: ms(1)))
    #expect(m.timerFired(now: ms(1)) == .invoke("a"))
  }

  @Test func aDebounceFromTheStartOfTheTimelineMeasuresWithoutWrapping() {
    let first = PaceInstant(nanoseconds: .min)
    var m = DebounceStateMachine<String>(interval: .seconds(1), edges: .both, maximumWait: nil, merge: .latest)
    // The first call keeps its own time (it used to be raised to zero).
    #expect(m.call("a", now: first) == .invoke("a"))
    #expect(
      m.call("a2", now: first.advanced(by: .milliseconds(1))) == .schedule(at: first.advanced(by: .milliseconds(1001))))
    #expect(m.timerFired(now: first.advanced(by: .milliseconds(1001))) == .invoke("a2"))
    // A whole timeline later is a quiet period, so this call leads (a wrapped duration said no).
    #expect(m.call("b", now: Self.end) == .invoke("b"))
  }

  // MARK: Throttle and coalesce machines

  @Test func aThrottleWindowBeyondTheEndInvokesAtTheEndAndGoesQuiet() {
    var m = ThrottleStateMachine<String>(interval: Self.forever, edges: .both, merge: .latest)
    #expect(m.call("a", now: .zero) == .invokeAndSchedule("a", at: Self.end))
    #expect(m.call("b", now: ms(1)) == .none)
    #expect(m.timerFired(now: Self.end) == .invoke("b"))
    #expect(m.windowEnd == nil)
    #expect(m.call("c", now: Self.end) == .invokeAndSchedule("c", at: Self.end))
    #expect(m.call("d", now: Self.end) == .none)
    #expect(m.timerFired(now: Self.end) == .invoke("d"))
    #expect(m.timerFired(now: Self.end) == .none)
  }

  @Test func aTrailingThrottleStartedJustBeforeTheEndSaturates() {
    var m = ThrottleStateMachine<String>(interval: .nanoseconds(10), edges: .trailing, merge: .latest)
    #expect(m.call("a", now: PaceInstant(nanoseconds: .max - 3)) == .schedule(at: Self.end))
    #expect(m.timerFired(now: Self.end) == .invoke("a"))
    #expect(m.windowEnd == nil)
  }

  @Test func aZeroThrottleWindowInvokesWithoutReArmingAtTheSameInstant() {
    var m = ThrottleStateMachine<String>(interval: .zero, edges: .both, merge: .latest)
    #expect(m.call("a", now: ms(5)) == .invokeAndSchedule("a", at: ms(5)))
    #expect(m.call("b", now: ms(5)) == .none)
    #expect(m.timerFired(now: ms(5)) == .invoke("b"))
    #expect(m.timerFired(now: ms(5)) == .none)
  }

  @Test func aThrottleTimerLateByExactlyOneWindowRestartsTheCadenceFromNow() {
    var m = ThrottleStateMachine<String>(interval: .milliseconds(100), edges: .both, merge: .latest)
    #expect(m.call("a", now: ms(0)) == .invokeAndSchedule("a", at: ms(100)))
    #expect(m.call("b", now: ms(50)) == .none)
    // The next window would end at 200 ms, now: it would hold no call, so it ends at 300 ms.
    #expect(m.timerFired(now: ms(200)) == .invokeAndSchedule("b", at: ms(300)))
  }

  @Test func aCoalesceWindowBeyondTheEndFiresAtTheEnd() {
    var m = CoalesceStateMachine<Int>(window: Self.forever, merge: .sum)
    #expect(m.call(1, now: PaceInstant(nanoseconds: .max - 1)) == .schedule(at: Self.end))
    #expect(m.call(2, now: Self.end) == .none)
    #expect(m.timerFired(now: Self.end) == .invoke(3))
    #expect(m.timerFired(now: Self.end) == .none)
  }

  // MARK: The primitives on virtual time

  @Test func theIssueExampleReturnsAndInvokesAtTheEndOfTheTimeline() {
    let scheduler = TestScheduler()
    let recorder = Recorder<Int>(clock: scheduler)
    let debouncer = Debouncer<Int>(for: Self.forever, scheduler: scheduler, perform: recorder.record)
    debouncer.call(1)
    scheduler.run()
    #expect(recorder.values == [1])
    #expect(recorder.times == [.max])
    #expect(scheduler.pendingDeadlines.isEmpty)
  }

  @Test func flushStillInvokesAtOnceWithAnEndlessInterval() {
    let scheduler = TestScheduler()
    let recorder = Recorder<Int>(clock: scheduler)
    let throttler = Throttler<Int>(for: Self.forever, scheduler: scheduler, perform: recorder.record)
    throttler.call(1)
    throttler.call(2)
    scheduler.advance(by: .seconds(3600))
    throttler.flush()
    scheduler.advance()
    #expect(recorder.timeline == [at(0, 1), at(3_600_000, 2)])
  }

  /// Every primitive, on random timelines at the ends of time: nothing traps, `run()` returns
  /// with nothing pending and no timer left, and each call reaches at most one invocation (all
  /// of them, in order, when the trailing edge is on).
  @Test(arguments: 0..<48) func randomTimelinesAtTheEndsOfTime(seed: UInt64) {
    var random = SeededGenerator(seed: seed)
    let setup = ExtremeSetup(random: &random)
    for kind in PrimitiveKind.allCases {
      var random = SeededGenerator(seed: seed &* 31 &+ UInt64(kind.rawValue))
      let scheduler = TestScheduler(now: setup.start)
      let recorder = Recorder<[Int]>(clock: scheduler)
      let primitive = kind.make(setup, scheduler: scheduler, perform: recorder.record)
      var calls: [Int] = []
      for step in 0..<Int.random(in: 1...30, using: &random) {
        switch Int.random(in: 0..<20, using: &random) {
        case 0..<11:
          calls.append(step)
          primitive.call([step])
        case 11..<18:
          scheduler.advance(by: ExtremeSetup.gap(&random))
        case 18:
          primitive.flush()
        default:
          scheduler.run()
        }
      }
      scheduler.run()
      let context = "seed \(seed), \(kind), \(setup)"
      #expect(!primitive.isPending, "\(context)")
      #expect(scheduler.pendingCount == 0, "\(context)")
      let invoked = recorder.values.flatMap { $0 }
      if kind.coversEveryCall(setup.edges) {
        #expect(invoked == calls, "\(context)")
      } else {
        #expect(invoked.count <= calls.count && invoked.isSubsequence(of: calls), "\(context)")
      }
      #expect(recorder.count <= calls.count, "\(context)")
    }
  }
}

/// One random configuration at the ends of time.
struct ExtremeSetup: CustomStringConvertible {
  static let durations: [Duration] = [
    .zero, .nanoseconds(1), .nanoseconds(0.5), .milliseconds(300), .nanoseconds(Int64.max - 1),
    .nanoseconds(Int64.max), .seconds(Int64.max),
  ]
  static let starts: [PaceInstant] = [
    .zero, PaceInstant(nanoseconds: .min), PaceInstant(nanoseconds: .max - 1_000), PaceInstant(nanoseconds: .max - 1),
    .max,
  ]

  var interval: Duration
  var maximumWait: Duration?
  var edges: Edges
  var start: PaceInstant

  init(random: inout some RandomNumberGenerator) {
    interval = Self.durations.randomElement(using: &random)!
    maximumWait = Bool.random(using: &random) ? nil : Self.durations.randomElement(using: &random)
    edges = [Edges.leading, .trailing, .both].randomElement(using: &random)!
    start = Self.starts.randomElement(using: &random)!
  }

  /// A step of virtual time: none, a nanosecond, a little, or most of the timeline.
  static func gap(_ random: inout some RandomNumberGenerator) -> Duration {
    switch Int.random(in: 0..<6, using: &random) {
    case 0: .zero
    case 1: .nanoseconds(1)
    case 2: .nanoseconds(Int64.random(in: 0...1_000, using: &random))
    case 3: .milliseconds(Int64.random(in: 0...1_000, using: &random))
    case 4: .nanoseconds(Int64.max)
    default: .seconds(Int64.max)
    }
  }

  var description: String {
    "interval \(interval), maximumWait \(maximumWait.map { "\($0)" } ?? "nil"), edges \(edges.rawValue), start \(start.nanoseconds) ns"
  }
}

/// The synchronous primitives, seen alike by the property test.
enum PrimitiveKind: Int, CaseIterable {
  case debouncer, throttler, coalescer

  func make(
    _ setup: ExtremeSetup, scheduler: TestScheduler, perform: @escaping @Sendable ([Int]) -> Void
  ) -> any ExtremePrimitive {
    switch self {
    case .debouncer:
      Debouncer(
        for: setup.interval, edges: setup.edges, maximumWait: setup.maximumWait, merge: .append, scheduler: scheduler,
        perform: perform)
    case .throttler:
      Throttler(for: setup.interval, edges: setup.edges, merge: .append, scheduler: scheduler, perform: perform)
    case .coalescer:
      Coalescer(window: setup.interval, merge: .append, scheduler: scheduler, perform: perform)
    }
  }

  func coversEveryCall(_ edges: Edges) -> Bool {
    self == .coalescer || edges.contains(.trailing)
  }
}

protocol ExtremePrimitive {
  func call(_ value: [Int])
  func flush()
  var isPending: Bool { get }
}

extension Debouncer<[Int]>: ExtremePrimitive {}
extension Throttler<[Int]>: ExtremePrimitive {}
extension Coalescer<[Int]>: ExtremePrimitive {
  func call(_ value: [Int]) { signal(value) }
}

extension Array where Element: Equatable {
  /// Whether these elements appear in `other` in the same order, each at most once.
  func isSubsequence(of other: [Element]) -> Bool {
    var remaining = other[...]
    for element in self {
      guard let index = remaining.firstIndex(of: element) else { return false }
      remaining = remaining[(index + 1)...]
    }
    return true
  }
}
