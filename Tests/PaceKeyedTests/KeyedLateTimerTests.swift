import PaceTestSupport
import Testing

@testable import Pace

/// Issue 31's timelines: two keys in one shard, on a scheduler whose timers fire at the first
/// 1 ms boundary after their deadline. The shard's timer, armed for the first key's deadline,
/// fires at 1 ms, which is the second key's deadline exactly; that key's own timer fires at 2 ms,
/// and so must its invocation, with every call made meanwhile.
@Suite struct KeyedLateTimerTests {
  /// Microseconds.
  static func µs(_ value: Int64) -> PaceInstant { PaceInstant(nanoseconds: value * 1_000) }

  let scheduler = CoarseScheduler(granularity: .milliseconds(1), tick: .afterTheDeadline)
  let keys = keysSharingAShard(2)

  /// Runs the first key's call at 0 and the second key's `calls` (at these microseconds, with
  /// the values 1, 2, …) through `call`, then every timer.
  func run(_ calls: [Int64], _ call: (Int, [Int]) -> Void) {
    call(keys[0], [0])
    for (index, time) in calls.enumerated() {
      scheduler.advance(to: Self.µs(time))
      call(keys[1], [index + 1])
    }
    scheduler.advance(to: ms(10))
  }

  /// A single-key pacer on a scheduler of its own, as late, with the second key's calls alone.
  func reference(
    _ calls: [Int64], _ make: (CoarseScheduler, @escaping @Sendable ([Int]) -> Void) -> ([Int]) -> Void
  ) -> [(Int64, [Int])] {
    let scheduler = CoarseScheduler(granularity: .milliseconds(1), tick: .afterTheDeadline)
    let recorder = LockedState<[(Int64, [Int])]>([])
    let call = make(scheduler) { value in recorder.withLock { $0.append((scheduler.now.nanoseconds / 1_000, value)) } }
    for (index, time) in calls.enumerated() {
      scheduler.advance(to: Self.µs(time))
      call([index + 1])
    }
    scheduler.advance(to: ms(10))
    return recorder.withLock { $0 }
  }

  @Test func aKeyedDebouncerInvokesWhenTheKeysOwnLateTimerFires() {
    let recorder = LockedState<[Int: [(Int64, [Int])]]>([:])
    let keyed = KeyedDebouncer<Int, [Int]>(for: .microseconds(7), merge: .append, scheduler: scheduler) {
      [scheduler] key, value in
      recorder.withLock { $0[key, default: []].append((scheduler.now.nanoseconds / 1_000, value)) }
    }
    // The first two calls' deadline is 1 ms.
    let calls: [Int64] = [993, 993, 1_000, 1_500]
    run(calls) { keyed.call($0, $1) }
    let expected = reference(calls) { scheduler, perform in
      let debouncer = Debouncer<[Int]>(for: .microseconds(7), merge: .append, scheduler: scheduler, perform: perform)
      return { debouncer.call($0) }
    }
    // The first key's deadline, 7 µs, fires at 1 ms; the second's, 1 ms, at 2 ms, with all four
    // calls: the later two came while it waited.
    #expect(expected.map(\.0) == [2_000])
    #expect(expected.map(\.1) == [[1, 2, 3, 4]])
    let (first, second) = recorder.withLock { ($0[keys[0]] ?? [], $0[keys[1]] ?? []) }
    #expect(first.map(\.0) == [1_000])
    #expect(second.map(\.0) == expected.map(\.0))
    #expect(second.map(\.1) == expected.map(\.1))
    #expect(scheduler.pendingDeadlines.isEmpty)
    #expect(keyed.trackedKeyCount == 0)
  }

  @Test func aKeyedThrottlerInvokesWhenTheKeysOwnLateTimerFires() {
    let recorder = LockedState<[Int: [(Int64, [Int])]]>([:])
    let keyed = KeyedThrottler<Int, [Int]>(
      for: .microseconds(7), edges: .both, merge: .append, scheduler: scheduler
    ) { [scheduler] key, value in
      recorder.withLock { $0[key, default: []].append((scheduler.now.nanoseconds / 1_000, value)) }
    }
    // The leading call opens a window that ends at 1 ms.
    let calls: [Int64] = [993, 995, 1_000, 1_500]
    run(calls) { keyed.call($0, $1) }
    let expected = reference(calls) { scheduler, perform in
      let throttler = Throttler<[Int]>(
        for: .microseconds(7), edges: .both, merge: .append, scheduler: scheduler, perform: perform)
      return { throttler.call($0) }
    }
    // The window's timer fires at 2 ms, with the calls at 995 µs, 1 ms and 1.5 ms.
    #expect(expected.map(\.0) == [993, 2_000])
    #expect(expected.map(\.1) == [[1], [2, 3, 4]])
    let second = recorder.withLock { $0[keys[1]] ?? [] }
    #expect(second.map(\.0) == expected.map(\.0))
    #expect(second.map(\.1) == expected.map(\.1))
    #expect(scheduler.pendingDeadlines.isEmpty)
    #expect(keyed.trackedKeyCount == 0)
  }

  /// The rate limiter's shards fire by the same rule: a request waiting for 1 ms is granted when
  /// a `RateLimiter`'s timer for 1 ms fires, at 2 ms, not when its shard's timer fires at 1 ms
  /// for the other key's bucket, full again at 7 µs.
  @Test func aKeyedRateLimiterGrantsWhenTheKeysOwnLateTimerFires() async throws {
    let clock = AsyncClock(scheduler: scheduler)
    let keyed = KeyedRateLimiter<Int>(permits: 1, per: .microseconds(7), clock: clock)
    let singleScheduler = CoarseScheduler(granularity: .milliseconds(1), tick: .afterTheDeadline)
    let single = RateLimiter(permits: 1, per: .microseconds(7), burst: 1, clock: AsyncClock(scheduler: singleScheduler))
    // The first key takes its permit at 0: its bucket is full again at 7 µs, checked at 1 ms.
    #expect(keyed.tryAcquire(keys[0]).isAllowed)
    for scheduler in [scheduler, singleScheduler] { scheduler.advance(to: Self.µs(993)) }
    // The second key takes its permit at 993 µs, and asks for one more: due at 1 ms.
    #expect(keyed.tryAcquire(keys[1]) == .allowed(remaining: 0))
    #expect(single.tryAcquire() == .allowed(remaining: 0))
    let waiting = [
      await startRequest(waitingCount: { keyed.waitingCount }) { try await keyed.acquire(keys[1]) },
      await startRequest(waitingCount: { single.waitingCount }) { try await single.acquire() },
    ]
    #expect(keyed.waitingCount == 1)
    #expect(single.waitingCount == 1)
    for (instant, waitingCount) in [(Self.µs(1_000), 1), (Self.µs(1_500), 1), (ms(2), 0)] {
      for scheduler in [scheduler, singleScheduler] { scheduler.advance(to: instant) }
      #expect(single.waitingCount == waitingCount, "at \(instant)")
      #expect(keyed.waitingCount == waitingCount, "at \(instant)")
    }
    for task in waiting { try await task.value }
    scheduler.advance(to: ms(10))
    #expect(keyed.trackedKeyCount == 0)
    #expect(scheduler.pendingDeadlines.isEmpty)
  }

  /// A key whose bucket is checked for being full at 0.5 ms, and whose request waits from 0 for
  /// the bucket at 1 ms: a `RateLimiter` arms its timer for 1 ms, which fires at 2 ms, and so
  /// must the key's grant, not the check's firing at 1 ms.
  @Test func aKeyedRateLimitersWaitingRequestIsNotGrantedByTheBucketsEarlierCheck() async throws {
    let keyed = KeyedRateLimiter<Int>(permits: 2, per: .milliseconds(1), clock: AsyncClock(scheduler: scheduler))
    let singleScheduler = CoarseScheduler(granularity: .milliseconds(1), tick: .afterTheDeadline)
    let single = RateLimiter(permits: 2, per: .milliseconds(1), burst: 2, clock: AsyncClock(scheduler: singleScheduler))
    // The first permit leaves the bucket full again at 0.5 ms, when the key is checked; the
    // second empties it, and a request for two waits until 1 ms.
    for _ in 0..<2 {
      #expect(keyed.tryAcquire(keys[0]).isAllowed)
      #expect(single.tryAcquire().isAllowed)
    }
    let waiting = [
      await startRequest(waitingCount: { keyed.waitingCount }) { try await keyed.acquire(keys[0], cost: 2) },
      await startRequest(waitingCount: { single.waitingCount }) { try await single.acquire(cost: 2) },
    ]
    for (instant, waitingCount) in [(Self.µs(0), 1), (ms(1), 1), (Self.µs(1_500), 1), (ms(2), 0)] {
      for scheduler in [scheduler, singleScheduler] { scheduler.advance(to: instant) }
      #expect(single.waitingCount == waitingCount, "at \(instant)")
      #expect(keyed.waitingCount == waitingCount, "at \(instant)")
    }
    for task in waiting { try await task.value }
    scheduler.advance(to: ms(10))
    #expect(keyed.trackedKeyCount == 0)
    #expect(keyed.heldStorageBytes == 0)
    #expect(scheduler.pendingDeadlines.isEmpty)
  }
}
