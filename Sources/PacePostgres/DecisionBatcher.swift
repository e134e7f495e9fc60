#if PostgreSQL
import Logging
import Metrics
import PostgresNIO

/// One decision for the database: a stored key, its GCRA arithmetic, and when its caller stops
/// waiting.
struct DecisionRequest: Sendable, Equatable {
  let key: String
  let increment: Int64
  let tolerance: Int64
  let deadline: ContinuousClock.Instant
}

/// The database's answer to one decision: the new TAT if granted, the current TAT if denied, the
/// deciding clock, whether the row's lock came after the budget, and when the batch was sent.
struct DecisionAnswer: Sendable, Equatable {
  let granted: Int64?
  let current: Int64?
  let now: Int64
  let late: Bool
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
/// tasks, and one watchdog task per store (while anything waits) answers the callers whose
/// deadline passes with ``DatabaseTimeout``, so a pool that cannot connect never holds a caller
/// past its timeout. The database gives up on its own within the same budget, so a batch whose
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
    var nextID: UInt64 = 0
    var watching = false
    var batchesSent = 0
  }

  private let state: Locked<State>
  private let client: PostgresClient
  private let sql: String
  /// Taken off the budget the database gets: it must answer before the caller stops waiting, the
  /// way back included.
  private let margin: Duration
  private let roundTrips: Counter
  private let logger: Logger
  /// Where the lanes connect on their own, instead of leasing from `client`'s pool.
  private let direct: PostgresConnection.Configuration?

  /// A batcher that sends `sql` (binds: keys, increments, tolerances, budget in microseconds;
  /// rows: index, granted, current, now, late) on `client`.
  init(
    client: PostgresClient, direct: PostgresConnection.Configuration?, sql: String, margin: Duration, maxBatch: Int,
    maxLanes: Int, roundTrips: Counter, logger: Logger
  ) {
    self.direct = direct
    self.state = Locked(State(machine: BatchMachine(maxBatch: maxBatch, maxLanes: maxLanes)))
    self.client = client
    self.sql = sql
    self.margin = margin
    self.roundTrips = roundTrips
    self.logger = logger
  }

  /// How many batches the lanes took to send (tests count round trips with it).
  var batchesSent: Int { state.withLock { $0.batchesSent } }

  /// The database's answer to `request`, or the error of its batch (a serialization failure or a
  /// deadlock retried once), ``DatabaseTimeout`` at its deadline, or `CancellationError`.
  func decide(_ request: DecisionRequest) async throws -> DecisionAnswer {
    let id = state.withLock { state in
      state.nextID &+= 1
      return state.nextID
    }
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { continuation in
        let (submitted, lane, watch) = state.withLock { state in
          state.waiters[id] = Waiter(request: request, continuation: continuation)
          let submitted = state.machine.submit(id)
          let lane = submitted == .wakeLane ? state.parkedLanes.popLast() : nil
          defer { state.watching = true }
          return (submitted, lane, !state.watching)
        }
        lane?.resume()
        if submitted == .startLane { Task { await self.lane() } }
        if watch { Task { await self.watch() } }
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
      state.machine.remove(Set(ids))
      return removed
    }
    for waiter in waiters { waiter.continuation.resume(throwing: error) }
  }

  private func answer(_ id: UInt64, _ answer: DecisionAnswer) {
    let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
    waiter?.continuation.resume(returning: answer)
  }

  /// Sends batches while there are any, parks while there are none.
  private func lane() async {
    if let direct {
      await directLane(direct)
      return
    }
    while true {
      guard let first = state.withLock({ $0.machine.next() }) else {
        await park()
        continue
      }
      var unsent: [UInt64]? = first
      do {
        try await client.withConnection { connection in
          while let batch = unsent {
            unsent = nil
            // A connection that failed is given back: the pool replaces it.
            guard await send(batch, on: connection) else { break }
            unsent = state.withLock { $0.machine.next() }
          }
        }
      } catch {
        if let unsent { fail(unsent, with: error) }
      }
    }
  }

  /// A lane on a connection of its own, which it opens when it has work and none is open: after
  /// an outage, the first batch (the circuit breaker's probe) reconnects at once, where a pool
  /// would wait for its reconnection backoff.
  private func directLane(_ configuration: PostgresConnection.Configuration) async {
    var connection: PostgresConnection?
    var connections = 0
    while true {
      guard var batch = state.withLock({ $0.machine.next() }) else {
        await park()
        continue
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
      while true {
        guard await send(batch, on: open) else {
          try? await open.close()
          connection = nil
          break
        }
        guard let next = state.withLock({ $0.machine.next() }) else { break }
        batch = next
      }
    }
  }

  private func park() async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let parked = state.withLock { state in
        guard state.machine.park() else { return false }
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
      let batch = waiting.filter { now.duration(to: $0.1.deadline) - margin >= .milliseconds(1) }
        .sorted { ($0.1.key, $0.0) < ($1.1.key, $1.0) }
      guard let deadline = batch.map(\.1.deadline).min(),
        let budget = (now.duration(to: deadline) - margin).wholeMicroseconds
      else { return true }
      var binds = PostgresBindings()
      binds.append(batch.map(\.1.key))
      binds.append(batch.map(\.1.increment))
      binds.append(batch.map(\.1.tolerance))
      binds.append(budget)
      let sent = ContinuousClock.now
      roundTrips.increment()
      do {
        let rows = try await connection.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
        var answers = [DecisionAnswer?](repeating: nil, count: batch.count)
        for try await (index, granted, current, now, late) in rows.decode((Int, Int64?, Int64?, Int64, Bool).self)
        where answers.indices.contains(index - 1) {
          answers[index - 1] = DecisionAnswer(granted: granted, current: current, now: now, late: late, sent: sent)
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

  /// Answers the callers whose deadline passed, sleeping until the earliest; ends when nobody waits.
  private func watch() async {
    while true {
      let earliest: ContinuousClock.Instant? = state.withLock { state in
        guard let earliest = state.waiters.values.lazy.map(\.request.deadline).min() else {
          state.watching = false
          return nil
        }
        return earliest
      }
      guard let earliest else { return }
      try? await Task.sleep(until: earliest, clock: .continuous)
      let now = ContinuousClock.now
      let expired = state.withLock { state in state.waiters.filter { $0.value.request.deadline <= now }.map(\.key) }
      fail(expired, with: DatabaseTimeout())
    }
  }
}
#endif
