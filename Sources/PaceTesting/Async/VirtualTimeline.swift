/// Records what an async sequence emits, with the exact virtual time of each emission, while a
/// test moves a `TestScheduler`'s time.
///
/// The timeline reads the sequence in a task of its own, and that task runs *only* inside the
/// timeline's methods, on the test's thread: its jobs go to an executor that the timeline drains
/// after every step of virtual time. So when a method returns, every element the sequence
/// delivered so far is in ``emissions``, stamped with the time it was delivered at, and the
/// reading task is waiting for the next one. No `Task.yield()`, no sleeping, no polling; the
/// same test passes the same way on a loaded machine:
///
/// ```swift
/// @Test func typingIsDebounced() async {
///   let scheduler = TestScheduler()
///   let queries = TestStream<String>()
///   let timeline = VirtualTimeline(scheduler: scheduler,
///                                  queries.debounced(for: .milliseconds(300), clock: scheduler))
///
///   await queries.send("s")                      // returns once `.debounced` has seen "s"
///   timeline.advance(by: .milliseconds(100))
///   await queries.send("sw")
///   timeline.advance(by: .milliseconds(299))
///   #expect(timeline.emissions.isEmpty)
///   timeline.advance(by: .milliseconds(1))       // 300 ms after "sw"
///   #expect(timeline.emissions == [.value("sw", at: PaceInstant(.milliseconds(400)))])
///
///   queries.finish()
///   await timeline.waitForEnd()
///   #expect(timeline.emissions.last == .finished(at: PaceInstant(.milliseconds(400))))
/// }
/// ```
///
/// Drive time with the timeline's ``advance(by:)``, ``advance(to:)`` and ``runTimers()``: they
/// move the scheduler one deadline at a time and let the reader catch up after each, so two
/// emissions at different times are never stamped with the later one. Feed the sequence with a
/// ``TestStream``, whose `send` returns once the operator has processed the element. After the
/// upstream ends, ``waitForEnd()`` reads the rest without moving time.
///
/// Works from `@MainActor` and nonisolated Swift Testing tests and from XCTest. The sequence's
/// elements are read outside any actor; a sequence whose elements are produced on the main
/// actor (a view model's loop) is better observed through what that loop does.
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
public final class VirtualTimeline<Element: Equatable & Sendable>: Sendable {
  private struct State {
    var log: [Emission<Element>] = []
    var ended = false
  }

  /// The scheduler whose time stamps the emissions.
  public let scheduler: TestScheduler
  private let executor = ManualTaskExecutor()
  private let state = LockedState(State())
  private let reader: Task<Void, Never>

  /// Starts reading `sequence`, and lets the reader run until it waits for its first element.
  ///
  /// - Parameters:
  ///   - scheduler: The scheduler that the sequence's operators use as their clock.
  ///   - sequence: The sequence to record; the timeline makes its one iterator.
  public init<Sequence: AsyncSequence & Sendable>(scheduler: TestScheduler, _ sequence: Sequence)
  where Sequence.Element == Element {
    self.scheduler = scheduler
    let state = state
    reader = Task(executorPreference: executor) {
      do {
        for try await element in sequence {
          state.withLock { $0.log.append(.value(element, at: scheduler.now)) }
        }
        state.withLock {
          $0.log.append(.finished(at: scheduler.now))
          $0.ended = true
        }
      } catch {
        state.withLock {
          $0.log.append(.failed(at: scheduler.now))
          $0.ended = true
        }
      }
    }
    executor.runPending()
  }

  deinit {
    // The reader may be suspended inside the sequence: cancel it, and run it to its end here,
    // since nobody else runs this executor's jobs.
    reader.cancel()
    executor.runPending()
  }

  /// Everything recorded so far, in order. Reading it first lets the reader take what the
  /// sequence has already delivered (after a ``TestStream/send(_:)``, say).
  public var emissions: [Emission<Element>] {
    executor.runPending()
    return state.withLock { $0.log }
  }

  /// The elements recorded so far, without their times.
  public var values: [Element] {
    emissions.compactMap(\.value)
  }

  /// Whether the sequence has ended (finished or failed).
  public var isFinished: Bool {
    executor.runPending()
    return state.withLock { $0.ended }
  }

  /// Moves time forward by `duration`, one timer deadline at a time, recording what is emitted.
  public func advance(by duration: Duration = .zero) {
    precondition(duration >= .zero, "VirtualTimeline.advance(by:): duration must not be negative (got \(duration))")
    advance(to: scheduler.now.advanced(by: duration))
  }

  /// Moves time forward to `instant`, one timer deadline at a time, recording what is emitted.
  public func advance(to instant: PaceInstant) {
    precondition(instant >= scheduler.now, "VirtualTimeline.advance(to:): \(instant) is before now (\(scheduler.now))")
    executor.runPending()
    while let deadline = scheduler.nextDeadline, deadline <= instant {
      scheduler.advance(to: max(deadline, scheduler.now))
      executor.runPending()
    }
    scheduler.advance(to: instant)
    executor.runPending()
  }

  /// Fires every timer left, in deadline order, recording what is emitted.
  ///
  /// Like `TestScheduler.run()`, this runs forever if the timers keep scheduling timers.
  public func runTimers() {
    executor.runPending()
    while let deadline = scheduler.nextDeadline {
      scheduler.advance(to: max(deadline, scheduler.now))
      executor.runPending()
    }
  }

  /// Returns once the sequence has ended, recording what it emits meanwhile; time does not move.
  ///
  /// Call it after ending the upstream (``TestStream/finish()``) or cancelling (``cancel()``):
  /// an upstream's end reaches the reader from another task, so the timeline waits for it
  /// rather than assuming it has arrived. If nothing will end the sequence, this never returns.
  public func waitForEnd() async {
    while true {
      executor.runPending()
      if state.withLock({ $0.ended }) { return }
      await executor.waitForJob()
    }
  }

  /// Cancels the reader, which ends the sequence the way a cancelled `for await` loop does.
  public func cancel() {
    reader.cancel()
    executor.runPending()
  }
}
