#if PostgreSQL
import Logging
import PostgresNIO
import ServiceLifecycle

extension PostgresRateLimitStore {
  /// Deletes up to `batchSize` rows that count nothing any more, as if absent: token buckets whose
  /// TAT has passed, sliding windows whose last grant has left the window, fixed windows whose
  /// window has ended, each once no other limit the store knows (its rows', its plans table's)
  /// would count its last grant either, should its key's limit change to it (see "Expired rows"
  /// in the PacePostgres article). It skips rows that a decision holds locked, so it never blocks
  /// one.
  /// Call it, or ``purgeAllExpired()``, yourself if you do not run the store as a service.
  ///
  /// - Parameter batchSize: The most rows deleted by one statement. Positive.
  /// - Returns: How many rows were deleted; call again while it returns `batchSize`.
  /// - Throws: ``PacePostgresError/invalidSetting(name:value:rule:)`` if `batchSize` is not
  ///   positive; what the database reports.
  @discardableResult
  public func purgeExpired(batchSize: Int = 1000) async throws -> Int {
    guard batchSize > 0 else {
      throw PacePostgresError.invalid("PostgresRateLimitStore.purgeExpired.batchSize", batchSize, "must be positive")
    }
    var count = 0
    let lookBacks = try await purgeLookBacks()
    for (table, expiry) in try purgedTables(lookBack: "$2") where count < batchSize {
      let sql = """
        WITH clock AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS now)
        DELETE FROM \(table) AS r USING clock
        WHERE r.ctid IN (
          SELECT e.ctid FROM \(table) AS e, clock WHERE \(expiry("e")) LIMIT $1 FOR UPDATE OF e SKIP LOCKED
        ) AND \(expiry("r"))
        RETURNING 1
        """
      var binds = PostgresBindings()
      binds.append(batchSize - count)
      binds.append(lookBacks.kept(table: table, store: self))
      let rows = try await client.query(PostgresQuery(unsafeSQL: sql, binds: binds))
      for try await _ in rows { count += 1 }
    }
    return count
  }

  /// Deletes every row that counts nothing any more, as ``purgeExpired(batchSize:)`` does, in one
  /// walk over each table: a statement per range of 256 pages (2 MB), read by a TID range scan, so
  /// that each statement's work is bounded by pages rather than by the rows it finds, and no page
  /// is read twice (a purge by row count starts each batch from the table's first page again,
  /// through the rows the batches before it deleted). It needs no index, so every grant stays a
  /// HOT update. Rows written past the end of the walk meanwhile wait for the next walk. ``run()``
  /// calls it every ``purgeInterval``.
  ///
  /// - Returns: How many rows were deleted.
  /// - Throws: What the database reports.
  @discardableResult
  public func purgeAllExpired() async throws -> Int {
    try await purgeAllExpired(pagesPerStatement: 256)
  }

  /// ``purgeAllExpired()`` with `pagesPerStatement` pages per statement.
  func purgeAllExpired(pagesPerStatement: Int64) async throws -> Int {
    let lookBacks = try await purgeLookBacks()
    var count = 0
    for (table, expiry) in try purgedTables(lookBack: "$3") {
      var (pages, step): (Int64, Int64) = (0, pagesPerStatement)
      let size = try await client.query(
        PostgresQuery(
          unsafeSQL: """
            SELECT pg_relation_size('\(table)') / current_setting('block_size')::bigint,
              current_setting('server_version_num')::int >= 140000
            """))
      for try await (value, rangeScans) in size.decode((Int64, Bool).self) {
        // Before PostgreSQL 14 (no TID range scan) every statement would read the whole table: one does.
        (pages, step) = (value, rangeScans ? pagesPerStatement : max(value, 1))
      }
      let sql = """
        WITH clock AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS now),
        deleted AS (
          DELETE FROM \(table) AS r USING clock
          WHERE r.ctid IN (
            SELECT e.ctid FROM \(table) AS e, clock
            WHERE e.ctid >= format('(%s,0)', $1::bigint)::tid AND e.ctid < format('(%s,0)', $2::bigint)::tid
              AND \(expiry("e"))
            FOR UPDATE OF e SKIP LOCKED
          ) AND \(expiry("r"))
          RETURNING 1
        )
        SELECT count(*) FROM deleted
        """
      for first in stride(from: Int64(0), to: pages, by: Int(step)) {
        var binds = PostgresBindings()
        binds.append(first)
        binds.append(first + step)
        binds.append(lookBacks.kept(table: table, store: self))
        let rows = try await client.query(PostgresQuery(unsafeSQL: sql, binds: binds))
        for try await deleted in rows.decode(Int64.self) { count += Int(deleted) }
      }
    }
    return count
  }

  /// The three tables, each with the condition (on a row named by its alias) under which its row
  /// counts nothing under any limit the store knows: idle under its own limit, and its last grant
  /// (at the latest instant its state allows) older than `lookBack` (a parameter), the longest look-back of the
  /// other limits (``PurgeLookBacks``). A bucket full at `tat` granted last at `tat - unit`; a
  /// sliding log expiring at `expires` at `expires - span`; a fixed window ending at `window_end`
  /// at `window_end - 1`.
  func purgedTables(lookBack: String) throws(PacePostgresError) -> [(TableName, (String) -> String)] {
    let (now, kept) = ("clock.now", lookBack)
    return [
      (tableName, { r in "\(r).tat < \(now) AND \(r).tat - coalesce(\(r).unit, 0) + \(kept) < \(now)" }),
      (
        try tableName.companion(.slidingWindow),
        { r in "\(r).expires < \(now) AND \(r).expires - coalesce(\(r).span, 0) + \(kept) < \(now)" }
      ),
      (
        try tableName.companion(.fixedWindow),
        { r in "\(r).window_end < \(now) AND \(r).window_end - 1 + \(kept) < \(now)" }
      ),
    ]
  }

  /// What the store knows of the limits its keys can have, for the purge: the limits its rows
  /// record and those of the plans table beside it (`<table>_plans`, if there is one), read once
  /// per purge. A row is kept until it is idle under each of them (see "What a key keeps when its
  /// plan changes" in the article): a key's limit may change to one of them, which then counts the
  /// use its row records and assumes the use before it.
  struct PurgeLookBacks: Equatable {
    /// The longest window of a sliding window, a fixed window, the longest tolerance (a full
    /// bucket's look-back) of a token bucket; in microseconds, 0 if none.
    var sliding: Int64 = 0
    var fixed: Int64 = 0
    var bucket: Int64 = 0
    /// Whether fixed windows of more than one length, or buckets of more than one rate, are
    /// known: else a row's own is the one, and its state says when that limit finds it idle.
    var severalFixed = false
    var severalBuckets = false

    /// The look-back `$3` of `table`'s rows: the longest of the limits that may count a row's
    /// last grant beyond its own idle instant. At most 2^61 µs, so that no sum overflows.
    func kept(table: TableName, store: PostgresRateLimitStore) -> Int64 {
      let value: Int64
      if table == store.tableName {
        value = Swift.max(sliding, fixed, severalBuckets ? bucket : 0)
      } else if (try? store.tableName.companion(.slidingWindow)) == table {
        value = Swift.max(sliding, fixed, bucket)
      } else {
        value = Swift.max(sliding, severalFixed ? fixed : 0, bucket)
      }
      return Swift.min(value, 1 << 61)
    }
  }

  /// Reads ``PurgeLookBacks`` from the tables: one statement, which reads each table once.
  func purgeLookBacks() async throws -> PurgeLookBacks {
    let sliding = try tableName.companion(.slidingWindow)
    let fixed = try tableName.companion(.fixedWindow)
    // (A name too long for a plans table: there is none.)
    let plans = try? TableName(tableName.name + "_plans")
    var exists = false
    if let plans {
      let found = try await client.query(PostgresQuery(unsafeSQL: "SELECT to_regclass('\(plans)') IS NOT NULL"))
      for try await value in found.decode(Bool.self) { exists = value }
    }
    // A plan's limit as the store counts it (``StoredLimit``): a window in whole microseconds,
    // rounded up; a bucket's tolerance, `burst × interval / permits`, rounded down.
    var planned =
      ", planned AS (SELECT NULL::bigint AS sliding, NULL::bigint AS fixed_min, NULL::bigint AS fixed_max, NULL::bigint AS bucket)"
    if let plans, exists {
      planned = """
        , planned AS (
          SELECT max(ceil(interval_nanoseconds / 1000.0)::bigint) FILTER (WHERE algorithm = 'sliding_window') AS sliding,
            min(ceil(interval_nanoseconds / 1000.0)::bigint) FILTER (WHERE algorithm = 'fixed_window') AS fixed_min,
            max(ceil(interval_nanoseconds / 1000.0)::bigint) FILTER (WHERE algorithm = 'fixed_window') AS fixed_max,
            max(least(coalesce(burst, permits)::numeric * interval_nanoseconds / 1000 / permits, 2305843009213693952)::bigint)
              FILTER (WHERE algorithm = 'token_bucket') AS bucket
          FROM \(plans) WHERE permits > 0 AND interval_nanoseconds > 0
        )
        """
    }
    let sql = """
      WITH buckets AS (
        SELECT max(tolerance) AS longest, min(tolerance) AS t_min, max(tolerance) AS t_max, min(unit) AS u_min,
          max(unit) AS u_max
        FROM \(tableName)
      ), logs AS (SELECT max(span) AS longest FROM \(sliding)),
      windows AS (SELECT min(span) AS shortest, max(span) AS longest FROM \(fixed))
      \(planned)
      SELECT coalesce(greatest(logs.longest, planned.sliding), 0),
        coalesce(greatest(windows.longest, planned.fixed_max), 0),
        coalesce(greatest(buckets.longest, planned.bucket), 0),
        coalesce(least(windows.shortest, planned.fixed_min), greatest(windows.longest, planned.fixed_max), 0)
          <> coalesce(greatest(windows.longest, planned.fixed_max), 0),
        buckets.t_min <> buckets.t_max OR buckets.u_min <> buckets.u_max OR planned.bucket IS NOT NULL
      FROM buckets, logs, windows, planned
      """
    var lookBacks = PurgeLookBacks()
    let rows = try await client.query(PostgresQuery(unsafeSQL: sql))
    for try await (sliding, fixed, bucket, severalFixed, severalBuckets) in rows.decode(
      (Int64, Int64, Int64, Bool?, Bool?).self)
    {
      lookBacks = PurgeLookBacks(
        sliding: sliding, fixed: fixed, bucket: bucket, severalFixed: severalFixed ?? false,
        severalBuckets: severalBuckets ?? false)
    }
    return lookBacks
  }

  /// Deletes expired rows every ``purgeInterval`` until the task is cancelled or the service group
  /// shuts down gracefully; a purge that fails is logged and tried again at the next interval.
  /// ``run()`` runs it.
  func purgeUntilShutdown() async {
    while !Task.isCancelled && !Task.isShuttingDownGracefully {
      do {
        try await cancelWhenGracefulShutdown { try await Task.sleep(for: purgeInterval) }
      } catch {
        break
      }
      do {
        let purged = try await purgeAllExpired()
        if purged > 0 { logger.debug("purged expired rows", metadata: ["pace.rows": "\(purged)"]) }
      } catch {
        logger.warning("purging expired rows failed", metadata: errorMetadata(error))
      }
    }
  }
}
#endif
