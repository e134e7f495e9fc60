import PaceTestSupport
import Testing

@testable import Pace

/// Keys never interfere: on thousands of seeded random multi-key timelines, each key's
/// invocations from one keyed primitive equal, at exact times, those of a single-key primitive
/// driven by that key's calls alone on its own `TestScheduler`. Keys are evicted along the way,
/// so this also checks that eviction never drops or changes pending work.
@Suite(.offThePool) struct KeyedReferenceModelTests {
  enum Operation {
    case call, flush, cancel
  }

  struct Step {
    /// In milliseconds; in nanoseconds for the far-late timelines (``check``'s `unit`).
    var time: Int64
    var key: Int
    var operation: Operation
  }

  static func timeline(_ generator: inout SeededGenerator, keys: Int) -> [Step] {
    var time: Int64 = 0
    return (0..<Int.random(in: 1...60, using: &generator)).map { _ in
      time += [0, 0, 10, 50, 100, 150, 300, 700].randomElement(using: &generator)!
      let roll = Int.random(in: 0..<20, using: &generator)
      let operation: Operation = roll == 0 ? .flush : roll == 1 ? .cancel : .call
      return Step(time: time, key: Int.random(in: 0..<keys, using: &generator), operation: operation)
    }
  }

  /// The synchronous, in-memory decision (from async code, `tryAcquire` is the async overload).
  static func decide(_ limiter: KeyedRateLimiter<Int>, _ key: Int, cost: Int) -> RateLimitDecision {
    limiter.tryAcquire(key, cost: cost)
  }

  /// The edges, with both being as likely as each alone.
  static func edges(_ generator: inout SeededGenerator) -> Edges {
    [Edges.leading, .trailing, .both].randomElement(using: &generator)!
  }

  /// The merge policies: the two the machines store without a function, and two functions.
  enum MergeCase: String, CaseIterable, Sendable {
    case latest, first, append, custom

    var merge: Merge<[Int]> {
      switch self {
      case .latest: .latest
      case .first: .first
      case .append: .append
      // A function that is not `.append`'s in-place fold: the newest call first.
      case .custom: .custom { accumulated, next in next + accumulated }
      }
    }
  }

  /// How late the timers fire: the granularity in milliseconds of a ``CoarseScheduler``, whose
  /// timers fire at the first boundary at or after their deadline, or after it: below, at and
  /// well beyond the intervals (0 to 300 ms) and the gaps between calls (0 to 700 ms).
  struct Lateness: CustomStringConvertible {
    var granularity: Int64
    var tick: CoarseScheduler.Tick

    static func random(_ generator: inout SeededGenerator) -> Self {
      Self(
        granularity: [1, 7, 30, 100, 250, 1_000, 3_000].randomElement(using: &generator)!,
        tick: CoarseScheduler.Tick.allCases.randomElement(using: &generator)!)
    }

    var description: String { "timers at \(granularity) ms boundaries \(tick)" }
  }

  /// A `TestScheduler`, and the scheduler the pacers run on: the same (exact timers, if
  /// `lateness` is `nil`), or a coarse one on it.
  static func schedulers(_ lateness: Lateness?) -> (TestScheduler, any PaceScheduler) {
    let base = TestScheduler()
    guard let lateness else { return (base, base) }
    return (base, CoarseScheduler(granularity: .milliseconds(lateness.granularity), tick: lateness.tick, base: base))
  }

  /// The keyed primitive's keys for the timeline's key numbers: `0..<count`, which mostly fall in
  /// shards of their own, or (half the time) keys that all share one shard, its heap and its
  /// timer, so that one key's firing comes by the others' deadlines.
  static func keys(_ count: Int, _ generator: inout SeededGenerator) -> [Int] {
    Bool.random(using: &generator) ? keysSharingAShard(count) : Array(0..<count)
  }

  /// One keyed debouncer against one `Debouncer` per key on a timeline drawn from `generator`
  /// (`seed` names it), every scheduler's timers as late as `lateness` says (exact if `nil`).
  static func checkDebouncer(
    _ generator: inout SeededGenerator, seed: UInt64, edges: Edges, merge: MergeCase, lateness: Lateness?
  ) {
    let interval = Duration.milliseconds([0, 100, 200, 300].randomElement(using: &generator)!)
    let maximumWait: Duration? = [nil, .milliseconds(250), .milliseconds(600)].randomElement(using: &generator)!
    let keys = Int.random(in: 1...6, using: &generator)
    let steps = timeline(&generator, keys: keys)
    let names = Self.keys(keys, &generator)
    let context =
      "seed \(seed), \(edges), .\(merge), interval \(interval), maximumWait \(maximumWait.map { "\($0)" } ?? "nil"), "
      + (lateness.map { "\($0)" } ?? "exact timers")

    let (base, scheduler) = schedulers(lateness)
    let recorder = KeyedRecorder<Int, [Int]>(clock: scheduler)
    let keyed = KeyedDebouncer<Int, [Int]>(
      for: interval, edges: edges, maximumWait: maximumWait, merge: merge.merge, scheduler: scheduler,
      perform: recorder.record
    )
    let references = (0..<keys).map { key in
      let (base, scheduler) = schedulers(lateness)
      let recorder = KeyedRecorder<Int, [Int]>(clock: scheduler)
      let debouncer = Debouncer<[Int]>(
        for: interval, edges: edges, maximumWait: maximumWait, merge: merge.merge, scheduler: scheduler
      ) { recorder.record(key, $0) }
      return Reference(scheduler: base, recorder: recorder, isPending: { debouncer.isPending }) { operation in
        switch operation {
        case .call(let value): debouncer.call(value)
        case .flush: debouncer.flush()
        case .cancel: debouncer.cancel()
        }
      }
    }
    check(
      steps, keys: names, context: context, scheduler: base, recorder: recorder, references: references,
      isPending: keyed.isPending(for:)
    ) { key, operation in
      switch operation {
      case .call(let value): keyed.call(key, value)
      case .flush: keyed.flush(key)
      case .cancel: keyed.cancel(key)
      }
    }
    // Everything went quiet: every key was forgotten and no timer is left.
    #expect(keyed.trackedKeyCount == 0, "\(context)")
    #expect(base.pendingDeadlines.isEmpty, "\(context)")
    #expect(keyed.pacer.heldStorageBytes == 0, "\(context): storage held once quiet")
  }

  /// One keyed throttler against one `Throttler` per key, as ``checkDebouncer(_:seed:edges:merge:lateness:)``.
  static func checkThrottler(
    _ generator: inout SeededGenerator, seed: UInt64, edges: Edges, merge: MergeCase, lateness: Lateness?
  ) {
    let interval = Duration.milliseconds([0, 100, 200, 300].randomElement(using: &generator)!)
    let keys = Int.random(in: 1...6, using: &generator)
    let steps = timeline(&generator, keys: keys)
    let names = Self.keys(keys, &generator)
    let context =
      "seed \(seed), \(edges), .\(merge), interval \(interval), "
      + (lateness.map { "\($0)" } ?? "exact timers")

    let (base, scheduler) = schedulers(lateness)
    let recorder = KeyedRecorder<Int, [Int]>(clock: scheduler)
    let keyed = KeyedThrottler<Int, [Int]>(
      for: interval, edges: edges, merge: merge.merge, scheduler: scheduler, perform: recorder.record
    )
    let references = (0..<keys).map { key in
      let (base, scheduler) = schedulers(lateness)
      let recorder = KeyedRecorder<Int, [Int]>(clock: scheduler)
      let throttler = Throttler<[Int]>(for: interval, edges: edges, merge: merge.merge, scheduler: scheduler) {
        recorder.record(key, $0)
      }
      return Reference(scheduler: base, recorder: recorder, isPending: { throttler.isPending }) { operation in
        switch operation {
        case .call(let value): throttler.call(value)
        case .flush: throttler.flush()
        case .cancel: throttler.cancel()
        }
      }
    }
    check(
      steps, keys: names, context: context, scheduler: base, recorder: recorder, references: references,
      isPending: keyed.isPending(for:)
    ) { key, operation in
      switch operation {
      case .call(let value): keyed.call(key, value)
      case .flush: keyed.flush(key)
      case .cancel: keyed.cancel(key)
      }
    }
    #expect(keyed.trackedKeyCount == 0, "\(context)")
    #expect(base.pendingDeadlines.isEmpty, "\(context)")
    #expect(keyed.pacer.heldStorageBytes == 0, "\(context): storage held once quiet")
  }

  /// What a step does to a pacer.
  enum Event {
    case call([Int])
    case flush, cancel
  }

  /// A single-key pacer on its own scheduler, with what it invoked.
  struct Reference {
    var scheduler: TestScheduler
    var recorder: KeyedRecorder<Int, [Int]>
    var isPending: () -> Bool
    var apply: (Event) -> Void
  }

  /// Runs `steps` on the keyed pacer (`apply`, with the keyed key `keys[n]` for the timeline's
  /// key `n`) and on each key's reference at the same instants, then expects each key's
  /// invocations, times and values, to be its reference's.
  static func check(
    _ steps: [Step], keys: [Int], context: String, scheduler: TestScheduler, recorder: KeyedRecorder<Int, [Int]>,
    references: [Reference], unit: Int64 = 1_000_000, isPending: (Int) -> Bool, apply: (Int, Event) -> Void
  ) {
    for (index, step) in steps.enumerated() {
      let now = PaceInstant(nanoseconds: step.time * unit)
      scheduler.advance(to: now)
      for reference in references { reference.scheduler.advance(to: now) }
      let reference = references[step.key]
      let event: Event =
        switch step.operation {
        case .call: .call([index])
        case .flush: .flush
        case .cancel: .cancel
        }
      apply(keys[step.key], event)
      reference.apply(event)
      #expect(isPending(keys[step.key]) == reference.isPending(), "\(context), step \(index)")
    }
    let end = PaceInstant(nanoseconds: (steps.last?.time ?? 0) * unit).advanced(by: .seconds(10))
    scheduler.advance(to: end)
    for (key, reference) in references.enumerated() {
      reference.scheduler.advance(to: end)
      let expected = reference.recorder.invocations(of: key)
      let actual = recorder.invocations(of: keys[key])
      #expect(actual.map(\.0) == expected.map(\.0), "\(context), key \(key): times")
      #expect(actual.map(\.1) == expected.map(\.1), "\(context), key \(key): values")
    }
  }

  @Test(arguments: 0..<4)
  func keyedDebouncerMatchesOneDebouncerPerKey(batch: UInt64) async {
    let runs = UInt64(fuzzRuns(250))
    for seed in batch * runs..<(batch + 1) * runs {
      // Seconds of synchronous work: let the real-clock tests of other suites run meanwhile.
      await Task.yield()
      var generator = SeededGenerator(seed: seed)
      let edges = Self.edges(&generator)
      Self.checkDebouncer(&generator, seed: seed, edges: edges, merge: .append, lateness: nil)
    }
  }

  /// The same, on schedulers whose timers fire late, at a boundary of their granularity: for every
  /// edge and merge policy, a key's calls that come after its deadline but before the timer fires
  /// are in that firing's invocation, as on a `Debouncer` of its own.
  @Test(arguments: [Edges.leading, .trailing, .both], MergeCase.allCases)
  func keyedDebouncerMatchesOneDebouncerPerKeyWhenTimersFireLate(edges: Edges, merge: MergeCase) async {
    for seed in 0..<UInt64(fuzzRuns(100)) {
      await Task.yield()
      var generator = SeededGenerator(seed: seed &* 7_919 &+ 1)
      let lateness = Lateness.random(&generator)
      Self.checkDebouncer(&generator, seed: seed, edges: edges, merge: merge, lateness: lateness)
    }
  }

  @Test(arguments: 0..<4)
  func keyedThrottlerMatchesOneThrottlerPerKey(batch: UInt64) async {
    let runs = UInt64(fuzzRuns(250))
    for seed in batch * runs..<(batch + 1) * runs {
      // Seconds of synchronous work: let the real-clock tests of other suites run meanwhile.
      await Task.yield()
      var generator = SeededGenerator(seed: seed)
      let edges = Self.edges(&generator)
      Self.checkThrottler(&generator, seed: seed, edges: edges, merge: .append, lateness: nil)
    }
  }

  /// The same, on schedulers whose timers fire late, for every edge and merge policy.
  @Test(arguments: [Edges.leading, .trailing, .both], MergeCase.allCases)
  func keyedThrottlerMatchesOneThrottlerPerKeyWhenTimersFireLate(edges: Edges, merge: MergeCase) async {
    for seed in 0..<UInt64(fuzzRuns(100)) {
      await Task.yield()
      var generator = SeededGenerator(seed: seed &* 7_919 &+ 2)
      let lateness = Lateness.random(&generator)
      Self.checkThrottler(&generator, seed: seed, edges: edges, merge: merge, lateness: lateness)
    }
  }

  @Test(arguments: 0..<4)
  func keyedRateLimiterMatchesOneRateLimiterPerKey(batch: UInt64) async {
    let runs = UInt64(fuzzRuns(250))
    for seed in batch * runs..<(batch + 1) * runs {
      // Seconds of synchronous work: let the real-clock tests of other suites run meanwhile.
      await Task.yield()
      var generator = SeededGenerator(seed: seed)
      let permits = Int.random(in: 1...5, using: &generator)
      let interval = Duration.milliseconds([100, 300, 1_000].randomElement(using: &generator)!)
      let burst = Int.random(in: 1...6, using: &generator)
      let keys = Int.random(in: 1...6, using: &generator)
      let steps = Self.timeline(&generator, keys: keys)

      let scheduler = TestScheduler()
      let keyed = KeyedRateLimiter<Int>(permits: permits, per: interval, burst: burst, clock: scheduler)
      let references = (0..<keys).map { _ in
        let scheduler = TestScheduler()
        return (scheduler, RateLimiter(permits: permits, per: interval, burst: burst, clock: scheduler))
      }
      for step in steps {
        scheduler.advance(to: ms(step.time))
        for reference in references { reference.0.advance(to: ms(step.time)) }
        let cost = step.operation == .flush ? burst + 1 : step.operation == .cancel ? 0 : 1
        let decision = Self.decide(keyed, step.key, cost: cost)
        let limiter = references[step.key].1
        #expect(decision.isAllowed == limiter.tryAcquire(cost: cost).isAllowed, "seed \(seed)")
        if case .allowed(let remaining) = decision {
          #expect(remaining == limiter.availablePermits, "seed \(seed)")
        } else if case .limited(let retryAfter) = decision {
          #expect(retryAfter > .zero, "seed \(seed)")
        }
        #expect(keyed.availablePermits(for: step.key) == limiter.availablePermits, "seed \(seed)")
      }
      // Every bucket fills up again, and then its key is forgotten.
      scheduler.advance(to: ms((steps.last?.time ?? 0) + 60_000))
      #expect(keyed.trackedKeyCount == 0, "seed \(seed)")
      #expect(scheduler.pendingDeadlines.isEmpty, "seed \(seed)")
      #expect(keyed.heldStorageBytes == 0, "seed \(seed): storage held once quiet")
    }
  }
}
