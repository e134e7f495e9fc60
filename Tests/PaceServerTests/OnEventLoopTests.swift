#if PostgreSQL && Vapor
import NIOCore
import PostgresNIO
import Testing

@testable import PacePostgres

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
}
#endif
