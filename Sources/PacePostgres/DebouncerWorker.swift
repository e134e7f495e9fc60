#if PostgreSQL
import Foundation
import Pace

/// The debouncer's worker as a state machine: how many keys it may claim, when it polls again,
/// which outage and shutdown events deserve a log line. It holds no task and reads no clock:
/// ``DebouncerWorker`` performs its answers.
struct DebouncerWorkerState: Sendable, Equatable {
  /// The most executions running at once on this instance.
  let maximumConcurrentExecutions: Int
  /// The wait when nothing is due, or every slot is taken, or the database is unavailable.
  let pollInterval: Duration
  /// The wait after the database refused the claim statement (a missing table, a permission).
  let refusalBackoff: Backoff
  /// The executions claimed and not yet finished.
  private(set) var executing = 0
  /// Whether a shutdown stopped the claiming.
  private(set) var isDraining = false
  /// When the current outage began; nil while the database answers.
  private var outageSince: ContinuousClock.Instant?
  /// Consecutive refusals of the claim statement.
  private var refusals = 0
  /// How long after its first claim the worker waits quietly for its tables: a worker that starts
  /// beside the migration that makes them (a `ServiceGroup`, Vapor's lifecycle) claims first.
  let startupGrace: Duration
  /// The ``startupGrace`` of a debouncer's worker.
  static let defaultStartupGrace = Duration.seconds(30)
  /// When the first claim statement answered or failed.
  private var firstClaimAt: ContinuousClock.Instant?
  /// Whether the wait for the tables was logged.
  private var loggedWaitForTables = false

  init(
    maximumConcurrentExecutions: Int, pollInterval: Duration, refusalBackoff: Backoff,
    startupGrace: Duration = Self.defaultStartupGrace
  ) {
    self.maximumConcurrentExecutions = maximumConcurrentExecutions
    self.pollInterval = pollInterval
    self.refusalBackoff = refusalBackoff
    self.startupGrace = startupGrace
  }

  /// What the worker does next.
  enum Next: Sendable, Equatable {
    /// Claim up to `limit` due keys.
    case claim(limit: Int)
    /// Wait, then ask again.
    case sleep(Duration)
    /// Stop claiming: the worker is shutting down.
    case stop
  }

  /// An event worth one log line.
  enum Log: Sendable, Equatable {
    /// The claim statement found the database unavailable, after it had answered.
    case outageStarted
    /// The database answered again after an outage of `after`.
    case outageEnded(after: Duration)
    /// The database refused the claim statement for the `refusals`-th time in a row.
    case claimRefused(refusals: Int, retryAfter: Duration)
    /// The tables do not exist yet, within the startup grace: the migration has not run yet.
    case waitingForTables
  }

  /// The answer to an event: the lines to log, then what to do.
  struct Step: Sendable, Equatable {
    var logs: [Log] = []
    var next: Next
  }

  /// Why a claim statement failed.
  enum ClaimFailure: Sendable, Equatable {
    /// The database could not be reached or did not answer in time.
    case unavailable
    /// The database answered with an error about the statement.
    case refused
    /// The database answered that the debouncer's tables do not exist (SQLSTATE 42P01).
    case tablesMissing
  }

  /// What to do now.
  func next() -> Next {
    if isDraining { return .stop }
    let free = maximumConcurrentExecutions - executing
    return free > 0 ? .claim(limit: free) : .sleep(pollInterval)
  }

  /// The claim statement returned `count` keys of at most `limit`.
  mutating func claimed(_ count: Int, limit: Int, now: ContinuousClock.Instant) -> Step {
    if firstClaimAt == nil { firstClaimAt = now }
    executing += count
    refusals = 0
    var step = Step(logs: databaseAnswered(now: now), next: next())
    // Fewer keys than asked for: none other is due now.
    if count < limit, step.next != .stop { step.next = .sleep(pollInterval) }
    return step
  }

  /// The claim statement failed.
  mutating func claimFailed(_ failure: ClaimFailure, now: ContinuousClock.Instant) -> Step {
    if firstClaimAt == nil { firstClaimAt = now }
    var failure = failure
    if failure == .tablesMissing {
      guard let first = firstClaimAt, now - first < startupGrace else {
        // Past the grace: a missing table is a fault (nobody migrates), reported as a refusal.
        failure = .refused
        return claimFailed(failure, now: now)
      }
      var logs = databaseAnswered(now: now)
      if !loggedWaitForTables {
        loggedWaitForTables = true
        logs.append(.waitingForTables)
      }
      return Step(logs: logs, next: isDraining ? .stop : .sleep(pollInterval))
    }
    switch failure {
    case .unavailable:
      var logs: [Log] = []
      if outageSince == nil {
        outageSince = now
        logs.append(.outageStarted)
      }
      return Step(logs: logs, next: isDraining ? .stop : .sleep(pollInterval))
    case .refused:
      var logs = databaseAnswered(now: now)
      refusals += 1
      let wait = refusalBackoff.delay(afterFailures: refusals)
      logs.append(.claimRefused(refusals: refusals, retryAfter: wait))
      return Step(logs: logs, next: isDraining ? .stop : .sleep(wait))
    case .tablesMissing:
      return Step(logs: [], next: isDraining ? .stop : .sleep(pollInterval))  // handled above
    }
  }

  /// An execution finished (acknowledged, retried, dead-lettered, released or lost).
  mutating func executionFinished() {
    precondition(executing > 0, "DebouncerWorkerState: an execution finished that never started")
    executing -= 1
  }

  /// Stops the claiming; returns whether this call stopped it.
  mutating func shutDown() -> Bool {
    defer { isDraining = true }
    return !isDraining
  }

  /// Whether a claimed execution may start its handler: not once shutting down, so that its
  /// claim goes back to the table for another instance.
  var mayStartHandler: Bool { !isDraining }

  /// Ends the outage, if there was one.
  private mutating func databaseAnswered(now: ContinuousClock.Instant) -> [Log] {
    guard let since = outageSince else { return [] }
    outageSince = nil
    return [.outageEnded(after: now - since)]
  }
}

/// Performs a ``DebouncerWorkerState``'s answers: keeps the executions' tasks, wakes the claimer
/// on shutdown, and waits for the executions within a grace period.
final class DebouncerWorker: Sendable {
  private struct Box {
    var machine: DebouncerWorkerState
    var executions: [Int: Task<Void, Never>] = [:]
    var nextID = 0
    var sleeper: Task<Void, Never>?
  }

  private let box: LockedState<Box>

  init(_ machine: DebouncerWorkerState) {
    box = LockedState(Box(machine: machine))
  }

  /// Asks the machine, under the lock.
  func withMachine<Result>(_ body: (inout DebouncerWorkerState) -> Result) -> Result {
    box.withLock { body(&$0.machine) }
  }

  /// Starts an execution in a task of its own (not a child of the caller: a cancelled worker
  /// lets it finish within the grace period); the machine counted it when it was claimed.
  func start(_ operation: @escaping @Sendable () async -> Void) {
    box.withLock { box in
      let id = box.nextID
      box.nextID += 1
      // The task's last step takes the lock, so it cannot run before this registration ends.
      box.executions[id] = Task {
        await operation()
        self.box.withLock { box in
          box.executions[id] = nil
          box.machine.executionFinished()
        }
      }
    }
  }

  /// Waits `duration`, or less if the worker shuts down meanwhile.
  func sleep(for duration: Duration) async {
    let sleeper: Task<Void, Never>? = box.withLock { box in
      guard !box.machine.isDraining else { return nil }
      // `shutDown()` cancels the sleep: the claimer wakes at once.
      let sleeper = Task { _ = await Task.sleepUnlessCancelled(for: duration) }
      box.sleeper = sleeper
      return sleeper
    }
    await sleeper?.value
  }

  /// Stops the claiming and wakes the claimer; returns whether this call stopped it.
  @discardableResult
  func shutDown() -> Bool {
    box.withLock { box in
      box.sleeper?.cancel()
      return box.machine.shutDown()
    }
  }

  /// The executions still running.
  var running: Int { box.withLock { $0.executions.count } }

  /// Waits until every execution has finished or `grace` has passed, even in a cancelled task;
  /// returns whether they all finished.
  func drain(within grace: Duration) async -> Bool {
    let executions = box.withLock { Array($0.executions.values) }
    if executions.isEmpty { return true }
    let once = ResumeOnce()
    var waiters: [Task<Void, Never>] = []
    let finished = await withCheckedContinuation { continuation in
      once.set(continuation)
      waiters = [
        Task {
          for execution in executions { await execution.value }
          once.resume(true)
        },
        Task {
          await Task.sleepUnlessCancelled(for: grace)
          once.resume(false)
        },
      ]
    }
    for waiter in waiters { waiter.cancel() }
    return finished
  }

  /// Cancels the executions still running; returns how many.
  func cancelExecutions() -> Int {
    box.withLock { box in
      for execution in box.executions.values { execution.cancel() }
      return box.executions.count
    }
  }
}

/// A continuation resumed by the first of several racers.
private final class ResumeOnce: Sendable {
  private let continuation = LockedState<CheckedContinuation<Bool, Never>?>(nil)

  func set(_ continuation: CheckedContinuation<Bool, Never>) {
    self.continuation.withLock { $0 = continuation }
  }

  func resume(_ value: Bool) {
    continuation.withLock { continuation in
      defer { continuation = nil }
      return continuation
    }?.resume(returning: value)
  }
}
#endif
