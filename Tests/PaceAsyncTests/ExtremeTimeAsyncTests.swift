import PaceTestSupport
import PaceTesting
import Testing

@testable import Pace

/// The async primitives at the ends of the timeline: intervals of 0, 1 ns, `Int64.max` ns and
/// `.seconds(Int64.max)`, and schedulers that start at `Int64.min` or just before
/// ``PaceInstant/max``. Nothing traps, ``TestScheduler/run()`` returns, and no call is invoked
/// twice.
@Suite(.timeLimit(.minutes(3))) struct ExtremeTimeAsyncTests {
  static let forever = Duration.seconds(Int64.max)

  // MARK: Sleeping on virtual time

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func anEndlessSleepWakesAtTheEndOfTheTimeline() async throws {
    let scheduler = TestScheduler(now: PaceInstant(nanoseconds: .max - 1))
    let sleeper = Task.immediate { try await scheduler.sleep(for: Self.forever) }
    #expect(scheduler.pendingDeadlines == [.max])
    scheduler.run()
    try await sleeper.value
    #expect(scheduler.now == .max)
    try await scheduler.sleep(for: Self.forever)  // the deadline has come: returns at once
  }
  #endif

  // MARK: Token bucket

  @Test func aReadyTimeBeyondTheEndOfTheTimelineIsNever() {
    var bucket = TokenBucket(permits: 1, per: Self.forever, burst: 1, now: .zero)
    bucket.take(1)
    #expect(bucket.readyTime(for: 1) == .max)  // exactly Int64.max ns: the last instant
    var late = TokenBucket(permits: 1, per: Self.forever, burst: 1, now: PaceInstant(nanoseconds: 1))
    late.take(1)
    #expect(late.readyTime(for: 1) == nil)
  }

  @Test func hugePermitsBurstsAndCostsSaturate() {
    var slow = TokenBucket(permits: 1, per: Self.forever, burst: .max, now: .zero)
    #expect(slow.capacity == .max)
    #expect(slow.availablePermits == 1)
    var fast = TokenBucket(permits: .max, per: .nanoseconds(1), burst: .max, now: PaceInstant(nanoseconds: .min))
    #expect(fast.canTake(.max))
    fast.take(.max)
    fast.take(.max)  // a debt of Int64.max units: 1 ns of credit pays it back
    #expect(fast.readyTime(for: .max) == PaceInstant(nanoseconds: Int64.min + 2))
    fast.refill(now: .max)  // a whole timeline later: the multiplication overflows, the bucket is full
    #expect(fast.availablePermits == .max)
    slow.take(.max)  // costs more than the bucket holds: empties it
    #expect(slow.readyTime(for: .max) == .max)
    slow.refill(now: .max)
    #expect(slow.availablePermits == 1)
  }

  // MARK: Rate limiter

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func aRequestReadyOnlyBeyondTheEndWaitsUntilCancelledWithNoTimer() async {
    let scheduler = TestScheduler(now: PaceInstant(nanoseconds: 1))
    let limiter = RateLimiter(permits: 1, per: Self.forever, clock: scheduler)
    #expect(limiter.tryAcquire().isAllowed)
    let waiter = Task.immediate { try await limiter.acquire() }
    #expect(limiter.waitingCount == 1)
    #expect(scheduler.pendingCount == 0)
    scheduler.run()
    #expect(limiter.waitingCount == 1)
    waiter.cancel()
    await #expect(throws: CancellationError.self) { try await waiter.value }
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func aRequestReadyAtTheLastInstantIsGrantedThere() async throws {
    let scheduler = TestScheduler()
    let limiter = RateLimiter(permits: 1, per: .nanoseconds(Int64.max), clock: scheduler)
    #expect(limiter.tryAcquire().isAllowed)
    let waiter = Task.immediate { try await limiter.acquire() }
    #expect(scheduler.pendingDeadlines == [.max])
    scheduler.run()
    try await waiter.value
    #expect(scheduler.now == .max)
  }
  #endif

  // MARK: Random timelines

  /// `.debounced` and `.throttled` at the ends of time: every element reaches at most one
  /// emission, all of them in order when the trailing edge is on, and the timers run out.
  @Test(arguments: 0..<24) func operatorsOnRandomTimelines(seed: UInt64) async {
    var random = SeededGenerator(seed: seed)
    let setup = AsyncExtremeSetup(random: &random)
    await Self.play(setup, "debounced", random: &random) { upstream, clock in
      upstream.debounced(
        for: setup.interval, edges: setup.edges, maximumWait: setup.maximumWait, merge: .append, clock: clock)
    }
    await Self.play(setup, "throttled", random: &random) { upstream, clock in
      upstream.throttled(for: setup.interval, edges: setup.edges, merge: .append, clock: clock)
    }
  }

  static func play<Sequence: AsyncSequence & Sendable>(
    _ setup: AsyncExtremeSetup, _ name: String, random: inout SeededGenerator,
    through operate: (TestStream<[Int]>, TestScheduler) -> Sequence
  ) async where Sequence.Element == [Int] {
    let scheduler = TestScheduler(now: setup.start)
    let upstream = TestStream<[Int]>()
    let timeline = VirtualTimeline(scheduler: scheduler, operate(upstream, scheduler))
    var time = setup.start
    var sent: [Int] = []
    for step in 0..<Int.random(in: 1...20, using: &random) {
      time = time.advanced(by: AsyncExtremeSetup.gap(&random))
      timeline.advance(to: max(time, scheduler.now))
      await upstream.send([step])
      sent.append(step)
    }
    timeline.runTimers()
    let context = "\(name), \(setup)"
    #expect(scheduler.pendingCount == 0, "\(context)")
    let emitted = timeline.values.flatMap { $0 }
    if setup.edges.contains(.trailing) {
      #expect(emitted == sent, "\(context)")
    } else {
      #expect(emitted.count <= sent.count && Set(emitted).count == emitted.count, "\(context)")
    }
    upstream.finish()
    await timeline.waitForEnd()
    #expect(timeline.isFinished, "\(context)")
  }

  #if compiler(>=6.2)  // Task.immediate
  /// `AsyncDebouncer` and `AsyncThrottler` at the ends of time: `run()` returns, nothing is left
  /// pending, no more invocations start than calls were made, and each caller that gets a result
  /// gets one that covers its own call.
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test(arguments: 0..<24) func workPacersOnRandomTimelines(seed: UInt64) async {
    var random = SeededGenerator(seed: seed)
    let setup = AsyncExtremeSetup(random: &random)
    for throttler in [false, true] {
      let scheduler = TestScheduler(now: setup.start)
      let operation: @Sendable ([Int]) async throws -> [Int] = { $0 }
      let pacer: any AsyncWorkPacing<[Int], [Int]> =
        throttler
        ? AsyncThrottler(
          for: setup.interval, edges: setup.edges, merge: .append, clock: scheduler, operation: operation)
        : AsyncDebouncer(
          for: setup.interval, edges: setup.edges, maximumWait: setup.maximumWait, merge: .append, clock: scheduler,
          operation: operation)
      var callers: [(Int, Task<[Int], any Error>)] = []
      for step in 0..<Int.random(in: 1...20, using: &random) {
        if Bool.random(using: &random) {
          callers.append((step, Task.immediate { try await pacer.call([step], isolation: #isolation) }))
        } else {
          scheduler.advance(by: AsyncExtremeSetup.gap(&random))
        }
      }
      scheduler.run()
      let context = "seed \(seed), \(throttler ? "AsyncThrottler" : "AsyncDebouncer"), \(setup)"
      #expect(scheduler.pendingCount == 0, "\(context)")
      #expect(pacer.invocationCountForTesting <= callers.count, "\(context)")
      for task in pacer.tasksForTesting { await task.value }
      for (step, caller) in callers {
        if let result = try? await caller.value {
          #expect(result.contains(step), "\(context)")
        }
      }
    }
  }
  #endif

  #if compiler(>=6.2)  // Task.immediate
  /// `RateLimiter` at the ends of time: nothing traps, `run()` returns with no timer left, and
  /// what still waits is ready only beyond the end of the timeline and ends when cancelled.
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test(arguments: 0..<24) func rateLimiterOnRandomTimelines(seed: UInt64) async {
    var random = SeededGenerator(seed: seed)
    let setup = AsyncExtremeSetup(random: &random)
    let scheduler = TestScheduler(now: setup.start)
    let interval = setup.interval == .zero || setup.interval == .nanoseconds(0.5) ? .nanoseconds(1) : setup.interval
    let permits = [1, 3, Int.max].randomElement(using: &random)!
    let burst = [1, permits, Int.max].randomElement(using: &random)!
    let limiter = RateLimiter(permits: permits, per: interval, burst: burst, clock: scheduler)
    var waiters: [Task<Void, any Error>] = []
    var granted = 0
    var requests = 0
    for _ in 0..<Int.random(in: 1...20, using: &random) {
      let amount = [0, 1, 3, Int.max].randomElement(using: &random)!
      switch Int.random(in: 0..<3, using: &random) {
      case 0:
        requests += 1
        if limiter.tryAcquire(cost: amount).isAllowed { granted += 1 }
      case 1:
        requests += 1
        waiters.append(Task.immediate { try await limiter.acquire(cost: amount) })
      default:
        scheduler.advance(by: AsyncExtremeSetup.gap(&random))
      }
      _ = limiter.availablePermits
    }
    scheduler.run()
    let context = "seed \(seed), \(permits) per \(interval), burst \(burst), start \(setup.start.nanoseconds) ns"
    #expect(scheduler.pendingCount == 0, "\(context)")
    for waiter in waiters { waiter.cancel() }
    for waiter in waiters where (try? await waiter.value) != nil { granted += 1 }
    #expect(granted <= requests, "\(context)")
    #expect(limiter.waitingCount == 0, "\(context)")
  }
  #endif
}

/// One random configuration at the ends of time.
struct AsyncExtremeSetup: CustomStringConvertible {
  static let durations: [Duration] = [
    .zero, .nanoseconds(1), .nanoseconds(0.5), .milliseconds(300), .nanoseconds(Int64.max), .seconds(Int64.max),
  ]
  static let starts: [PaceInstant] = [
    .zero, PaceInstant(nanoseconds: .min), PaceInstant(nanoseconds: .max - 1_000), .max,
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

  static func gap(_ random: inout some RandomNumberGenerator) -> Duration {
    switch Int.random(in: 0..<5, using: &random) {
    case 0: .zero
    case 1: .nanoseconds(Int64.random(in: 1...1_000, using: &random))
    case 2: .milliseconds(Int64.random(in: 0...1_000, using: &random))
    case 3: .nanoseconds(Int64.max)
    default: .seconds(Int64.max)
    }
  }

  var description: String {
    "interval \(interval), maximumWait \(maximumWait.map { "\($0)" } ?? "nil"), edges \(edges.rawValue), start \(start.nanoseconds) ns"
  }
}
