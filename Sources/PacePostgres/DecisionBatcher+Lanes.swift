#if PostgreSQL
import Logging
import Metrics
import Pace
import PaceEventLoops
import PostgresNIO

/// The lanes: each a task, started by ``DecisionBatcher/start()``, that sends one batch at a time on
/// one connection and parks between batches.
extension DecisionBatcher {
  /// `finishing`: the lane's batch was just answered (``DecisionBatchMachine/finished()``).
  func nextWork(finishing: Bool = false) -> Work {
    state.withLock { state in
      if state.closed { return .stop }
      return state.machine.next(finishing: finishing).map(Work.send) ?? .park
    }
  }

  /// How a lane left the connection it served on.
  enum LaneExit {
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
  func lane(_ number: Int) async {
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
  func serve(
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
  func directLane(_ number: Int, _ configuration: PostgresConnection.Configuration) async {
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
  func close(_ connection: PostgresConnection, why: String) async {
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
  func park(
    _ number: Int, lingering linger: TimeAmount?, on eventLoop: (any EventLoop)?, finishing: Bool = false
  ) async -> Bool {
    await withUnsafeContinuation { (continuation: UnsafeContinuation<Bool, Never>) in
      let now = NIODeadline.now()
      let (parked, scheduleCheck) = state.withLock { state -> (Bool, Bool) in
        let holds = eventLoop != nil
        guard !state.closed, state.machine.park(holding: holds, finishing: finishing) else { return (false, false) }
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
  func scheduleLingerCheck(
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
  /// means the lane ``DecisionBatchMachine/finished()`` the batch: it asks for the next at once.
  func send(_ ids: [UInt64], on connection: PostgresConnection) async -> Bool {
    await learnClockIfUnknown(on: connection)
    var retried = false
    while true {
      let now = ContinuousClock.now
      // Too late to ask: the database would not have the time to answer.
      var late: [UInt64] = []
      var batch: [(UInt64, DecisionRequest)] = []
      batch.reserveCapacity(ids.count)
      let bound = state.withLock { state in
        state.batchesSent += 1
        for id in ids {
          guard let request = state.waiters[id]?.request else { continue }
          if now.duration(to: request.deadline) - margin < .milliseconds(1) {
            late.append(id)
          } else {
            batch.append((id, request))
          }
        }
        return state.clockBound
      }
      if !late.isEmpty { fail(late, with: DatabaseTimeout()) }
      // By key, then by policy (each policy has its table: a total order of the rows locked), in
      // call order within both.
      if batch.count > 1 {
        batch.sort { ($0.1.key, $0.1.limit.algorithm.rawValue, $0.0) < ($1.1.key, $1.1.limit.algorithm.rawValue, $1.0) }
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
        // Every batch, a lone decision too, calls the function (a lone one its overload without
        // arrays): its statement names no table, so neither its preparation nor its plan's check
        // waits for a lock on the table (a preparation is a transaction of its own, before the
        // budget's clock starts); every wait for the table comes inside the function, after it
        // set its `lock_timeout`.
        let databaseDeadline = self.databaseDeadline(deadline, now: now, bound: bound)
        let (binds, statement) =
          batch.count == 1
          ? (
            PostgresRateLimitStore.singleBindings(batch[0].1, budget: budget, deadline: databaseDeadline),
            PreparedSQL("decide_one", table: table, names: names, sql: singleSQL)
          )
          : (
            PostgresRateLimitStore.batchBindings(batch.map(\.1), budget: budget, deadline: databaseDeadline),
            PreparedSQL("decide_batch", table: table, names: names, sql: batchSQL)
          )
        let rows = try await statement.execute(binds, on: connection, logger: logger)
        for try await row in rows {
          let (index, granted, current, now, late, used, wait) = try row.decode(
            (Int, Int64?, Int64?, Int64, Bool, Int64?, Int64?).self)
          guard answers.indices.contains(index - 1) else { continue }
          answers[index - 1] = DecisionAnswer(
            granted: granted, current: current, now: now, late: late, used: used, wait: wait, sent: sent,
            batchSize: batch.count, roundTrips: retried ? 2 : 1)
        }
        let received = ContinuousClock.now
        // The latest instant the database decided at on its own clock (not at one a test chose).
        var decided: Int64?
        for (item, answer) in zip(batch, answers) where item.1.databaseNow == nil {
          if let now = answer?.now, now > decided ?? .min { decided = now }
        }
        let arrival = micros(received, roundingUp: true)
        // One lock for the whole batch; the callers are resumed after it.
        let answered = state.withLock { state in
          if let decided { state.clockBound.note(decided: decided, received: arrival) }
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
}
#endif
