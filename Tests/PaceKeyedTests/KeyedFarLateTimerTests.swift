import PaceTestSupport
import Testing

@testable import Pace

/// Keyed pacers against one pacer per key on schedulers whose timers fire only at whole
/// milliseconds, with intervals far below that quantum (3 ns for a trailing debounce, 7 µs for a
/// trailing throttle), 65 to 130 keys and steps, cancels and flushes among the calls, both merge
/// policies that store no function and one that does, a debounce's `maximumWait` below the
/// quantum or none, the scheduler saying it is current or not:
/// each key's invocations, times and values, are its own pacer's.
@Suite(.offThePool) struct KeyedFarLateTimerTests {
  typealias Model = KeyedReferenceModelTests

  /// 65 to 130 steps, nanoseconds apart: mostly within one quantum, now and then a whole one.
  static func timeline(_ generator: inout SeededGenerator, keys: Int) -> [Model.Step] {
    var time: Int64 = 0
    return (0..<Int.random(in: 65...130, using: &generator)).map { _ in
      time += [0, 0, 1, 2, 3, 5, 7, 100, 6_999, 7_000, 250_000, 1_000_000, 3_000_000].randomElement(
        using: &generator)!
      let roll = Int.random(in: 0..<10, using: &generator)
      let operation: Model.Operation = roll == 0 ? .flush : roll == 1 ? .cancel : .call
      return Model.Step(time: time, key: Int.random(in: 0..<keys, using: &generator), operation: operation)
    }
  }

  /// A coarse scheduler of 1 ms on a `TestScheduler`, ticking as `tick` says, current or not.
  static func schedulers(tick: CoarseScheduler.Tick, current: Bool) -> (TestScheduler, any PaceScheduler) {
    let base = TestScheduler()
    return (base, CoarseScheduler(granularity: .milliseconds(1), tick: tick, reportsCurrent: current, base: base))
  }

  static let merges: [Model.MergeCase] = [.latest, .append, .custom]

  @Test(arguments: merges, [true, false])
  func aKeyedDebouncerMatchesOneDebouncerPerKey(merge: Model.MergeCase, current: Bool) async {
    await Self.check(merge: merge, current: current, salt: 3) { generator, scheduler, record in
      let maximumWait: Duration? = [nil, .nanoseconds(4), .microseconds(9)].randomElement(using: &generator)!
      let keyed = KeyedDebouncer<Int, [Int]>(
        for: .nanoseconds(3), edges: .trailing, maximumWait: maximumWait, merge: merge.merge, scheduler: scheduler,
        perform: record)
      let single = { (scheduler: any PaceScheduler, perform: @escaping @Sendable ([Int]) -> Void) in
        Debouncer<[Int]>(
          for: .nanoseconds(3), edges: .trailing, maximumWait: maximumWait, merge: merge.merge, scheduler: scheduler,
          perform: perform)
      }
      return (keyed, single, "maximumWait \(maximumWait.map { "\($0)" } ?? "nil")")
    }
  }

  @Test(arguments: merges, [true, false])
  func aKeyedThrottlerMatchesOneThrottlerPerKey(merge: Model.MergeCase, current: Bool) async {
    await Self.check(merge: merge, current: current, salt: 5) { _, scheduler, record in
      let keyed = KeyedThrottler<Int, [Int]>(
        for: .microseconds(7), edges: .trailing, merge: merge.merge, scheduler: scheduler, perform: record)
      let single = { (scheduler: any PaceScheduler, perform: @escaping @Sendable ([Int]) -> Void) in
        Throttler<[Int]>(
          for: .microseconds(7), edges: .trailing, merge: merge.merge, scheduler: scheduler, perform: perform)
      }
      return (keyed, single, "")
    }
  }

  /// Seeded timelines, each played on one keyed pacer and on one pacer per key that `make` builds
  /// (from the generator, after the tick is drawn): every key's invocations must be its pacer's.
  /// Builds, from the generator and the scheduler, the keyed pacer (performing with the recorder
  /// given), one pacer per key, and the settings drawn, for the context of a failure.
  typealias Make = (inout SeededGenerator, any PaceScheduler, @escaping @Sendable (Int, [Int]) -> Void) -> (
    any KeyedPacedFunction<Int, [Int]>,
    (any PaceScheduler, @escaping @Sendable ([Int]) -> Void) -> any PacedFunction<[Int]>,
    String
  )

  static func check(merge: Model.MergeCase, current: Bool, salt: UInt64, _ make: Make) async {
    for seed in 0..<UInt64(fuzzRuns(40)) {
      await Task.yield()
      var generator = SeededGenerator(seed: seed &* 104_729 &+ salt)
      let tick = CoarseScheduler.Tick.allCases.randomElement(using: &generator)!
      let (base, scheduler) = schedulers(tick: tick, current: current)
      let recorder = KeyedRecorder<Int, [Int]>(clock: scheduler)
      let (keyed, single, settings) = make(&generator, scheduler, recorder.record)
      let keys = Int.random(in: 65...130, using: &generator)
      let steps = timeline(&generator, keys: keys)
      let names = Model.keys(keys, &generator)
      let context = "seed \(seed), .\(merge), \(tick), current \(current), \(keys) keys \(settings)"
      let references = (0..<keys).map { key in
        let (base, scheduler) = schedulers(tick: tick, current: current)
        let recorder = KeyedRecorder<Int, [Int]>(clock: scheduler)
        let pacer = single(scheduler) { recorder.record(key, $0) }
        return Model.Reference(scheduler: base, recorder: recorder, isPending: { pacer.isPending }) { event in
          switch event {
          case .call(let value): pacer.call(value)
          case .flush: pacer.flush()
          case .cancel: pacer.cancel()
          }
        }
      }
      Model.check(
        steps, keys: names, context: context, scheduler: base, recorder: recorder, references: references, unit: 1,
        isPending: keyed.isPending(for:)
      ) { key, event in
        switch event {
        case .call(let value): keyed.call(key, value)
        case .flush: keyed.flush(key)
        case .cancel: keyed.cancel(key)
        }
      }
      #expect(keyed.trackedKeyCount == 0, "\(context)")
      #expect(base.pendingDeadlines.isEmpty, "\(context)")
    }
  }
}
