#if PostgreSQL
import Logging
import PostgresNIO
import ServiceLifecycle

extension PostgresRateLimitStore {
  /// Deletes up to `batchSize` rows that count nothing any more, as if absent: token buckets whose
  /// TAT has passed, sliding windows whose last grant has left the window, fixed windows whose
  /// window has ended. It skips rows that a decision holds locked, so it never blocks one.
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
    // Each table's column that says until when its row counts.
    let tables = [
      (tableName, "tat"), (try tableName.companion(.slidingWindow), "expires"),
      (try tableName.companion(.fixedWindow), "window_end"),
    ]
    for (table, expiry) in tables where count < batchSize {
      let sql = """
        WITH clock AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS now)
        DELETE FROM \(table) AS r USING clock
        WHERE r.ctid IN (
          SELECT e.ctid FROM \(table) AS e, clock WHERE e.\(expiry) < clock.now LIMIT $1 FOR UPDATE OF e SKIP LOCKED
        ) AND r.\(expiry) < clock.now
        RETURNING 1
        """
      var binds = PostgresBindings()
      binds.append(batchSize - count)
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
    let tables = [
      (tableName, "tat"), (try tableName.companion(.slidingWindow), "expires"),
      (try tableName.companion(.fixedWindow), "window_end"),
    ]
    var count = 0
    for (table, expiry) in tables {
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
              AND e.\(expiry) < clock.now
            FOR UPDATE OF e SKIP LOCKED
          ) AND r.\(expiry) < clock.now
          RETURNING 1
        )
        SELECT count(*) FROM deleted
        """
      for first in stride(from: Int64(0), to: pages, by: Int(step)) {
        var binds = PostgresBindings()
        binds.append(first)
        binds.append(first + step)
        let rows = try await client.query(PostgresQuery(unsafeSQL: sql, binds: binds))
        for try await deleted in rows.decode(Int64.self) { count += Int(deleted) }
      }
    }
    return count
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
