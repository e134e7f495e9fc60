// Calls that compiled against Pace 0.1.0 (8c98042) beyond the rate limiters' (RateLimiterCalls-0.1.0):
// the names the glossary of 0.4.0 renames (lodash's `maxWait:`, `isPending(_:)`, `KeyPolicy`), so
// that their deprecated spellings are proven to compile, and the keyed pacers' other actions.
// Not a test target: Scripts/check-source-compatibility.sh type-checks this file against the
// current build and fails on an error (deprecation warnings are expected and allowed).
// Spelled as released: a rename leaves this file alone (its old name must still compile here).
import Pace

func debounceCallsOf010(_ scheduler: TestScheduler, stream: AsyncStream<Int>, fuser: Fuser<Int>) async throws {
  let debouncer = Debouncer<Int>(for: .milliseconds(300), maxWait: .seconds(1), scheduler: scheduler) { print($0) }
  _ = Debouncer<Int>(for: .milliseconds(300), edges: .trailing, maxWait: nil, merge: .latest, scheduler: scheduler) {
    print($0)
  }
  debouncer.call(1)
  let search = AsyncDebouncer<String, [String]>(for: .milliseconds(300), maxWait: .seconds(2), clock: scheduler) {
    query in [query]
  }
  let task: Task<[String], any Error> = search.submit("swift")
  _ = task
  for try await value in stream.debounced(for: .milliseconds(300), maxWait: .seconds(1), clock: scheduler) {
    print(value)
  }
  _ = fuser.debounced(for: .milliseconds(300), maxWait: .seconds(1), scheduler: scheduler)
}

func keyedCallsOf010(_ scheduler: TestScheduler, limiter: KeyedRateLimiter<String>) {
  let debouncer = KeyedDebouncer<String, Int>(for: .milliseconds(300), maxWait: .seconds(1), scheduler: scheduler) {
    key, value in print(key, value)
  }
  debouncer.call("a", 1)
  if debouncer.isPending("a") { debouncer.flush("a") }
  let throttler = KeyedThrottler<String, Int>(for: .milliseconds(300), scheduler: scheduler) { key, value in
    print(key, value)
  }
  throttler.call("a", 1)
  if throttler.isPending("a") { throttler.flush("a") }
  let waiting: Int = limiter.waitingCount
  _ = waiting
}

@MainActor
final class TableOf010 {
  var reloads = 0
}

@MainActor
func coalescerCallsOf010(_ scheduler: TestScheduler, table: TableOf010) {
  let coalescer = UpdateCoalescer<TableOf010>(window: .milliseconds(16), scheduler: scheduler) { $0.reloads += 1 }
  coalescer.setNeedsUpdate(table)
  if coalescer.isPending(table) { print("pending") }
}

func inputCallsOf010(_ key: String, cost: Int) throws {
  try KeyPolicy.check(key: key)
  try KeyPolicy.check(cost: cost, limit: RateLimit(permits: 10, per: .seconds(1), burst: 20))
  let maximum: Int = KeyPolicy.maximumBytes
  _ = maximum
}
