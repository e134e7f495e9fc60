#if PostgreSQL || Vapor
import NIOCore

/// Runs a task's jobs on an event loop: a task that talks to a channel of that loop writes to its
/// socket and is resumed with the answer on the loop's own thread, where a task on the global
/// executor wakes the loop for every write and is woken by it for every answer.
///
/// Task executors need macOS 15 / iOS 18; ``onEventLoop(_:taskExecutors:isolation:_:)`` and
/// `EventLoop.makeFutureWithTaskOnLoop(_:)` fall back to the global executor on older systems.
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
package final class EventLoopExecutor: TaskExecutor {
  package let eventLoop: any EventLoop

  package init(_ eventLoop: any EventLoop) {
    self.eventLoop = eventLoop
  }

  package func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
  }
}

/// Runs `body` with its jobs on `eventLoop` (``EventLoopExecutor``) where the system has task
/// executors (Linux; macOS 15, iOS 18 and later), and on the global executor before: the same
/// result, with more thread hops.
///
/// `taskExecutors: false` takes the older systems' path anywhere, for its tests.
package func onEventLoop<Result>(
  _ eventLoop: any EventLoop, taskExecutors: Bool = true, isolation: isolated (any Actor)? = #isolation,
  _ body: () async -> Result
) async -> Result {
  if taskExecutors, #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
    return await withTaskExecutorPreference(EventLoopExecutor(eventLoop), isolation: isolation, operation: body)
  }
  return await body()
}

extension EventLoop {
  /// NIO's `makeFutureWithTask(_:)`, with the task's jobs on this loop where the system has task
  /// executors: a task started from the loop's own thread costs no wake-up of another thread, and
  /// neither does the future it completes. On the global executor on older systems, or with
  /// `taskExecutors: false` (for its tests).
  package func makeFutureWithTaskOnLoop<Value: Sendable>(
    taskExecutors: Bool = true, _ body: @escaping @Sendable () async throws -> Value
  ) -> EventLoopFuture<Value> {
    guard taskExecutors, #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) else {
      return makeFutureWithTask(body)
    }
    let promise = makePromise(of: Value.self)
    Task(executorPreference: EventLoopExecutor(self)) {
      do {
        promise.succeed(try await body())
      } catch {
        promise.fail(error)
      }
    }
    return promise.futureResult
  }
}
#endif
