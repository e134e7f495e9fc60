#if PostgreSQL
import Logging
import Metrics
import Pace
import PostgresNIO

/// Runs a task's jobs on a connection's event loop: a lane that sends there writes to the socket
/// and is resumed with the answer on the loop's own thread, where a lane on the global executor
/// wakes the loop for every write and is woken by it for every answer.
///
/// Task executors need macOS 15 / iOS 18; ``onEventLoop(_:taskExecutors:isolation:_:)`` falls back to the
/// global executor on older systems.
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
final class EventLoopExecutor: TaskExecutor {
  let eventLoop: any EventLoop

  init(_ eventLoop: any EventLoop) {
    self.eventLoop = eventLoop
  }

  func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
  }
}

/// Runs `body` with its jobs on `eventLoop` (``EventLoopExecutor``) where the system has task
/// executors (Linux; macOS 15, iOS 18 and later), and on the global executor before: the same
/// decisions, with more thread hops.
///
/// `taskExecutors: false` takes the older systems' path anywhere, for its tests.
func onEventLoop<Result>(
  _ eventLoop: any EventLoop, taskExecutors: Bool = true, isolation: isolated (any Actor)? = #isolation,
  _ body: () async -> Result
) async -> Result {
  if taskExecutors, #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
    return await withTaskExecutorPreference(EventLoopExecutor(eventLoop), isolation: isolation, operation: body)
  }
  return await body()
}

/// One decision for the database: a stored key, its cost under its limit, whether it takes its
/// permits (a cost of 0 does not), and when its caller stops waiting.
struct DecisionRequest: Sendable, Equatable {
  let key: String
  let limit: StoredLimit
  let takes: Bool
  let deadline: ContinuousClock.Instant
  /// The instant to decide at, in microseconds since the Unix epoch, for tests; nil (always, in
  /// production) for the database's clock.
  var databaseNow: Int64? = nil
}

/// The database's answer to one decision: for a token bucket, the new TAT if granted (the current
/// one for a cost of 0), the current TAT if denied; for a window, non-nil `granted` if granted,
/// the permits the window held before it (`used`) and, denied, the wait in microseconds. Then the
/// deciding clock, whether the row's lock came after the budget, and when the batch was sent.
struct DecisionAnswer: Sendable, Equatable {
  let granted: Int64?
  let current: Int64?
  let now: Int64
  let late: Bool
  var used: Int64? = nil
  var wait: Int64? = nil
  let sent: ContinuousClock.Instant
}

/// Sends the decisions of every caller of one store in batches: one statement per batch, on a few
/// lanes that each hold a pool connection while they have work (``BatchMachine`` decides the
/// batches).
///
/// A batch is sorted by key, call order kept within a key, so that every batch of every instance
/// locks rows in the same order and two batches never deadlock; the database decides a key's
/// requests in call order, each as the single statement would.
///
/// No task or timer per decision: the callers wait on continuations, the lanes are long-lived
/// tasks, and one watchdog task per store (parked while nobody waits; ended by ``shutdown()``)
/// answers the callers whose deadline passes with ``DatabaseTimeout``, so a pool that cannot
/// connect never holds a caller past its timeout. The database gives up on its own within the same budget, so a batch whose
/// callers have left takes nothing.
final class DecisionBatcher: Sendable {
  private struct Waiter {
    let request: DecisionRequest
    let continuation: CheckedContinuation<DecisionAnswer, any Error>
  }

  private struct State {
    var machine: BatchMachine<UInt64>
    var waiters: [UInt64: Waiter] = [:]
    var parkedLanes: [CheckedContinuation<Void, Never>] = []
    /// The lanes' tasks, which ``shutdown()`` awaits.
    var laneTasks: [Task<Void, Never>] = []
    var nextID: UInt64 = 0
    /// The watchdog's task, started with the first decision and ended by ``shutdown()``.
    var watchdog: Task<Void, Never>?
    /// The watchdog, parked while nobody waits.
    var parkedWatchdog: CheckedContinuation<Void, Never>?
    var batchesSent = 0
    /// Whether ``shutdown()`` was called: no decision is taken any more, the lanes end.
    var closed = false
  }

  /// What a lane does next.
  private enum Work {
    case send([UInt64])
    case park
    case stop
  }

  private let state: LockedState<State>
  private let client: PostgresClient
  private let table: TableName
  /// The batch function's call, for every batch.
  private let batchSQL: String
  /// Taken off the budget the database gets: it must answer before the caller stops waiting, the
  /// way back included.
  private let margin: Duration
  private let roundTrips: Counter
  private let logger: Logger
  /// Where the lanes connect on their own, instead of leasing from `client`'s pool.
  private let direct: PostgresConnection.Configuration?
  /// The names of the store's prepared statement.
  let names: StatementNames

  /// A batcher that sends `batchSQL` (binds: ``PostgresRateLimitStore/batchBindings(_:budget:)``;
  /// rows: index, granted, current, now, late, used, wait) on `client`, as a prepared statement
  /// named after `table`.
  init(
    client: PostgresClient, direct: PostgresConnection.Configuration?, table: TableName, batchSQL: String,
    margin: Duration, maxBatch: Int, maxLanes: Int, roundTrips: Counter, logger: Logger
  ) {
    self.direct = direct
    self.names = StatementNames(logger: logger)
    self.state = LockedState(State(machine: BatchMachine(maxBatch: maxBatch, maxLanes: maxLanes)))
    self.client = client
    self.table = table
    self.batchSQL = batchSQL
    self.margin = margin
    self.roundTrips = roundTrips
    self.logger = logger
  }

  /// How many batches the lanes took to send (tests count round trips with it).
  var batchesSent: Int { state.withLock { $0.batchesSent } }

  /// The database's answer to `request`, or the error of its batch (a serialization failure or a
  /// deadlock retried once), ``DatabaseTimeout`` at its deadline, ``StoreShutDown`` after
  /// ``shutdown()``, or `CancellationError`.
  func decide(_ request: DecisionRequest) async throws -> DecisionAnswer {
    let id = state.withLock { state in
      state.nextID &+= 1
      return state.nextID
    }
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { continuation in
        let (submitted, lane, watchdog) = state.withLock {
          state -> (
            BatchMachine<UInt64>.Submitted?, CheckedContinuation<Void, Never>?, CheckedContinuation<Void, Never>?
          )
          in
          guard !state.closed else { return (nil, nil, nil) }
          state.waiters[id] = Waiter(request: request, continuation: continuation)
          let submitted = state.machine.submit(id)
          let lane = submitted == .wakeLane ? state.parkedLanes.popLast() : nil
          if state.watchdog == nil {
            // Created under the lock, so that ``shutdown()`` always finds it to await.
            state.watchdog = Task { await self.watch() }
          }
          defer { state.parkedWatchdog = nil }
          return (submitted, lane, state.parkedWatchdog)
        }
        guard let submitted else {
          continuation.resume(throwing: StoreShutDown())
          return
        }
        lane?.resume()
        watchdog?.resume()
        if submitted == .startLane {
          let task = Task { await self.lane() }
          state.withLock { $0.laneTasks.append(task) }
        }
        // A caller cancelled before it was registered is not seen by the handler below.
        if Task.isCancelled { fail([id], with: CancellationError()) }
      }
    } onCancel: {
      fail([id], with: CancellationError())
    }
  }

  /// Answers the waiters `ids` still waiting with `error`, and forgets those not yet sent.
  private func fail(_ ids: [UInt64], with error: any Error) {
    let waiters = state.withLock { state in
      let removed = ids.compactMap { state.waiters.removeValue(forKey: $0) }
      state.machine.remove(ids)
      return removed
    }
    for waiter in waiters { waiter.continuation.resume(throwing: error) }
  }

  private func answer(_ id: UInt64, _ answer: DecisionAnswer) {
    let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
    waiter?.continuation.resume(returning: answer)
  }

  /// Stops taking decisions, answers those not yet sent with ``StoreShutDown``, and returns once
  /// every lane has ended and closed its connection, and the watchdog has ended; the batches in
  /// flight are answered first (the watchdog answers their callers' deadlines meanwhile).
  func shutdown() async {
    let (lanes, parked, queued, watchdog) = state.withLock { state in
      state.closed = true
      var queued: [UInt64] = []
      while let batch = state.machine.next() { queued += batch }
      defer { state.parkedLanes = [] }
      return (state.laneTasks, state.parkedLanes, queued, state.watchdog)
    }
    if !lanes.isEmpty || !queued.isEmpty {
      logger.debug(
        "rate-limit store shutting down", metadata: ["pace.lanes": "\(lanes.count)", "pace.unsent": "\(queued.count)"])
    }
    fail(queued, with: StoreShutDown())
    for lane in parked { lane.resume() }
    for lane in lanes { await lane.value }
    // Every caller is answered now: the watchdog ends, woken if it is parked or asleep.
    let parkedWatchdog = state.withLock { state in
      defer { state.parkedWatchdog = nil }
      return state.parkedWatchdog
    }
    parkedWatchdog?.resume()
    watchdog?.cancel()
    await watchdog?.value
  }

  private func nextWork() -> Work {
    state.withLock { state in
      if state.closed { return .stop }
      return state.machine.next().map(Work.send) ?? .park
    }
  }

  /// Sends batches while there are any, parks while there are none, ends after ``shutdown()``.
  private func lane() async {
    if let direct {
      await directLane(direct)
      return
    }
    while true {
      let first: [UInt64]
      switch nextWork() {
      case .stop: return
      case .park:
        await park()
        continue
      case .send(let batch): first = batch
      }
      var unsent: [UInt64]? = first
      do {
        try await client.withConnection { connection in
          await onEventLoop(connection.eventLoop) {
            while let batch = unsent {
              unsent = nil
              // A connection that failed is given back: the pool replaces it.
              guard await send(batch, on: connection) else { break }
              unsent = state.withLock { $0.machine.next() }
            }
          }
        }
      } catch {
        if let unsent { fail(unsent, with: error) }
      }
    }
  }

  /// A lane on a connection of its own, which it opens when it has work and none is open: after
  /// an outage, the first batch (the circuit breaker's probe) reconnects at once, where a pool
  /// would wait for its reconnection backoff. It closes the connection when it ends.
  private func directLane(_ configuration: PostgresConnection.Configuration) async {
    var connection: PostgresConnection?
    var connections = 0
    while true {
      var batch: [UInt64]
      switch nextWork() {
      case .stop:
        if let open = connection { await close(open, why: "the store shut down") }
        return
      case .park:
        await park()
        continue
      case .send(let next): batch = next
      }
      do {
        // A connection the server closed while the lane was idle is replaced before it is used.
        if connection?.isClosed ?? true {
          connections += 1
          connection = try await PostgresConnection.connect(
            configuration: configuration, id: connections, logger: logger)
        }
      } catch {
        fail(batch, with: error)
        continue
      }
      guard let open = connection else { continue }
      let failed = await onEventLoop(open.eventLoop) { [batch] in
        var batch = batch
        while true {
          guard await send(batch, on: open) else { return true }
          guard let next = state.withLock({ $0.machine.next() }) else { return false }
          batch = next
        }
      }
      if failed {
        await close(open, why: "a decision failed on it")
        connection = nil
      }
    }
  }

  /// Closes a lane's own connection, logging a failure: the lane goes on without it either way.
  private func close(_ connection: PostgresConnection, why: String) async {
    do {
      try await connection.close()
    } catch {
      logger.warning(
        "closing a decision connection failed",
        metadata: errorMetadata(error).merging(["pace.reason": "\(why)"]) { $1 })
    }
  }

  private func park() async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let parked = state.withLock { state in
        guard !state.closed, state.machine.park() else { return false }
        state.parkedLanes.append(continuation)
        return true
      }
      if !parked { continuation.resume() }
    }
  }

  /// Sends one batch and answers its callers; false if the connection is no longer usable.
  private func send(_ ids: [UInt64], on connection: PostgresConnection) async -> Bool {
    var retried = false
    while true {
      let now = ContinuousClock.now
      let waiting = state.withLock { state in
        state.batchesSent += 1
        return ids.compactMap { id in state.waiters[id].map { (id, $0.request) } }
      }
      // Too late to ask: the database would not have the time to answer.
      let late = waiting.filter { now.duration(to: $0.1.deadline) - margin < .milliseconds(1) }
      fail(late.map(\.0), with: DatabaseTimeout())
      // By key, then by policy (each policy has its table: a total order of the rows locked), in
      // call order within both.
      let batch = waiting.filter { now.duration(to: $0.1.deadline) - margin >= .milliseconds(1) }
        .sorted { ($0.1.key, $0.1.limit.policy.rawValue, $0.0) < ($1.1.key, $1.1.limit.policy.rawValue, $1.0) }
      guard let deadline = batch.map(\.1.deadline).min(),
        let budget = (now.duration(to: deadline) - margin).wholeMicroseconds
      else { return true }
      let sent = ContinuousClock.now
      roundTrips.increment()
      do {
        var answers = [DecisionAnswer?](repeating: nil, count: batch.count)
        // Every batch, a lone decision too, calls the function: its statement names no table, so
        // neither its preparation nor its plan's check waits for a lock on the table (a
        // preparation is a transaction of its own, before the budget's clock starts); every wait
        // for the table comes inside the function, after it set its `lock_timeout`.
        let binds = PostgresRateLimitStore.batchBindings(batch.map(\.1), budget: budget)
        let rows = try await PreparedSQL("decide_batch", table: table, names: names, sql: batchSQL).execute(
          binds, on: connection, logger: logger)
        for try await row in rows {
          let (index, granted, current, now, late, used, wait) = try row.decode(
            (Int, Int64?, Int64?, Int64, Bool, Int64?, Int64?).self)
          guard answers.indices.contains(index - 1) else { continue }
          answers[index - 1] = DecisionAnswer(
            granted: granted, current: current, now: now, late: late, used: used, wait: wait, sent: sent)
        }
        for ((id, _), answer) in zip(batch, answers) {
          if let answer {
            self.answer(id, answer)
          } else {
            fail([id], with: PacePostgresError.unavailable(reason: "the decision returned no row"))
          }
        }
        return true
      } catch  where !retried && failureKind(of: error) == .retryOnce {
        retried = true
      } catch {
        fail(batch.map(\.0), with: error)
        return failureKind(of: error) != .unavailable
      }
    }
  }

  /// Answers the callers whose deadline passed, sleeping until the earliest; parks while nobody
  /// waits; ends after ``shutdown()``, which owns its task.
  private func watch() async {
    while true {
      enum Next {
        case stop, park
        case sleep(until: ContinuousClock.Instant)
      }
      let next: Next = state.withLock { state in
        if let earliest = state.waiters.values.lazy.map(\.request.deadline).min() { return .sleep(until: earliest) }
        return state.closed ? .stop : .park
      }
      switch next {
      case .stop:
        return
      case .park:
        // Nobody waits: park until a decision comes, or ``shutdown()``.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
          let parked = state.withLock { state in
            guard !state.closed, state.waiters.isEmpty else { return false }
            state.parkedWatchdog = continuation
            return true
          }
          if !parked { continuation.resume() }
        }
        if state.withLock({ $0.closed && $0.waiters.isEmpty }) { return }
      case .sleep(let earliest):
        // One sleep for every waiter rather than a timer per decision: a decision costs no task.
        // Only ``shutdown()`` cancels it, once every caller is answered.
        guard await Task.sleepUnlessCancelled(for: ContinuousClock.now.duration(to: earliest)) else {
          // Cancelled by ``shutdown()`` once every lane has ended: whoever still waits is answered.
          fail(state.withLock { Array($0.waiters.keys) }, with: StoreShutDown())
          return
        }
        let now = ContinuousClock.now
        let expired = state.withLock { state in state.waiters.filter { $0.value.request.deadline <= now }.map(\.key) }
        fail(expired, with: DatabaseTimeout())
      }
    }
  }
}
#endif
