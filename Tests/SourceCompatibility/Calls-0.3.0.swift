// Calls that compiled against Pace 0.3.0 (tag 0.3.0, b987f07): every public name 0.3.0 added to the
// products without traits, with its released labels (the server products' are in Server/).
// Not a test target: Scripts/check-source-compatibility.sh type-checks this file against the
// current build and fails on an error (deprecation warnings are expected and allowed).
// Spelled as released: a rename leaves this file alone (its old name must still compile here).
import Pace
import PaceTesting

// Limits: three policies, validated limits read at run time, "never".
func limitCallsOf030() throws {
  let bucket = RateLimit(permits: 10, per: .seconds(1), burst: 20)
  let sliding: RateLimit = .slidingWindow(100, per: .seconds(60))
  let fixed = RateLimit.fixedWindow(1_000, per: .seconds(3600))
  for limit in [bucket, sliding, fixed] {
    switch limit.policy {
    case .tokenBucket: print("bucket")
    case .slidingWindow: print("sliding")
    case .fixedWindow: print("fixed")
    }
  }
  let policy: RateLimit.Policy = .slidingWindow
  _ = try RateLimit.validated(permits: 10, per: .seconds(1))
  _ = try RateLimit.validated(permits: 10, per: .seconds(1), burst: 10, policy: policy)
  do {
    _ = try RateLimit.validated(permits: 0, per: RateLimit.maximumInterval, burst: nil, policy: .fixedWindow)
  } catch {
    let caught: RateLimitError = error
    switch caught {
    case .permitsNotPositive(let permits): print(permits)
    case .burstNotPositive(let burst): print(burst)
    case .intervalTooShort(let interval): print(interval)
    case .intervalTooLong(let interval): print(interval)
    case .burstTooLarge(let burst, let maximum): print(burst, maximum)
    case .burstIsNotPermits(let burst, let permits): print(burst, permits)
    }
    print(caught.description)
  }
  let never: Duration = RateLimitDecision.never
  if case .limited(let retryAfter) = RateLimitDecision.limited(retryAfter: never), retryAfter == RateLimitDecision.never
  {
    print("never")
  }
}

// A store a user writes: one decision, answered elsewhere.
struct StoreOf030: RateLimitStore {
  func tryAcquire(_ key: String, cost: Int, limit: RateLimit) async throws -> RateLimitDecision {
    .allowed(remaining: limit.burst - cost)
  }
}

// Limiters for every policy, limits per key.
func limiterCallsOf030(_ scheduler: TestScheduler, stream: AsyncStream<Int>) async throws {
  let limiter = RateLimiter(limit: .slidingWindow(3, per: .seconds(10)), clock: scheduler)
  _ = RateLimiter(limit: .fixedWindow(3, per: .seconds(10)))
  try await limiter.acquire()
  for try await value in stream.rateLimited(to: .fixedWindow(5, per: .seconds(1)), clock: scheduler, cost: { $0 }) {
    print(value)
  }
  for try await value in stream.rateLimited(to: .slidingWindow(5, per: .seconds(1))) { print(value) }

  let one = KeyedRateLimiter<String>(limit: .slidingWindow(100, per: .seconds(60)), clock: scheduler)
  _ = KeyedRateLimiter<String>(limit: .fixedWindow(100, per: .seconds(60)))
  let plans = KeyedRateLimiter<String>(
    limits: { key in
      key.hasPrefix("pro:") ? .fixedWindow(1_000, per: .seconds(60)) : .slidingWindow(100, per: .seconds(60))
    }, clock: scheduler)
  _ = KeyedRateLimiter<String>(limits: { _ in .fixedWindow(10, per: .seconds(1)) })
  _ = KeyedRateLimiter<String>(limit: .slidingWindow(10, per: .seconds(1)), clock: scheduler, store: StoreOf030())
  _ = KeyedRateLimiter<String>(
    limits: { _ in RateLimit(permits: 10, per: .seconds(1)) }, clock: scheduler, store: StoreOf030())
  let limit: RateLimit = plans.limit(for: "pro:a")
  let whole: RateLimit = one.limit
  let end: Duration? = plans.timeUntilWindowEnds(for: "pro:a")
  _ = (limit, whole, end)
}

// Single flight: one run per key, shared by its concurrent callers.
func sharedWorkCallsOf030(_ scheduler: TestScheduler) async throws {
  let profile = SharedWork<String>(reusingResultsFor: .seconds(5), clock: scheduler)
  _ = SharedWork<Int>()
  let name = try await profile.run { "name" }
  let isolated = try await profile.run(isolation: nil) { "again" }
  let reuse: Duration = profile.reuseDuration
  let running: Bool = profile.isRunning
  let callers: Int = profile.callerCount
  _ = (name, isolated, reuse, running, callers)

  let images = KeyedSharedWork<String, [UInt8]>(reusingResultsFor: .zero, clock: scheduler)
  _ = KeyedSharedWork<Int, String>()
  let bytes = try await images.run("a.png") { [1, 2, 3] }
  let again = try await images.run("a.png", isolation: nil) { [] }
  let keyedReuse: Duration = images.reuseDuration
  let runs: Int = images.runningCount
  let keyedCallers: Int = images.callerCount(for: "a.png")
  _ = (bytes, again, keyedReuse, runs, keyedCallers)
}

// Batches: maxCount, maxWait after the first, at most maxInFlight; a bounded buffer.
func batcherCallsOf030(_ scheduler: TestScheduler) async throws {
  let users = Batcher<Int, String>(
    maxCount: 50, maxWait: .milliseconds(10), maxInFlight: 2, bufferCapacity: 1_000, overflow: .reject,
    clock: scheduler
  ) { ids in
    Dictionary(uniqueKeysWithValues: ids.map { ($0, "user \($0)") })
  }
  let name: String = try await users.load(7)
  try await users.submit(8)
  try await users.submit(9, isolation: nil)
  _ = try await users.load(10, isolation: nil)
  users.flush()
  let buffered: Int = users.bufferedCount
  let inFlight: Int = users.inFlightCount
  _ = (name, buffered, inFlight)

  let events = Batcher<String, Void>(maxCount: 100, maxWait: .seconds(5)) { events in print(events.count) }
  try await events.submit("opened")
  _ = Batcher<String, Void>(maxCount: 100, maxWait: .seconds(5), overflow: .dropOldest) { _ in }
  _ = Batcher<String, Void>(maxCount: 100, maxWait: .seconds(5), overflow: .suspend) { _ in }
  do {
    try await events.submit("closed")
  } catch let error as BatcherError {
    switch error {
    case .bufferFull: print("full")
    case .dropped: print("dropped")
    case .noResult: print("no result")
    }
  }
  let overflow: BatchOverflow = .reject
  _ = overflow
}

// Tasks that settle follows, made with the object's clock.
@MainActor
final class ViewModelOf030 {
  let tasks: OwnedTasks
  let clock: any Clock<Duration>
  var count = 0

  init(clock: some Clock<Duration>) {
    self.clock = clock
    tasks = OwnedTasks(trackedBy: clock)
  }

  func refresh() {
    tasks.spawn { self.count += 1 }
    Task(trackedBy: clock) { self.count += 1 }
    let task: Task<Int, any Error> = Task(trackedBy: clock, priority: .low) {
      try await Task.sleep(for: .seconds(1))  // real-time: a 0.3.0 call, type-checked, never run
      return 1
    }
    _ = task
  }
}

// PaceTesting's waits, each with a timeout; the immediate clock; FakeDependency without input.
func testingCallsOf030(_ scheduler: TestScheduler, limiter: RateLimiter) async throws {
  await scheduler.waitForSleepers()
  await scheduler.waitForSleepers(2, timeout: .seconds(5))
  await scheduler.waitUntilPending()
  await scheduler.waitUntilPending(1, timeout: .seconds(5))
  await scheduler.waitForSuspendedCallers()
  await scheduler.waitForSuspendedCallers(3, timeout: .seconds(5))
  let suspended: Int = scheduler.suspendedCallerCount
  await limiter.waitUntilWaiting(count: 2)
  await limiter.waitUntilWaiting(count: 2, timeout: .seconds(5))

  let recorder = LockedRecorder<Int>(clock: scheduler)
  recorder.record(1)
  await recorder.waitForValues(1)
  await recorder.waitForValues(1, timeout: .seconds(5))

  let fetch = FakeDependency<Void, String>(scheduler: scheduler, latency: .milliseconds(80)) { "value" }
  _ = FakeDependency<Void, Int>(scheduler: scheduler) { 1 }
  let value: String = try await fetch()
  let action: @Sendable () async throws -> String = fetch.action
  await fetch.waitForCalls(1)
  await fetch.waitForCalls(1, timeout: .seconds(5))

  let immediate = ImmediatePaceClock(now: .zero)
  try await immediate.sleep(for: .seconds(1))
  let old: ImmediateClock = ImmediateClock()
  _ = (suspended, value, action, immediate.now, old)
}
