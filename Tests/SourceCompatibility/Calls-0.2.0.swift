// Calls that compiled against Pace 0.2.0 (tag 0.2.0, 278bc1f): every public name 0.2.0 added to the
// products without traits, with its released labels, and 0.2.0's keyed pacers without a scheduler.
// Not a test target: Scripts/check-source-compatibility.sh type-checks this file against the
// current build and fails on an error (deprecation warnings are expected and allowed).
// Spelled as released: a rename leaves this file alone (its old name must still compile here).
import Pace
import PaceTesting
import Testing

// RateLimiter speaks KeyedRateLimiter's words: a decision that reads as a Bool, `cost:`, the
// caller's isolation, the limit it enforces.
func rateLimiterCallsOf020(_ limiter: RateLimiter, keyed: KeyedRateLimiter<String>) async throws {
  let decision: RateLimitDecision = limiter.tryAcquire(cost: 2)
  if decision.isAllowed { print("two") }
  switch limiter.tryAcquire() as RateLimitDecision {
  case .allowed(let remaining): print(remaining)
  case .limited(let retryAfter): print(retryAfter)
  }
  if limiter.tryAcquire(cost: 3) { print("three") }
  let taken: Bool = limiter.tryAcquire(cost: 1)
  try await limiter.acquire(cost: 2)
  try await limiter.acquire(cost: 1, isolation: nil)
  let limit: RateLimit = limiter.limit
  try await keyed.acquire("key", cost: 1, isolation: nil)
  _ = (taken, limit)
}

// Keyed pacers run on a queue of their own without a scheduler.
func keyedPacerCallsOf020() {
  let debouncer = KeyedDebouncer<String, Int>(for: .milliseconds(300), maxWait: .seconds(1)) { key, value in
    print(key, value)
  }
  debouncer.call("key", 1)
  debouncer.cancel("key")
  debouncer.flushAll()
  let throttler = KeyedThrottler<String, Int>(for: .milliseconds(300)) { key, value in print(key, value) }
  throttler("key", 1)
  throttler.cancelAll()
}

// OwnedTasks: fire-and-forget tasks an object owns, cancelled with it, awaited in tests.
@MainActor
final class ViewModelOf020 {
  let tasks = OwnedTasks()
  var loaded = 0

  func load() {
    tasks.spawn { self.loaded += 1 }
  }
}

func ownedTasksCallsOf020(_ tasks: OwnedTasks) async {
  tasks.spawn { print("work") }
  let running: Int = tasks.count
  tasks.cancelAll()
  await tasks.waitForAll()
  await tasks.waitForAll(timeout: .seconds(5))
  _ = running
}

// PaceTesting: settle, the immediate scheduler, released objects.
final class HeldOf020 {}

func testingCallsOf020(_ scheduler: TestScheduler, tasks: OwnedTasks) async {
  await scheduler.settle()
  await scheduler.settle(by: .seconds(1))
  await scheduler.settle(by: .seconds(1), awaiting: tasks, timeout: .seconds(5), limit: .seconds(60))
  let immediate = ImmediateScheduler(now: .zero)
  let debouncer = Debouncer<Int>(for: .milliseconds(300), scheduler: immediate) { print($0) }
  debouncer.call(1)
  var held: HeldOf020? = HeldOf020()
  expectReleased(&held)
  var other: HeldOf020? = HeldOf020()
  XCTAssertReleased(&other)
}
