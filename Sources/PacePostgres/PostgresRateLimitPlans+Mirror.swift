#if PostgreSQL
import Logging
import Metrics
import Pace
import PostgresNIO
import ServiceLifecycle

/// What a ``PostgresRateLimitPlans`` re-reads: everything, or one key's row.
enum MirrorReload: Sendable, Hashable {
  case everything
  case plan(String)
  case block(String)

  /// The reload a notification's payload asks for (the trigger function's `p:key`, `b:key`, `p`,
  /// `b`); nil for any other payload.
  init?(payload: String) {
    let kind = payload.first
    guard kind == "p" || kind == "b" else { return nil }
    let rest = payload.dropFirst()
    if rest.isEmpty {
      self = .everything
      return
    }
    guard rest.first == ":" else { return nil }
    let key = String(rest.dropFirst())
    self = kind == "p" ? .plan(key) : .block(key)
  }
}

/// What the mirror remembers between reloads, under a lock.
struct MirrorState: Sendable {
  var started = false
  /// Whether the last read failed: the fault is logged once per outage.
  var outage = false
  /// The rows reported invalid, so that each is logged once until it changes.
  var invalidRows: [String: PlanRow] = [:]
  /// This instance's own writes, counted, and the count at each key's last one, plans and blocks
  /// apart: a read that began before a key's write may hold the row from before it, and must not
  /// undo in the mirror what the write applied at once (see `mirror(plans:blocks:readBegan:)`).
  /// A key's entry goes when a read that began after its write is applied.
  var ownWrites: UInt64 = 0
  var ownPlanWrites: [String: UInt64] = [:]
  var ownBlockWrites: [String: UInt64] = [:]
}

/// The plans' metrics.
struct PlanMetrics: Sendable {
  /// Rows that could not be loaded, each counted when first read (again once it changes).
  let invalidRows: Counter
  /// Reads of the tables, and listens, that failed.
  let readFailures: Counter
  /// How many keys have a plan of their own, and how many are blocked, in the mirror.
  let plans: Gauge
  let blocks: Gauge

  init(table: String, factory: any MetricsFactory) {
    let dimensions = [("table", table)]
    invalidRows = Counter(label: "pace_rate_limit_plans_invalid_rows_total", dimensions: dimensions, factory: factory)
    readFailures = Counter(label: "pace_rate_limit_plans_read_failures_total", dimensions: dimensions, factory: factory)
    plans = Gauge(label: "pace_rate_limit_plans_keys", dimensions: dimensions, factory: factory)
    blocks = Gauge(label: "pace_rate_limit_blocked_keys", dimensions: dimensions, factory: factory)
  }
}

extension PostgresRateLimitPlans {
  /// Mirrors the tables until the task is cancelled or the service group shuts down gracefully:
  /// listens for the changes every instance makes (on a connection of ``client``'s pool, held
  /// while it runs) and re-reads the row each names; re-reads everything when it starts, each time
  /// it listens again after losing its connection, and every ``refreshInterval``. The reads are
  /// applied one at a time, in order, so the mirror never goes back to an older row, and a read
  /// that began before this instance's own write never undoes what the write applied at once.
  ///
  /// A plans mirror runs once: a second call returns at once.
  public func run() async throws {
    let first = state.withLock { state in
      defer { state.started = true }
      return !state.started
    }
    guard first else {
      logger.warning("PostgresRateLimitPlans.run() was called again: it runs once; this call returns")
      return
    }
    logger.info(
      "PostgreSQL rate-limit plans running",
      metadata: ["pace.refresh_interval": "\(refreshInterval)", "pace.channel": "\(channel)"])
    await cancelWhenGracefulShutdown { await self.mirrorUntilCancelled() }
    logger.info("PostgreSQL rate-limit plans stopped")
  }

  private func mirrorUntilCancelled() async {
    let (reloads, reload) = AsyncStream<MirrorReload>.makeStream()
    let listener = ChannelListener(client: client, channel: channel, logger: logger)
    let (refreshInterval, logger) = (refreshInterval, logger)
    reload.yield(.everything)
    await withTaskGroup(of: Void.self) { group in
      group.addTask {
        await listener.run(
          listening: { reload.yield(.everything) },
          received: { payload in
            if let request = MirrorReload(payload: payload) {
              reload.yield(request)
            } else {
              logger.debug("a notification not from Pace's trigger: ignored", metadata: ["pace.payload": "\(payload)"])
            }
          },
          failed: { error in self.failed(error, while: "listening for changes") })
      }
      group.addTask {
        while (try? await Task.sleep(for: refreshInterval)) != nil { reload.yield(.everything) }
      }
      group.addTask {
        for await request in reloads { await self.apply(request) }
      }
      await group.next()
      group.cancelAll()
      reload.finish()
    }
  }

  /// Re-reads both tables now and mirrors them: for an application that wants the plans in force
  /// before it serves, after ``migrate(timeout:)``. ``run()`` does it by itself.
  ///
  /// - Throws: ``PacePostgresError/unavailable(reason:)`` if the database does not answer within
  ///   ``timeout``, or what it reports; the mirror is unchanged then.
  public func refresh() async throws {
    try await read(.everything)
  }

  /// Reads what `request` names and mirrors it; a failure is logged (once per outage).
  func apply(_ request: MirrorReload) async {
    do {
      try await read(request)
      let wasOut = state.withLock { state in
        defer { state.outage = false }
        return state.outage
      }
      if wasOut { logger.info("the plans and blocks are read from PostgreSQL again") }
    } catch {
      // Stopping: the read was cut short, no fault.
      if Task.isCancelled || error is CancellationError { return }
      failed(error, while: "reading the plans and blocks")
    }
  }

  /// A read or a listen failed: logged at the first failure of an outage.
  func failed(_ error: any Error, while activity: String) {
    metrics.readFailures.increment()
    let isNew = state.withLock { state in
      defer { state.outage = true }
      return !state.outage
    }
    var metadata = errorMetadata(error)
    metadata["pace.activity"] = "\(activity)"
    if isNew {
      metadata["pace.action"] =
        "check that PostgreSQL is running and reachable from this instance; the mirror catches up on its own once it answers"
      logger.error(
        "PostgreSQL unavailable to the rate-limit plans: the plans and blocks mirrored last stay in force",
        metadata: metadata)
    } else {
      logger.debug("the rate-limit plans still cannot reach PostgreSQL", metadata: metadata)
    }
  }

  private func read(_ request: MirrorReload) async throws {
    do {
      try await withTimeout(timeout) { try await self.load(request) }
    } catch is DatabaseTimeout {
      throw PacePostgresError.unavailable(reason: "PostgresRateLimitPlans: PostgreSQL did not answer within \(timeout)")
    }
  }

  private func load(_ request: MirrorReload) async throws {
    let began = state.withLock { $0.ownWrites }
    switch request {
    case .everything:
      let planRows = try await planRows(key: nil)
      let blockRows = try await blockEnds(key: nil)
      try mirror(plans: planRows, blocks: blockRows, readBegan: began)
    case .plan(let key):
      try mirrorPlan(of: key, row: try await planRows(key: key).first?.row, readBegan: began)
    case .block(let key):
      mirrorBlock(of: key, end: try await blockEnds(key: key).first?.end, readBegan: began)
    }
    metrics.plans.record(plans.ownLimits.count)
    metrics.blocks.record(blocks.heldCount)
  }

  /// Applies this instance's own write of `key` to the mirror, under the lock that
  /// ``mirror(plans:blocks:readBegan:)`` applies a read under, and marks the key in `marks`
  /// (`\.ownPlanWrites` or `\.ownBlockWrites`).
  func applyOwnWrite<Failure: Error>(
    of key: String, markedIn marks: WritableKeyPath<MirrorState, [String: UInt64]>, _ apply: () throws(Failure) -> Void
  ) throws(Failure) {
    try state.withLock { state -> Result<Void, Failure> in
      state.ownWrites &+= 1
      state[keyPath: marks][key] = state.ownWrites
      return Result { () throws(Failure) in try apply() }
    }.get()
  }

  /// Mirrors both tables as a read found them, a read that began when this instance had made
  /// `readBegan` writes of its own: a key this instance wrote since keeps what its write applied
  /// (the read may hold the row from before the write; the write's notification brings the row
  /// again).
  func mirror(
    plans planRows: [(key: String, row: PlanRow)], blocks blockRows: [(key: String, end: UnixTime)], readBegan: UInt64
  ) throws {
    var limits: [String: RateLimit] = [:]
    for (key, row) in planRows {
      // Keys that differ in their bytes and not as Strings (canonically equivalent, written by
      // hand): the last wins, never a trap.
      if let limit = loaded(row, for: key) {
        limits[key] = limit
      } else if let previous = plans.ownLimit(for: key) {
        limits[key] = previous
      }
    }
    var ends: [String: UnixTime] = [:]
    for (key, end) in blockRows { ends[key] = end }
    let keys = Set(planRows.map(\.key))
    try state.withLock { state -> Result<Void, RateLimitError> in
      state.invalidRows = state.invalidRows.filter { keys.contains($0.key) }
      for (key, written) in state.ownPlanWrites where written > readBegan { limits[key] = plans.ownLimit(for: key) }
      for (key, written) in state.ownBlockWrites where written > readBegan { ends[key] = blocks.blockedUntil(for: key) }
      state.ownPlanWrites = state.ownPlanWrites.filter { $0.value > readBegan }
      state.ownBlockWrites = state.ownBlockWrites.filter { $0.value > readBegan }
      return Result { () throws(RateLimitError) in
        try plans.replaceLimits(with: limits)
        blocks.replaceBlocks(with: ends)
      }
    }.get()
    logger.debug("plans and blocks read", metadata: ["pace.plans": "\(limits.count)", "pace.blocks": "\(ends.count)"])
  }

  /// Mirrors `key`'s plan as a read found its row (nil: none), unless this instance wrote it
  /// since the read began (see ``mirror(plans:blocks:readBegan:)``).
  func mirrorPlan(of key: String, row: PlanRow?, readBegan: UInt64) throws {
    // An invalid row is logged and leaves the key's plan as it is.
    let limit = row.flatMap { loaded($0, for: key) }
    if row != nil, limit == nil { return }
    enum Outcome { case set, removed, absent, superseded }
    let outcome = try state.withLock { state -> Result<Outcome, RateLimitError> in
      if let written = state.ownPlanWrites[key] {
        if written > readBegan { return .success(.superseded) }
        state.ownPlanWrites[key] = nil
      }
      if let limit { return Result { () throws(RateLimitError) in try plans.setLimit(limit, for: key) }.map { .set } }
      state.invalidRows[key] = nil
      return .success(plans.removeLimit(for: key) == nil ? .absent : .removed)
    }.get()
    switch outcome {
    case .set: logger.debug("plan changed", metadata: ["pace.key": "\(key)", "pace.limit": "\(limit!)"])
    case .removed: logger.debug("plan removed", metadata: ["pace.key": "\(key)"])
    case .absent: logger.debug("a notification names a key with no plan: ignored", metadata: ["pace.key": "\(key)"])
    case .superseded:
      logger.debug("a plan read before this instance wrote it: not mirrored", metadata: ["pace.key": "\(key)"])
    }
  }

  /// Mirrors `key`'s block as a read found its end (nil: no row), unless this instance wrote it
  /// since the read began (see ``mirror(plans:blocks:readBegan:)``).
  func mirrorBlock(of key: String, end: UnixTime?, readBegan: UInt64) {
    enum Outcome {
      case blocked(UnixTime)
      case unblocked, absent, superseded
    }
    let now = unixTime()
    let outcome = state.withLock { state -> Outcome in
      if let written = state.ownBlockWrites[key] {
        if written > readBegan { return .superseded }
        state.ownBlockWrites[key] = nil
      }
      if let end, end > now {
        blocks.block(key, until: end)
        return .blocked(end)
      }
      return blocks.unblock(key) == nil ? .absent : .unblocked
    }
    switch outcome {
    case .blocked(let end): logger.debug("key blocked", metadata: ["pace.key": "\(key)", "pace.until": "\(end)"])
    case .unblocked: logger.debug("key unblocked", metadata: ["pace.key": "\(key)"])
    case .absent: logger.debug("a notification names a key with no block: ignored", metadata: ["pace.key": "\(key)"])
    case .superseded:
      logger.debug("a block read before this instance wrote it: not mirrored", metadata: ["pace.key": "\(key)"])
    }
  }

  /// The limit `row` stores; nil if it is invalid, which is logged and counted the first time.
  private func loaded(_ row: PlanRow, for key: String) -> RateLimit? {
    do {
      let limit = try row.limit()
      state.withLock { _ = $0.invalidRows.removeValue(forKey: key) }
      return limit
    } catch {
      let isNew = state.withLock { state in state.invalidRows.updateValue(row, forKey: key) != row }
      guard isNew else { return nil }
      metrics.invalidRows.increment()
      let kept = plans.ownLimit(for: key).map { "its previous plan, \($0)" } ?? "the default, \(plans.defaultLimit)"
      logger.error(
        "a stored plan is invalid and is not loaded: the key keeps \(kept)",
        metadata: [
          "pace.key": "\(key)", "pace.row": "\(row)", "pace.reason": "\(error)",
          "pace.action": "fix or delete the row (the instances read it again when it changes)",
        ])
      return nil
    }
  }

  private func planRows(key: String?) async throws -> [(key: String, row: PlanRow)] {
    var sql = "SELECT \(planColumns) FROM \(plansTable)"
    var binds = PostgresBindings()
    if let key {
      sql += " WHERE key = $1"
      binds = PostgresBindings(key)
    }
    let rows = try await client.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
    var result: [(key: String, row: PlanRow)] = []
    for try await (key, algorithm, permits, interval, burst) in rows.decode((String, String, Int64, Int64, Int64?).self)
    {
      result.append((key, PlanRow(algorithm: algorithm, permits: permits, intervalNanoseconds: interval, burst: burst)))
    }
    return result
  }

  /// The blocks in force (all of them), or `key`'s whether it has ended or not.
  private func blockEnds(key: String?) async throws -> [(key: String, end: UnixTime)] {
    var sql = "SELECT key, \(blockEndSQL) FROM \(blocksTable)"
    var binds = PostgresBindings()
    if let key {
      sql += " WHERE key = $1"
      binds = PostgresBindings(key)
    } else {
      sql += " WHERE blocked_until > now()"
    }
    let rows = try await client.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
    var result: [(key: String, end: UnixTime)] = []
    for try await (key, microseconds) in rows.decode((String, Int64).self) {
      result.append((key, UnixTime(nanosecondsSinceEpoch: Self.nanoseconds(microseconds: microseconds))))
    }
    return result
  }
}
#endif
