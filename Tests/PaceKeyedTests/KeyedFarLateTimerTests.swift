import PaceTestSupport
import Testing

@testable import Pace

/// Keyed pacers against one pacer per key on schedulers whose timers fire only at whole
/// milliseconds, with intervals far below that quantum (3 ns for a trailing debounce, 7 µs for a
/// trailing throttle), 65 to 130 keys and steps, cancels and flushes among the calls, both merge
/// policies that store no function and one that does, a debounce's `maximumWait` below the
/// quantum or none, the scheduler saying it is current or not, its enqueued work running at once
/// or only on its tick, one scheduler for every pacer or one each: each key's invocations, times
/// to the nanosecond and values, are its own pacer's.
@Suite(.offThePool) struct KeyedFarLateTimerTests {
  typealias Model = KeyedReferenceModelTests

  /// 65 to 130 steps, nanoseconds apart: mostly within one quantum, now and then a whole one.
  static func timeline(_ generator: inout SeededGenerator, keys: Int) -> [Model.Step] {
    var time: Int64 = 0
    return (0..<Int.random(in: 65...130, using: &generator)).map { _ in
      let gaps: [Int64] = [
        0, 0, 1, 2, 3, 4, 5, 7, 100, 6_993, 6_999, 7_000, 7_001, 250_000, 999_997, 1_000_000, 3_000_000,
      ]
      time +=
        Int.random(in: 0..<8, using: &generator) == 0
        ? Int64.random(in: 0...2_000_000, using: &generator) : gaps.randomElement(using: &generator)!
      let roll = Int.random(in: 0..<10, using: &generator)
      let operation: Model.Operation = roll == 0 ? .flush : roll == 1 ? .cancel : .call
      return Model.Step(time: time, key: Int.random(in: 0..<keys, using: &generator), operation: operation)
    }
  }

  /// A coarse scheduler of 1 ms on a `TestScheduler`, ticking as `tick` says, current or not,
  /// running enqueued work as `enqueued` says.
  static func schedulers(
    tick: CoarseScheduler.Tick, current: Bool, enqueued: CoarseScheduler.Enqueued
  ) -> (TestScheduler, any PaceScheduler) {
    let base = TestScheduler()
    let scheduler = CoarseScheduler(
      granularity: .milliseconds(1), tick: tick, reportsCurrent: current, enqueued: enqueued, base: base)
    return (base, scheduler)
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
      let enqueued = CoarseScheduler.Enqueued.allCases.randomElement(using: &generator)!
      // One scheduler for the keyed pacer and every key's own, or one each.
      let shared = Bool.random(using: &generator)
      let (base, scheduler) = schedulers(tick: tick, current: current, enqueued: enqueued)
      let recorder = KeyedRecorder<Int, [Int]>(clock: scheduler, unit: 1)
      let (keyed, single, settings) = make(&generator, scheduler, recorder.record)
      let keys = Int.random(in: 65...130, using: &generator)
      let steps = timeline(&generator, keys: keys)
      let names = Model.keys(keys, &generator)
      let context =
        "seed \(seed), .\(merge), \(tick), current \(current), \(enqueued), "
        + "\(shared ? "one scheduler" : "a scheduler each"), \(keys) keys \(settings)"
      let references = (0..<keys).map { key in
        let (base, scheduler) =
          shared ? (base, scheduler) : schedulers(tick: tick, current: current, enqueued: enqueued)
        let recorder = KeyedRecorder<Int, [Int]>(clock: scheduler, unit: 1)
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
