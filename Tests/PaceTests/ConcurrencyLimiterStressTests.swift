import PaceTestSupport
import Testing

@testable import Pace

/// Many tasks on real threads through one limiter: the work itself counts how many run at once,
/// and never sees more than the limit. Run under the thread sanitizer by CI (`StressTests`).
// On the pool, not `.offThePool`: its serial queues would hold these tasks behind a long
// synchronous suite.
@Suite(.timeLimit(.minutes(2))) struct ConcurrencyLimiterStressTests {
  /// How many run at once, and the most seen, counted by the work.
  final class Occupancy: Sendable {
    private let counts = LockedBox((now: 0, most: 0))

    func enter() {
      counts.withLock { counts in
        counts.now += 1
        counts.most = max(counts.most, counts.now)
      }
    }

    func leave() { counts.withLock { $0.now -= 1 } }

    var most: Int { counts.withLock { $0.most } }
    var now: Int { counts.withLock { $0.now } }
  }

  /// The work: counted in, a few suspensions, counted out.
  static func work(_ occupancy: Occupancy, yields: Int) async {
    occupancy.enter()
    for _ in 0..<yields { await Task.yield() }
    occupancy.leave()
  }

  @Test(arguments: [ConcurrencyQueueOrder.oldestFirst, .newestFirst])
  func neverMoreThanTheLimitInFlight(order: ConcurrencyQueueOrder) async throws {
    let limit = 4
    let limiter = ConcurrencyLimiter(
      maximumInFlight: limit, maximumQueued: 64, order: order, maximumWait: .milliseconds(50),
      shares: PriorityShares(defaultPercent: 75, sheddablePercent: 50))
    let occupancy = Occupancy()
    let outcomes = LockedBox((ran: 0, refused: 0, cancelled: 0))
    await withTaskGroup(of: Void.self) { group in
      for call in 0..<2_000 {
        let priority = AdmissionPriority.allCases[call % 3]
        let task = Task {
          do {
            switch call % 4 {
            case 0:
              let permit = try await limiter.acquire(priority: priority)
              await Self.work(occupancy, yields: call % 5)
              permit.release()
              permit.release()
            case 1:
              guard let ran = await limiter.tryWithPermit(priority: priority, { await Self.work(occupancy, yields: 2) })
              else { throw ConcurrencyLimiterError.queueFull(maximumQueued: 0, waited: .zero) }
              _ = ran
            default:
              try await limiter.withPermit(priority: priority) { await Self.work(occupancy, yields: call % 7) }
            }
            outcomes.withLock { $0.ran += 1 }
          } catch is CancellationError {
            outcomes.withLock { $0.cancelled += 1 }
          } catch {
            outcomes.withLock { $0.refused += 1 }
          }
        }
        group.addTask { await task.value }
        if call % 13 == 0 { group.addTask { task.cancel() } }
      }
    }
    #expect(occupancy.most <= limit)
    #expect(occupancy.most >= 1)
    #expect(occupancy.now == 0)
    let (ran, refused, cancelled) = outcomes.withLock { $0 }
    #expect(ran + refused + cancelled == 2_000)
    #expect(ran > 0)
    #expect(limiter.inFlightCount == 0)
    #expect(limiter.waitingCount == 0)
    #expect(limiter.forgottenPermitCount == 0)
  }

  @Test func theLimitChangedWhileCallsRunNeverAdmitsBeyondTheHighest() async throws {
    let limiter = ConcurrencyLimiter(maximumInFlight: 2)
    let occupancy = Occupancy()
    await withTaskGroup(of: Void.self) { group in
      group.addTask {
        for step in 0..<500 {
          limiter.maximumInFlight = [2, 6, 3, 1, 5][step % 5]
          await Task.yield()
        }
        limiter.maximumInFlight = 6
      }
      for call in 0..<2_000 {
        group.addTask {
          try? await limiter.withPermit { await Self.work(occupancy, yields: call % 4) }
        }
      }
    }
    #expect(occupancy.most <= 6)
    #expect(limiter.inFlightCount == 0)
    #expect(limiter.waitingCount == 0)
  }

  @Test func keyedCallsNeverExceedTheirKeysLimit() async throws {
    let limiter = KeyedConcurrencyLimiter<Int>(maximumInFlight: 2, maximumQueued: 32)
    let occupancies = (0..<8).map { _ in Occupancy() }
    await withTaskGroup(of: Void.self) { group in
      for call in 0..<2_000 {
        group.addTask {
          let key = call % occupancies.count
          try? await limiter.withPermit(key) { await Self.work(occupancies[key], yields: call % 3) }
        }
      }
    }
    for occupancy in occupancies { #expect(occupancy.most <= 2) }
    #expect(limiter.inFlightCount == 0)
    #expect(limiter.keyCount == 0)
  }
}
