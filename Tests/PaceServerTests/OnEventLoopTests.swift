#if PostgreSQL && Vapor
import NIOCore
import PostgresNIO
import Testing

import PaceEventLoops

/// The decision lanes' executor choice: on the connection's event loop where task executors exist
/// (Linux; macOS 15, iOS 18 and later), on the global executor before, with the same result.
@Suite struct OnEventLoopTests {
  @Test func withTaskExecutorsTheBodyRunsOnTheEventLoopAcrossSuspensions() async throws {
    let loop = PostgresConnection.defaultEventLoopGroup.next()
    let (before, after, result) = await onEventLoop(loop) {
      let before = loop.inEventLoop
      await Task.yield()
      return (before, loop.inEventLoop, 42)
    }
    #expect(before && after)
    #expect(result == 42)
  }

  @Test func theOlderSystemsPathRunsTheBodyOffTheEventLoopWithTheSameResult() async throws {
    let loop = PostgresConnection.defaultEventLoopGroup.next()
    let (before, after, result) = await onEventLoop(loop, taskExecutors: false) {
      let before = loop.inEventLoop
      await Task.yield()
      return (before, loop.inEventLoop, 42)
    }
    #expect(!before && !after)
    #expect(result == 42)
  }

  /// PaceVapor's futures for a store's decision: on the loop with task executors, on the global
  /// executor without; the value or the error either way.
  @Test(arguments: [true, false]) func aFutureWithATaskOnTheLoopCarriesItsValueOrItsError(taskExecutors: Bool)
    async throws
  {
    struct Failure: Error {}
    let loop = PostgresConnection.defaultEventLoopGroup.next()
    let ranOnTheLoop = try await loop.makeFutureWithTaskOnLoop(taskExecutors: taskExecutors) {
      await Task.yield()
      return loop.inEventLoop
    }.get()
    #expect(ranOnTheLoop == taskExecutors)
    await #expect(throws: Failure.self) {
      try await loop.makeFutureWithTaskOnLoop(taskExecutors: taskExecutors) { () async throws -> Int in
        throw Failure()
      }.get()
    }
  }
}
#endif
