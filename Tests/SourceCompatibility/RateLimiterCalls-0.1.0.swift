// The RateLimiter and KeyedRateLimiter calls that compiled against Pace 0.1.0, unchanged.
// Not a test target: Scripts/check-source-compatibility.sh type-checks this file against the
// current build and fails on an error (deprecation warnings are expected and allowed).
// Spelled as released: a rename leaves this file alone (its old name must still compile here).
import Pace

func rateLimiterCallsOf010(_ limiter: RateLimiter, keyed: KeyedRateLimiter<String>) async throws {
  if limiter.tryAcquire() { print("sent") }
  guard limiter.tryAcquire() else { return }
  if !limiter.tryAcquire(), limiter.tryAcquire(3) { print("three") }
  let granted: Bool = limiter.tryAcquire()
  let three: Bool = limiter.tryAcquire(3)
  _ = (granted, three)
  while limiter.tryAcquire() {}
  try await limiter.acquire()
  try await limiter.acquire(2)
  let permits: Int = limiter.availablePermits
  let waiting: Int = limiter.waitingCount
  _ = (permits, waiting)
  _ = RateLimiter(permits: 10, per: .seconds(1))
  _ = RateLimiter(permits: 10, per: .seconds(1), burst: 20, clock: ContinuousClock())
  try await keyed.acquire("key")
  try await keyed.acquire("key", cost: 2)
  if keyed.tryAcquire("key").isAllowed { print("keyed") }
}
