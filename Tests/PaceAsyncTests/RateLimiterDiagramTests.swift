import PaceTestSupport
import PaceTesting
import Testing

@testable import Pace

/// The policy diagrams of RateLimiter.md, run through `RateLimiter(limit:)` on virtual time. One
/// character is 100 ms; every request is an `acquire()` made at its instant.
@Suite(.timeLimit(.minutes(3))) struct RateLimiterDiagramTests {
  let step: Int64 = 100

  #if compiler(>=6.2)  // Task.immediate
  /// The instants at which `limit` grants the requests of `diagram`, rendered as a diagram.
  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  func grants(_ diagram: String, under limit: RateLimit) async throws -> String {
    let scheduler = TestScheduler()
    let limiter = RateLimiter(limit: limit, clock: scheduler)
    var requests: [(name: String, task: Task<Void, any Error>)] = []
    var grants: [Emission<String>] = []
    func record() {
      while grants.count < requests.count - limiter.waitingCount {
        grants.append(.value(requests[grants.count].name, at: scheduler.now))
      }
    }
    for (time, event) in Marbles.parse(diagram, step: step) {
      while let deadline = scheduler.nextDeadline, deadline <= ms(time) {
        scheduler.advance(to: deadline)
        record()
      }
      scheduler.advance(to: ms(time))
      guard case .element(let name) = event else { continue }
      requests.append((name, Task.immediate { try await limiter.acquire() }))
      record()
    }
    while let deadline = scheduler.nextDeadline {
      scheduler.advance(to: deadline)
      record()
    }
    for request in requests { try await request.task.value }
    return Marbles.render(grants, step: step)
  }

  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func slidingWindowDiagram() async throws {
    let grants = try await grants("-------[abcdef]---g", under: .slidingWindow(permits: 3, per: .seconds(1)))
    #expect(grants == "-------[abc]---------[def]---------g")
  }

  @available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)  // Task.immediate
  @Test func fixedWindowDiagram() async throws {
    let grants = try await grants("-------[abcdef]---g", under: .fixedWindow(permits: 3, per: .seconds(1)))
    #expect(grants == "-------[abc]--[def]---------g")
  }
  #endif
}
