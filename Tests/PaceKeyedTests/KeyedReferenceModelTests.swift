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

  @Test(arguments: 0..<4)
  func keyedDebouncerMatchesOneDebouncerPerKey(batch: UInt64) async {
    for seed in batch * 250..<(batch + 1) * 250 {
      // Seconds of synchronous work: let the real-clock tests of other suites run meanwhile.
      await Task.yield()
      var generator = SeededGenerator(seed: seed)
      let interval = Duration.milliseconds([0, 100, 200, 300].randomElement(using: &generator)!)
      let edges = Self.edges(&generator)
      let maxWait: Duration? = [nil, .milliseconds(250), .milliseconds(600)].randomElement(using: &generator)!
      let keys = Int.random(in: 1...6, using: &generator)
      let steps = Self.timeline(&generator, keys: keys)

      let scheduler = TestScheduler()
      let recorder = KeyedRecorder<Int, [Int]>(clock: scheduler)
      let keyed = KeyedDebouncer<Int, [Int]>(
        for: interval, edges: edges, maxWait: maxWait, merge: .append, scheduler: scheduler, perform: recorder.record
      )
      let references = (0..<keys).map { key in
        let scheduler = TestScheduler()
        let recorder = KeyedRecorder<Int, [Int]>(clock: scheduler)
        let debouncer = Debouncer<[Int]>(
          for: interval, edges: edges, maxWait: maxWait, merge: .append, scheduler: scheduler
        ) { recorder.record(key, $0) }
        return (scheduler, recorder, debouncer)
      }
      for (index, step) in steps.enumerated() {
        scheduler.advance(to: ms(step.time))
        for reference in references { reference.0.advance(to: ms(step.time)) }
        let reference = references[step.key]
        switch step.operation {
        case .call:
          keyed.call(step.key, [index])
          reference.2.call([index])
        case .flush:
          keyed.flush(step.key)
          reference.2.flush()
        case .cancel:
          keyed.cancel(step.key)
          reference.2.cancel()
        }
        #expect(keyed.isPending(step.key) == reference.2.isPending, "seed \(seed)")
      }
      let end = ms((steps.last?.time ?? 0) + 10_000)
      scheduler.advance(to: end)
      for (key, reference) in references.enumerated() {
        reference.0.advance(to: end)
        let expected = reference.1.invocations(of: key)
        let actual = recorder.invocations(of: key)
        #expect(actual.map(\.0) == expected.map(\.0), "seed \(seed), key \(key): times")
        #expect(actual.map(\.1) == expected.map(\.1), "seed \(seed), key \(key): values")
      }
      // Everything went quiet: every key was forgotten and no timer is left.
      #expect(keyed.trackedKeyCount == 0, "seed \(seed)")
      #expect(scheduler.pendingDeadlines.isEmpty, "seed \(seed)")
      #expect(keyed.pacer.heldStorageBytes == 0, "seed \(seed): storage held once quiet")
    }
  }

  @Test(arguments: 0..<4)
  func keyedThrottlerMatchesOneThrottlerPerKey(batch: UInt64) async {
    for seed in batch * 250..<(batch + 1) * 250 {
      // Seconds of synchronous work: let the real-clock tests of other suites run meanwhile.
      await Task.yield()
      var generator = SeededGenerator(seed: seed)
      let interval = Duration.milliseconds([0, 100, 200, 300].randomElement(using: &generator)!)
      let edges = Self.edges(&generator)
      let keys = Int.random(in: 1...6, using: &generator)
      let steps = Self.timeline(&generator, keys: keys)

      let scheduler = TestScheduler()
      let recorder = KeyedRecorder<Int, [Int]>(clock: scheduler)
      let keyed = KeyedThrottler<Int, [Int]>(
        for: interval, edges: edges, merge: .append, scheduler: scheduler, perform: recorder.record
      )
      let references = (0..<keys).map { key in
        let scheduler = TestScheduler()
        let recorder = KeyedRecorder<Int, [Int]>(clock: scheduler)
        let throttler = Throttler<[Int]>(for: interval, edges: edges, merge: .append, scheduler: scheduler) {
          recorder.record(key, $0)
        }
        return (scheduler, recorder, throttler)
      }
      for (index, step) in steps.enumerated() {
        scheduler.advance(to: ms(step.time))
        for reference in references { reference.0.advance(to: ms(step.time)) }
        let reference = references[step.key]
        switch step.operation {
        case .call:
          keyed.call(step.key, [index])
          reference.2.call([index])
        case .flush:
          keyed.flush(step.key)
          reference.2.flush()
        case .cancel:
          keyed.cancel(step.key)
          reference.2.cancel()
        }
        #expect(keyed.isPending(step.key) == reference.2.isPending, "seed \(seed)")
      }
      let end = ms((steps.last?.time ?? 0) + 10_000)
      scheduler.advance(to: end)
      for (key, reference) in references.enumerated() {
        reference.0.advance(to: end)
        let expected = reference.1.invocations(of: key)
        let actual = recorder.invocations(of: key)
        #expect(actual.map(\.0) == expected.map(\.0), "seed \(seed), key \(key): times")
        #expect(actual.map(\.1) == expected.map(\.1), "seed \(seed), key \(key): values")
      }
      #expect(keyed.trackedKeyCount == 0, "seed \(seed)")
      #expect(scheduler.pendingDeadlines.isEmpty, "seed \(seed)")
      #expect(keyed.pacer.heldStorageBytes == 0, "seed \(seed): storage held once quiet")
    }
  }

  @Test(arguments: 0..<4)
  func keyedRateLimiterMatchesOneRateLimiterPerKey(batch: UInt64) async {
    for seed in batch * 250..<(batch + 1) * 250 {
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
