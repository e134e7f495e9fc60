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
}

/// Sends the decisions of every caller of one store in batches: one statement per batch, on a few
/// lanes that each hold a connection while they have work (``BatchMachine`` decides the batches).
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
/// tasks, and one watchdog task per store (parked while nobody waits; ended by ``shutdown()``)
/// answers the callers whose deadline passes with ``DatabaseTimeout``, so a pool that cannot
/// connect never holds a caller past its timeout. The database gives up on its own within the same budget, so a batch whose
/// callers have left takes nothing.
final class DecisionBatcher: Sendable {
  /// A caller waiting for its answer. Its continuation (and a parked lane's) is unsafe rather than
  /// checked, which allocates for every decision: each is resumed exactly once, by whoever removes
  /// it from the state under the lock.
  private struct Waiter {
    let request: DecisionRequest
    let continuation: UnsafeContinuation<DecisionAnswer, any Error>
  }

  /// A lane waiting for work: woken with true when a request comes (or at shutdown), with false
  /// to give its pool connection back after it lingered idle.
  private struct ParkedLane {
    let lane: Int
    /// Since when the lane has waited holding a connection; nil for a lane without one.
    let holdingSince: NIODeadline?
    let continuation: UnsafeContinuation<Bool, Never>
  }

  private struct State {
    var machine: BatchMachine<UInt64>
    var waiters: [UInt64: Waiter] = [:]
    var parkedLanes: [ParkedLane] = []
    /// The lanes that hold a pool connection now.
    var holding: Set<Int> = []
    /// The lanes whose linger check is scheduled on their connection's event loop: one at a time.
    var lingerChecks: Set<Int> = []
    /// How many connections the lanes took, from the pool or opened (tests read it).
    var connectionsTaken = 0
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
    /// Give the pool connection back: it lingered idle.
    case release
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
  /// How long a lane keeps an idle pool connection before it gives it back: long enough that a
  /// lone caller's next decision finds it (a lease would cost a hop to the pool), short enough
  /// that the store holds no connection of a small pool for long once its decisions stop.
  let linger: TimeAmount
  /// The names of the store's prepared statement.
  let names: StatementNames

  /// A batcher that sends `batchSQL` (binds: ``PostgresRateLimitStore/batchBindings(_:budget:)``;
  /// rows: index, granted, current, now, late, used, wait) on `client`, as a prepared statement
  /// named after `table`.
  init(
    client: PostgresClient, direct: PostgresConnection.Configuration?, table: TableName, batchSQL: String,
    margin: Duration, maxBatch: Int, maxLanes: Int, linger: TimeAmount = .milliseconds(500), roundTrips: Counter,
    logger: Logger
  ) {
    self.direct = direct
    self.linger = linger
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

  /// How many connections the lanes took from the pool or opened (tests count hops to the pool).
  var connectionsTaken: Int { state.withLock { $0.connectionsTaken } }

  /// The database's answer to `request`, or the error of its batch (a serialization failure or a
  /// deadlock retried once), ``DatabaseTimeout`` at its deadline, ``StoreShutDown`` after
  /// ``shutdown()``, or `CancellationError`.
  func decide(_ request: DecisionRequest) async throws -> DecisionAnswer {
    let id = state.withLock { state in
      state.nextID &+= 1
      return state.nextID
    }
    return try await withTaskCancellationHandler {
      try await withUnsafeThrowingContinuation { continuation in
        let (submitted, lane, watchdog) = state.withLock {
          state -> (
            BatchMachine<UInt64>.Submitted?, UnsafeContinuation<Bool, Never>?, CheckedContinuation<Void, Never>?
          )
          in
          guard !state.closed else { return (nil, nil, nil) }
          state.waiters[id] = Waiter(request: request, continuation: continuation)
          let submitted = state.machine.submit(id)
          var lane: UnsafeContinuation<Bool, Never>?
          if submitted == .wakeLane {
            // A lane that holds a connection sends at once; one without would take a connection first.
            let index = state.parkedLanes.lastIndex { $0.holdingSince != nil } ?? state.parkedLanes.indices.last
            lane = index.map { state.parkedLanes.remove(at: $0).continuation }
          }
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
        lane?.resume(returning: true)
        watchdog?.resume()
        if submitted == .startLane {
          state.withLock { state in
            let number = state.laneTasks.count
            state.laneTasks.append(Task { await self.lane(number) })
          }
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

  /// `finishing`: the lane's batch was just answered (``BatchMachine/finished()``).
  private func nextWork(finishing: Bool = false) -> Work {
    state.withLock { state in
      if state.closed { return .stop }
      return state.machine.next(finishing: finishing).map(Work.send) ?? .park
    }
  }

  /// How a lane left the connection it served on.
  private enum LaneExit {
    /// ``shutdown()``: the lane ends.
    case stopped
    /// A batch failed in a way that leaves the connection unusable.
    case failed
    /// The pool connection lingered idle and is given back.
    case released
    /// The server closed the connection while the lane was parked: the batch goes on another.
    case closed(unsent: [UInt64])
  }

  /// Sends batches while there are any, parks while there are none, ends after ``shutdown()``.
  /// Lanes are numbered in the order they start, from 0.
  private func lane(_ number: Int) async {
    if let direct {
      await directLane(number, direct)
      return
    }
    var carried: [UInt64]?
    while true {
      let first: [UInt64]
      switch carried.map(Work.send) ?? nextWork() {
      case .stop: return
      case .park, .release:
        _ = await park(number, lingering: nil, on: nil)
        continue
      case .send(let batch): first = batch
      }
      carried = nil
      var unsent: [UInt64]? = first
      do {
        let exit = try await client.withConnection { connection in
          state.withLock { state in
            state.connectionsTaken += 1
            state.holding.insert(number)
          }
          defer { _ = state.withLock { $0.holding.remove(number) } }
          unsent = nil
          // A connection that failed is given back: the pool replaces it.
          return await onEventLoop(connection.eventLoop) {
            await serve(first, lane: number, on: connection, lingering: linger)
          }
        }
        switch exit {
        case .stopped: return
        case .closed(let batch): carried = batch
        case .failed, .released: break
        }
      } catch {
        if let unsent { fail(unsent, with: error) }
      }
    }
  }

  /// Sends `first`, then every batch that comes while the lane holds `connection`, parked on its
  /// event loop in between; a pool connection (`linger` non-nil) is given back once it has been
  /// idle that long.
  private func serve(
    _ first: [UInt64], lane: Int, on connection: PostgresConnection, lingering linger: TimeAmount?
  ) async -> LaneExit {
    var batch = first
    while true {
      // The server may have closed it while the lane was parked: another connection sends.
      if connection.isClosed { return .closed(unsent: batch) }
      guard await send(batch, on: connection) else { return .failed }
      var next: [UInt64]?
      var finishing = true
      while next == nil {
        switch nextWork(finishing: finishing) {
        case .stop: return .stopped
        case .release: return .released
        case .send(let work): next = work
        case .park:
          let woken = await park(lane, lingering: linger, on: connection.eventLoop, finishing: finishing)
          finishing = false
          guard woken else { return .released }
        }
      }
      batch = next ?? []
    }
  }

  /// A lane on a connection of its own, which it opens when it has work and none is open: after
  /// an outage, the first batch (the circuit breaker's probe) reconnects at once, where a pool
  /// would wait for its reconnection backoff. It keeps the connection, parked on its event loop
  /// while idle, and closes it when it ends.
  private func directLane(_ number: Int, _ configuration: PostgresConnection.Configuration) async {
    var connection: PostgresConnection?
    var connections = 0
    var carried: [UInt64]?
    while true {
      let batch: [UInt64]
      switch carried.map(Work.send) ?? nextWork() {
      case .stop:
        if let open = connection { await close(open, why: "the store shut down") }
        return
      case .park, .release:
        _ = await park(number, lingering: nil, on: nil)
        continue
      case .send(let next): batch = next
      }
      carried = nil
      do {
        // A connection the server closed while the lane was idle is replaced before it is used.
        if connection?.isClosed ?? true {
          connections += 1
          state.withLock { $0.connectionsTaken += 1 }
          connection = try await PostgresConnection.connect(
            configuration: configuration, id: connections, logger: logger)
        }
      } catch {
        fail(batch, with: error)
        continue
      }
      guard let open = connection else { continue }
      let exit = await onEventLoop(open.eventLoop) {
        await serve(batch, lane: number, on: open, lingering: nil)
      }
      switch exit {
      case .failed:
        await close(open, why: "a decision failed on it")
        connection = nil
      case .stopped:
        await close(open, why: "the store shut down")
        return
      case .closed(let unsent):
        carried = unsent
      case .released:
        continue
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

  /// Parks lane `number` until a request comes or ``shutdown()`` (true). A lane that holds a pool
  /// connection passes `linger` and the connection's `eventLoop`: once it has been parked that
  /// long, it is woken with false, to give the connection back. Called on `eventLoop`, if any.
  private func park(
    _ number: Int, lingering linger: TimeAmount?, on eventLoop: (any EventLoop)?, finishing: Bool = false
  ) async -> Bool {
    await withUnsafeContinuation { (continuation: UnsafeContinuation<Bool, Never>) in
      let now = NIODeadline.now()
      let (parked, scheduleCheck) = state.withLock { state -> (Bool, Bool) in
        guard !state.closed, state.machine.park(finishing: finishing) else { return (false, false) }
        let holds = eventLoop != nil
        state.parkedLanes.append(ParkedLane(lane: number, holdingSince: holds ? now : nil, continuation: continuation))
        guard holds, linger != nil else { return (true, false) }
        return (true, state.lingerChecks.insert(number).inserted)
      }
      if !parked { continuation.resume(returning: true) }
      if scheduleCheck, let linger, let eventLoop {
        scheduleLingerCheck(number, lingering: linger, on: eventLoop, at: now + linger)
      }
    }
  }

  /// Checks at `deadline` whether lane `number` has held its pool connection idle for `linger`:
  /// then it wakes the lane to give it back; otherwise it checks again when it might have. One
  /// check per lane at a time, scheduled while the lane holds a connection, rather than a timer
  /// for every park.
  private func scheduleLingerCheck(
    _ number: Int, lingering linger: TimeAmount, on eventLoop: any EventLoop, at deadline: NIODeadline
  ) {
    enum Check {
      case release(UnsafeContinuation<Bool, Never>)
      case again(NIODeadline)
      case done
    }
    eventLoop.scheduleTask(deadline: deadline) {
      let now = NIODeadline.now()
      let check: Check = self.state.withLock { state in
        guard state.holding.contains(number), !state.closed else {
          state.lingerChecks.remove(number)
          return .done
        }
        guard let index = state.parkedLanes.firstIndex(where: { $0.lane == number }),
          let since = state.parkedLanes[index].holdingSince
        else { return .again(now + linger) }
        guard since + linger <= now else { return .again(since + linger) }
        state.machine.unpark()
        state.lingerChecks.remove(number)
        return .release(state.parkedLanes.remove(at: index).continuation)
      }
      switch check {
      case .release(let lane): lane.resume(returning: false)
      case .again(let next): self.scheduleLingerCheck(number, lingering: linger, on: eventLoop, at: next)
      case .done: break
      }
    }
  }

  /// Sends one batch and answers its callers; false if the connection is no longer usable. True
  /// means the lane ``BatchMachine/finished()`` the batch: it asks for the next at once.
  private func send(_ ids: [UInt64], on connection: PostgresConnection) async -> Bool {
    var retried = false
    while true {
      let now = ContinuousClock.now
      // Too late to ask: the database would not have the time to answer.
      var late: [UInt64] = []
      var batch: [(UInt64, DecisionRequest)] = []
      batch.reserveCapacity(ids.count)
      state.withLock { state in
        state.batchesSent += 1
        for id in ids {
          guard let request = state.waiters[id]?.request else { continue }
          if now.duration(to: request.deadline) - margin < .milliseconds(1) {
            late.append(id)
          } else {
            batch.append((id, request))
          }
        }
      }
      if !late.isEmpty { fail(late, with: DatabaseTimeout()) }
      // By key, then by policy (each policy has its table: a total order of the rows locked), in
      // call order within both.
      if batch.count > 1 {
        batch.sort { ($0.1.key, $0.1.limit.policy.rawValue, $0.0) < ($1.1.key, $1.1.limit.policy.rawValue, $1.0) }
      }
      guard let deadline = batch.lazy.map(\.1.deadline).min(),
        let budget = (now.duration(to: deadline) - margin).wholeMicroseconds
      else {
        state.withLock { $0.machine.finished() }
        return true
      }
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
        // One lock for the whole batch; the callers are resumed after it.
        let answered = state.withLock { state in
          // Before its callers are resumed: one who asks again at once waits for this lane.
          state.machine.finished()
          return zip(batch, answers).compactMap { item, answer in
            state.waiters.removeValue(forKey: item.0).map { ($0.continuation, answer) }
          }
        }
        for (continuation, answer) in answered {
          if let answer {
            continuation.resume(returning: answer)
          } else {
            continuation.resume(throwing: PacePostgresError.unavailable(reason: "the decision returned no row"))
          }
        }
        return true
      } catch  where !retried && failureKind(of: error) == .retryOnce {
        retried = true
      } catch {
        let usable = failureKind(of: error) != .unavailable
        if usable { state.withLock { $0.machine.finished() } }
        fail(batch.map(\.0), with: error)
        return usable
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
