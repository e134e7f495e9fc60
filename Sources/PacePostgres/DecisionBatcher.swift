#if PostgreSQL
import Logging
import Metrics
import Pace
import PaceEventLoops
import PostgresNIO

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
  /// How many decisions the statement that answered held, and how many statements were sent for
  /// it (2 after a serialization failure or a deadlock): what a decision's span says.
  var batchSize = 1
  var roundTrips = 1
}

/// Sends the decisions of every caller of one store in batches: one statement per batch, on a few
/// lanes that each hold a connection while they have work (``DecisionBatchMachine`` decides the
/// batches).
///
/// Its long-lived tasks, the lanes and the watchdog, are started by ``start()`` (the store's
/// `run()` calls it) and ended by ``shutdown()``, which awaits them; a decision never starts one.
/// Before ``start()``, a decision is sent alone (``decideAlone(_:)``): a connection leased from the
/// pool for its one statement, within its deadline.
///
/// A lane lives on its connection's event loop while it holds the connection, and parks there
/// when it has nothing to send: a lone caller's decision wakes it with one job on that loop, which
/// writes the statement at once, and is answered from the loop; the loop is the only thread
/// between the caller and the database, as it is for a caller that queries the connection itself.
/// A lane on a pool connection gives it back once it has been idle for ``linger``.
///
/// A batch is sorted by key, call order kept within a key, so that every batch of every instance
/// locks rows in the same order and two batches never deadlock; the database decides a key's
/// requests in call order, each as the single statement would.
///
/// No task or timer per decision: the callers wait on continuations, the lanes are long-lived
/// tasks, and one watchdog task per store (parked while nobody waits) answers the callers whose
/// deadline passes with ``DatabaseTimeout``, so a pool that cannot connect never holds a caller
/// past its timeout. The database gives up on its own within the same budget, so a batch whose
/// callers have left takes nothing.
final class DecisionBatcher: Sendable {
  /// A caller waiting for its answer. Its continuation (and a parked lane's) is unsafe rather than
  /// checked, which allocates for every decision: each is resumed exactly once, by whoever removes
  /// it from the state under the lock.
  struct Waiter {
    let request: DecisionRequest
    let continuation: UnsafeContinuation<DecisionAnswer, any Error>
  }

  /// A lane waiting for work: woken with true when a request comes (or at shutdown), with false
  /// to give its pool connection back after it lingered idle.
  struct ParkedLane {
    let lane: Int
    /// Since when the lane has waited holding a connection; nil for a lane without one.
    let holdingSince: NIODeadline?
    let continuation: UnsafeContinuation<Bool, Never>
  }

  struct State {
    var machine: DecisionBatchMachine<UInt64>
    var waiters: [UInt64: Waiter] = [:]
    var parkedLanes: [ParkedLane] = []
    /// The lanes that hold a pool connection now.
    var holding: Set<Int> = []
    /// The lanes whose linger check is scheduled on their connection's event loop: one at a time.
    var lingerChecks: Set<Int> = []
    /// How many connections the lanes took, from the pool or opened (tests read it).
    var connectionsTaken = 0
    /// The lanes' tasks, started by ``start()``, which ``shutdown()`` awaits.
    var laneTasks: [Task<Void, Never>] = []
    var nextID: UInt64 = 0
    /// The watchdog's task, started by ``start()`` and ended by ``shutdown()``.
    var watchdog: Task<Void, Never>?
    /// The watchdog, parked while nobody waits.
    var parkedWatchdog: CheckedContinuation<Void, Never>?
    var batchesSent = 0
    /// Whether ``start()`` was called: decisions go to the lanes.
    var started = false
    /// Whether ``shutdown()`` was called: no decision is taken any more, the lanes end.
    var closed = false
    /// How many decisions were sent alone, before ``start()``: the thousandth is logged.
    var sentAlone = 0
    /// The database's clock against ``DecisionBatcher/origin``'s, for each batch's deadline.
    var clockBound = DatabaseClockBound()
  }

  /// What a lane does next.
  enum Work {
    case send([UInt64])
    case park
    case stop
    /// Give the pool connection back: it lingered idle.
    case release
  }

  let state: LockedState<State>
  let client: PostgresClient
  let table: TableName
  /// The batch function's call, for every batch of more than one.
  let batchSQL: String
  /// Its overload's call, for a batch of one (``PostgresRateLimitStore/singleSQL(table:)``).
  let singleSQL: String
  /// Taken off the budget the database gets: it must answer before the caller stops waiting, the
  /// way back included.
  let margin: Duration
  /// How many lanes ``start()`` starts, hence the most connections used at once.
  let laneCount: Int
  let roundTrips: Counter
  let logger: Logger
  /// Where the lanes connect on their own, instead of leasing from `client`'s pool.
  let direct: PostgresConnection.Configuration?
  /// How long a lane keeps an idle pool connection before it gives it back: long enough that a
  /// lone caller's next decision finds it (a lease would cost a hop to the pool), short enough
  /// that the store holds no connection of a small pool for long once its decisions stop.
  let linger: TimeAmount
  /// The names of the store's prepared statement.
  let names: StatementNames
  /// The start of the timeline ``clockBound`` measures this process's clock on.
  let origin = ContinuousClock.now

  /// A batcher that sends `batchSQL` (binds: ``PostgresRateLimitStore/batchBindings(_:budget:deadline:)``;
  /// rows: index, granted, current, now, late, used, wait) on `client`, as a prepared statement
  /// named after `table`, up to `maximumBatch` decisions at once on `lanes` lanes.
  init(
    client: PostgresClient, direct: PostgresConnection.Configuration?, table: TableName, batchSQL: String,
    margin: Duration, maximumBatch: Int, lanes: Int, linger: TimeAmount = .milliseconds(500), roundTrips: Counter,
    logger: Logger
  ) {
    precondition(lanes > 0, "DecisionBatcher: lanes must be positive (got \(lanes))")
    self.direct = direct
    self.linger = linger
    self.names = StatementNames(logger: logger)
    self.state = LockedState(State(machine: DecisionBatchMachine(maximumBatch: maximumBatch)))
    self.client = client
    self.table = table
    self.batchSQL = batchSQL
    self.singleSQL = PostgresRateLimitStore.singleSQL(table: table)
    self.margin = margin
    self.laneCount = lanes
    self.roundTrips = roundTrips
    self.logger = logger
  }

  /// How many batches were sent, by the lanes or alone (tests count round trips with it).
  var batchesSent: Int { state.withLock { $0.batchesSent } }

  /// How many connections the lanes took from the pool or opened (tests count hops to the pool).
  var connectionsTaken: Int { state.withLock { $0.connectionsTaken } }

  /// Whether ``start()`` has started the lanes (and ``shutdown()`` has not ended them).
  var isRunning: Bool { state.withLock { $0.started && !$0.closed } }

  /// Starts the lanes, each parked without a connection until work comes, and the watchdog:
  /// decisions go to them from now on. False, starting nothing, if the batcher was started or shut
  /// down before.
  func start() -> Bool {
    state.withLock { state in
      guard !state.started, !state.closed else { return false }
      state.started = true
      // Created under the lock, so that ``shutdown()`` always finds them to await.
      state.watchdog = Task { await self.watch() }
      state.laneTasks = (0..<laneCount).map { number in Task { await self.lane(number) } }
      return true
    }
  }

  /// The database's answer to `request`, or the error of its batch (a serialization failure or a
  /// deadlock retried once), ``DatabaseTimeout`` at its deadline, ``StoreShutDown`` after
  /// ``shutdown()``, or `CancellationError`. Before ``start()``, it is sent alone
  /// (``decideAlone(_:)``).
  func decide(_ request: DecisionRequest) async throws -> DecisionAnswer {
    enum Path {
      case lanes(UInt64)
      case alone, closed
    }
    let (path, tell) = state.withLock { state -> (Path, Bool) in
      if state.closed { return (.closed, false) }
      guard state.started else {
        state.sentAlone += 1
        return (.alone, state.sentAlone == 1_000)
      }
      state.nextID &+= 1
      return (.lanes(state.nextID), false)
    }
    let id: UInt64
    switch path {
    case .closed: throw StoreShutDown()
    case .alone:
      if tell {
        // Two to three times slower, and silent otherwise: a store made but never run (not one
        // whose first requests came before its run() started, hence not at the first).
        logger.notice(
          "rate-limit decisions are sent one at a time, each on a connection leased from the pool: run the store (its run(), in a ServiceGroup) to batch them on connections it keeps"
        )
      }
      return try await decideAlone(request)
    case .lanes(let next): id = next
    }
    return try await withTaskCancellationHandler {
      try await withUnsafeThrowingContinuation { continuation in
        let (submitted, lane, watchdog) = state.withLock {
          state -> (
            DecisionBatchMachine<UInt64>.Submitted?, UnsafeContinuation<Bool, Never>?,
            CheckedContinuation<Void, Never>?
          )
          in
          guard !state.closed else { return (nil, nil, nil) }
          state.waiters[id] = Waiter(request: request, continuation: continuation)
          let submitted = state.machine.submit(id)
          var lane: UnsafeContinuation<Bool, Never>?
          let holding: Bool? =
            switch submitted {
            case .wakeHoldingLane: true
            case .wakeIdleLane: false
            case .queued: nil
            }
          if let holding {
            // The machine counts the parked lanes of each kind: one of that kind is parked.
            let index = state.parkedLanes.lastIndex { ($0.holdingSince != nil) == holding }
            lane = index.map { state.parkedLanes.remove(at: $0).continuation }
          }
          defer { state.parkedWatchdog = nil }
          return (submitted, lane, state.parkedWatchdog)
        }
        guard submitted != nil else {
          continuation.resume(throwing: StoreShutDown())
          return
        }
        lane?.resume(returning: true)
        watchdog?.resume()
        // A caller cancelled before it was registered is not seen by the handler below.
        if Task.isCancelled { fail([id], with: CancellationError()) }
      }
    } onCancel: {
      fail([id], with: CancellationError())
    }
  }

  /// A decision sent alone, before ``start()``: one statement on a connection leased from the
  /// pool, within the request's deadline (``DatabaseTimeout`` after it), retried once after a
  /// serialization failure or a deadlock. Nothing stays running after it: the wait for its
  /// deadline ends with it, and the database gives up within the same budget.
  func decideAlone(_ request: DecisionRequest) async throws -> DecisionAnswer {
    let statement = PreparedSQL("decide_one", table: table, names: names, sql: singleSQL)
    let (client, logger) = (client, logger)
    var retried = false
    while true {
      let left = ContinuousClock.now.duration(to: request.deadline)
      guard left - margin >= .milliseconds(1) else { throw DatabaseTimeout() }
      do {
        var answer = try await withTimeout(left) {
          try await client.withConnection { connection in
            await self.learnClockIfUnknown(on: connection)
            return try await self.decideAlone(request, statement: statement, on: connection, logger: logger)
          }
        }
        answer.roundTrips = retried ? 2 : 1
        return answer
      } catch  where !retried && failureKind(of: error) == .retryOnce {
        retried = true
      }
    }
  }

  /// ``decideAlone(_:)``'s statement, on a connection it holds. The database's budget is what is
  /// left of the deadline once the connection is held: the time a lease took is not the
  /// database's to spend, or a statement whose caller had given up could still take its permits
  /// when a lock it waited for went.
  private func decideAlone(
    _ request: DecisionRequest, statement: PreparedSQL, on connection: PostgresConnection, logger: Logger
  ) async throws -> DecisionAnswer {
    let now = ContinuousClock.now
    let left = now.duration(to: request.deadline) - margin
    guard let budget = left.wholeMicroseconds, left >= .milliseconds(1) else { throw DatabaseTimeout() }
    let bound = state.withLock { state in
      state.batchesSent += 1
      return state.clockBound
    }
    let binds = PostgresRateLimitStore.singleBindings(
      request, budget: budget, deadline: databaseDeadline(request.deadline, now: now, bound: bound))
    roundTrips.increment()
    let sent = ContinuousClock.now
    var answer: DecisionAnswer?
    for try await row in try await statement.execute(binds, on: connection, logger: logger) {
      let (_, granted, current, now, late, used, wait) = try row.decode(
        (Int, Int64?, Int64?, Int64, Bool, Int64?, Int64?).self)
      answer = DecisionAnswer(
        granted: granted, current: current, now: now, late: late, used: used, wait: wait, sent: sent)
    }
    guard let answer else { throw PacePostgresError.unavailable(reason: "the decision returned no row") }
    noteClock([(request, answer)], received: .now)
    return answer
  }

  /// `instant` in microseconds since ``origin``, rounded down (a deadline) or up (an arrival).
  func micros(_ instant: ContinuousClock.Instant, roundingUp: Bool) -> Int64 {
    instant.microseconds(since: origin, roundingUp: roundingUp)
  }

  /// The callers' `deadline`, less the ``margin`` for the way back, on the database's clock by
  /// `bound`: never later than the instant they stop waiting; nil while the bound is unknown.
  func databaseDeadline(
    _ deadline: ContinuousClock.Instant, now: ContinuousClock.Instant, bound: DatabaseClockBound
  ) -> Int64? {
    bound.databaseInstant(of: micros(deadline - margin, roundingUp: false), now: micros(now, roundingUp: false))
  }

  /// Reads the database's clock on `connection` while no answer has given this batcher a bound
  /// on it. Without the bound a statement carries no deadline, only its budget, which the
  /// database measures from the statement's arrival: a store's first statements, delayed on the
  /// way (their preparation, a process starved of CPU), could then still take after their callers
  /// were answered by the failure policy. The read names no table, so it never waits for a lock;
  /// the round-trip counter counts decisions' statements, not it. When it fails the bound stays
  /// unknown: the statement that follows meets the same fault and reports it.
  func learnClockIfUnknown(on connection: PostgresConnection) async {
    guard state.withLock({ $0.clockBound.sample == nil }) else { return }
    do {
      let rows = try await connection.query(
        "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint", logger: logger)
      var decided: Int64?
      for try await value in rows.decode(Int64.self) { decided = value }
      let arrival = micros(.now, roundingUp: true)
      if let decided { state.withLock { $0.clockBound.note(decided: decided, received: arrival) } }
    } catch {
      logger.debug(
        "reading the database's clock failed: the next statement carries its budget alone",
        metadata: errorMetadata(error))
    }
  }

  /// Learns the database's clock from `answered`, which arrived at `received`: from the answers
  /// decided on its clock (not at an instant a test chose).
  func noteClock(_ answered: [(DecisionRequest, DecisionAnswer)], received: ContinuousClock.Instant) {
    let decided = answered.lazy.filter { $0.0.databaseNow == nil }.map(\.1.now).max()
    guard let decided else { return }
    let arrival = micros(received, roundingUp: true)
    state.withLock { $0.clockBound.note(decided: decided, received: arrival) }
  }

  /// Answers the waiters `ids` still waiting with `error`, and forgets those not yet sent.
  func fail(_ ids: [UInt64], with error: any Error) {
    let waiters = state.withLock { state in
      let removed = ids.compactMap { state.waiters.removeValue(forKey: $0) }
      state.machine.remove(ids)
      return removed
    }
    for waiter in waiters { waiter.continuation.resume(throwing: error) }
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
    for lane in parked { lane.continuation.resume(returning: true) }
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
}
#endif
