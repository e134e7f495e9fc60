import PaceTestSupport
import PaceTesting

@testable import Pace

/// What ``AsyncDebouncer`` and ``AsyncThrottler`` have in common, for the tests.
protocol AsyncWorkPacing<Input, Output>: Sendable {
  associatedtype Input: Sendable
  associatedtype Output: Sendable
  func call(_ input: Input, isolation: isolated (any Actor)?) async throws -> Output
  func submit(_ input: Input) -> Task<Output, any Error>
  var invocationCountForTesting: Int { get }
  var tasksForTesting: [Task<Void, Never>] { get }
}

extension AsyncDebouncer: AsyncWorkPacing {
  var invocationCountForTesting: Int { pacer.invocationCountForTesting }
  var tasksForTesting: [Task<Void, Never>] { pacer.tasksForTesting }
}

extension AsyncThrottler: AsyncWorkPacing {
  var invocationCountForTesting: Int { pacer.invocationCountForTesting }
  var tasksForTesting: [Task<Void, Never>] { pacer.tasksForTesting }
}

/// Drives an async pacer on virtual time and records each invocation's input with the virtual
/// time it started at.
///
/// Calls are made with `submit`, so each registers synchronously at the current virtual time.
/// Time moves one timer deadline at a time. After each step the harness reads how many
/// invocations the pacer started (synchronously: their tasks are created inside the call or the
/// timer) and awaits exactly that many reports from the operation, which reads the time before
/// the harness moves it again. No polling, no yielding, no waiting on a guess.
final class WorkTimeline<Input: Sendable & Equatable> {
  let scheduler = TestScheduler()
  let started = Signals<Emission<Input>>()
  private(set) var invocations: [Emission<Input>] = []
  private(set) var callers: [Task<Input, any Error>] = []
  private var counted = 0

  /// The operation to pace: reports its start, returns its input.
  var operation: @Sendable (Input) async throws -> Input {
    { [started, scheduler] input in
      started.post(.value(input, at: scheduler.now))
      return input
    }
  }

  /// Plays `calls` (times in ms) through `pacer`, then every timer left; returns the invocations.
  func run(_ calls: [(Int64, Input)], through pacer: some AsyncWorkPacing<Input, Input>) async -> [Emission<Input>] {
    for (time, input) in calls {
      await advance(to: ms(time), pacer)
      callers.append(pacer.submit(input))
      await record(pacer)
    }
    while let deadline = scheduler.nextDeadline {
      scheduler.advance(to: max(deadline, scheduler.now))
      await record(pacer)
    }
    for task in pacer.tasksForTesting { await task.value }
    return invocations
  }

  func advance(to target: PaceInstant, _ pacer: some AsyncWorkPacing) async {
    while let deadline = scheduler.nextDeadline, deadline <= target {
      scheduler.advance(to: max(deadline, scheduler.now))
      await record(pacer)
    }
    scheduler.advance(to: max(target, scheduler.now))
    await record(pacer)
  }

  private func record(_ pacer: some AsyncWorkPacing) async {
    let count = pacer.invocationCountForTesting
    while counted < count {
      invocations.append(await started.next())
      counted += 1
    }
  }

  /// What each caller got: its result, or `nil` for an error.
  func results() async -> [Input?] {
    var results: [Input?] = []
    for caller in callers { results.append(try? await caller.value) }
    return results
  }
}
