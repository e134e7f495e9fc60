-- The store's single-decision statement as it was before decisions were batched: decisionSQL(table:)
-- of Sources/PacePostgres/PostgresRateLimitStore.swift at commit 7295cb7c7e1094614725614d5fafda67d56bd241
-- (the parent of 3dbf0b0, which batched them), for the table bench_rate_limits (found through the
-- search_path), as a pgbench script. Frozen, so that the yardstick of Scripts/postgres-benchmark.py
-- does not move with the store. The script prepends the line that sets :k (hot or random key);
-- :inc, :tol and :budget are microseconds, :lt the budget as a lock_timeout ("900ms").
WITH proposed AS MATERIALIZED (
  SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS now,
    (extract(epoch FROM transaction_timestamp()) * 1000000)::bigint AS started,
    set_config('lock_timeout', :lt, true) AS lock_timeout
), locked AS MATERIALIZED (
  SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS now
), granted AS (
  INSERT INTO bench_rate_limits AS r (key, tat)
  SELECT ('key-' || :k), proposed.now + :inc FROM proposed WHERE proposed.now - proposed.started <= :budget
  ON CONFLICT (key) DO UPDATE
    SET tat = GREATEST(r.tat, (SELECT now FROM locked)) + :inc
    WHERE GREATEST(r.tat, (SELECT now FROM locked)) + :inc - (SELECT now FROM locked) <= :tol
      AND (SELECT now FROM locked) - (SELECT started FROM proposed) <= :budget
  RETURNING r.tat, CASE WHEN r.tat = (SELECT now FROM proposed) + :inc
    THEN (SELECT now FROM proposed) ELSE (SELECT now FROM locked) END AS now
), denied AS (
  SELECT r.tat FROM bench_rate_limits AS r
  WHERE r.key = ('key-' || :k) AND NOT EXISTS (SELECT 1 FROM granted)
  FOR SHARE
)
SELECT (SELECT tat FROM granted), (SELECT tat FROM denied),
  COALESCE((SELECT now FROM granted), (SELECT now FROM locked)),
  (SELECT now FROM locked) - (SELECT started FROM proposed) > :budget;
