import Pace
import PaceHTTPClient
import PaceTestSupport
import PaceTesting
import Testing

/// Starts sends from one actor, in order.
actor OrderedSender {
  let requests: PacedRequests
  let started: LockedRecorder<Int>

  init(requests: PacedRequests, started: LockedRecorder<Int>) {
    self.requests = requests
    self.started = started
  }

  /// Starts send `index` in a task on this actor; the task reaches `send` in the order started.
  func start(_ index: Int, deadline: Duration?) -> Task<Int, any Error> {
    Task {
      try await requests.send(key: "k", idempotent: true, deadline: deadline) { [started] in
        started.record(index)
        return (index, ResponseHead(status: 200, headerFields: Self.oneASecond))
      }.0
    }
  }

  /// A quota of one a second, spent: each request waits for the next second.
  static let oneASecond = [
    (name: "RateLimit-Policy", value: "\"p\";q=1;w=1"), (name: "RateLimit", value: "\"p\";r=0;t=1"),
  ]
}

/// `send` takes its caller's isolation, as `ServerPacedLimiter.acquire` does: sends started in
/// order from one actor reach the key's limiter, and start their attempts, in that order.
@Suite(.timeLimit(.minutes(1))) struct PacedRequestsOrderTests {
  let scheduler = TestScheduler()

  /// 20 sends started in order from one actor on a key paced to one a second start their
  /// attempts in that order, one a second; with a deadline too (the request then waits in a task
  /// of its own, which a deadline can cancel alone).
  @Test(arguments: [nil, Duration.seconds(60)])
  func sendsStartedInOrderFromOneActorStartInThatOrder(deadline: Duration?) async throws {
    let scheduler = scheduler
    let requests = PacedRequests(
      budget: nil, clock: scheduler, unixTime: { .seconds(1_700_000_000) + scheduler.now.offset })
    let started = LockedRecorder<Int>(scheduler: scheduler)
    let sender = OrderedSender(requests: requests, started: started)
    // The first answer tells the quota, spent until 1 s.
    _ = try await sender.start(-1, deadline: nil).value
    var tasks: [Task<Int, any Error>] = []
    for index in 0..<20 { tasks.append(await sender.start(index, deadline: deadline)) }
    await scheduler.waitForSuspendedCallers(20)
    for second in 1...20 {
      // The limiter arms the key's timer just after the answer that spent the quota is recorded:
      // moved on before, time would pass the instant with nothing scheduled there.
      await scheduler.advance(toScheduled: ms(Int64(second) * 1000))
      await started.waitForValues(second + 1)
    }
    for (index, task) in tasks.enumerated() { #expect(try await task.value == index) }
    #expect(started.values == [-1] + Array(0..<20))
    #expect(started.times == (0...20).map { ms(Int64($0) * 1000) })
  }
}
