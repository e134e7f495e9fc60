#if PostgreSQL
import PostgresNIO

extension PostgresRateLimitStore {
  /// The statement that makes one token-bucket decision on `table`: for benchmarks and for reading
  /// (the batch function, which the store calls for every batch, one decision through its
  /// overload, makes each token-bucket decision with the same arithmetic; the window policies are decided there only). `$1` key, `$2` `cost × T` and `$3` `τ` in
  /// microseconds (see <doc:SharedRateLimitsAndDebouncing>), `$4` the budget in microseconds,
  /// `$5` the same budget as a `lock_timeout` setting (`"250ms"`).
  ///
  /// - Throws: ``PacePostgresError/invalidTableName(_:)`` if `table` is not a plain identifier.
  public static func decisionStatement(table: String) throws(PacePostgresError) -> String {
    decisionSQL(table: try TableName(table))
  }

  /// One batch: `$1` keys, `$2` policies (``StoredLimit/Algorithm``), `$3` checked amounts, `$4`
  /// capacities, `$5` windows, `$6` whether each takes its permits, `$7` the batch's budget in
  /// microseconds, `$8` the instants to decide at (empty: the database's clock; tests only), `$9`
  /// each token bucket's emission interval per permit (``StoredLimit/unit``), `$10` the batch's
  /// deadline on the database's clock, in microseconds since the Unix epoch (NULL: none known);
  /// a row per decision, by its 1-based index in the arrays.
  static func batchSQL(table: TableName) -> String {
    """
    SELECT * FROM \(functionName(table: table))($1::text[], $2::smallint[], $3::bigint[], $4::bigint[], \
    $5::bigint[], $6::boolean[], $7::bigint, $8::bigint[], $9::bigint[], $10::bigint)
    """
  }

  /// A batch of one: the overload of the batch function that takes one decision's values (see
  /// ``singleFunctionSQL(table:)``), with ``singleBindings(_:budget:)``; the same row.
  static func singleSQL(table: TableName) -> String {
    """
    SELECT * FROM \(functionName(table: table))($1::text, $2::smallint, $3::bigint, $4::bigint, $5::bigint, \
    $6::boolean, $7::bigint, $8::bigint, $9::bigint, $10::bigint)
    """
  }

  /// The binds of ``singleSQL(table:)`` for `request`, with `budget` in microseconds and
  /// `deadline` on the database's clock (nil: none known).
  static func singleBindings(_ request: DecisionRequest, budget: Int64, deadline: Int64? = nil) -> PostgresBindings {
    // Room for the ten binds at once: grown one by one, their buffers were allocated eight times.
    var binds = PostgresBindings(capacity: 10)
    binds.append(request.key)
    binds.append(request.limit.algorithm.rawValue)
    binds.append(request.limit.amount)
    binds.append(request.limit.capacity)
    binds.append(request.limit.window)
    binds.append(request.takes)
    binds.append(budget)
    // NULL: the database's clock decides.
    binds.append(request.databaseNow)
    binds.append(request.limit.unit)
    binds.append(deadline)
    return binds
  }

  /// The binds of ``batchSQL(table:)`` for `requests`, in order, with `budget` in microseconds and
  /// `deadline` on the database's clock (nil: none known).
  static func batchBindings(_ requests: [DecisionRequest], budget: Int64, deadline: Int64? = nil) -> PostgresBindings {
    var binds = PostgresBindings(capacity: 10)
    binds.append(requests.map(\.key))
    binds.append(requests.map(\.limit.algorithm.rawValue))
    binds.append(requests.map(\.limit.amount))
    binds.append(requests.map(\.limit.capacity))
    binds.append(requests.map(\.limit.window))
    binds.append(requests.map(\.takes))
    binds.append(budget)
    // The database's clock decides, unless a test chose the instants: `Int64.min` stands for the
    // database's clock among chosen ones.
    let chosen = requests.contains { $0.databaseNow != nil }
    binds.append(chosen ? requests.map { $0.databaseNow ?? .min } : [Int64]())
    binds.append(requests.map(\.limit.unit))
    binds.append(deadline)
    return binds
  }

  /// The function that decides a batch: in array order, each decision by its policy, in one
  /// transaction. The token bucket's decisions are those of ``decisionSQL(table:)``.
  ///
  /// A loop rather than one statement over `unnest`, because one `INSERT … ON CONFLICT` cannot
  /// touch a row twice, and a key may come twice in a batch. Each decision locks its row with
  /// `SELECT … FOR UPDATE` (or inserts it if there is none), reads the clock once the row is held,
  /// and writes only when it grants: the single statement's arithmetic and order, in plain
  /// statements whose plans PL/pgSQL keeps, which cost the database less than running the
  /// five-CTE statement once per element. A key inserted by another transaction between the look
  /// and the insert is looked at again, locked this time. A decision that takes nothing (a cost of
  /// 0, answered as cost 1 would be) writes nothing.
  ///
  /// - Token bucket, in the store's table: granted if `max(tat, now) + amount - now <= capacity`,
  ///   the new TAT `max(tat, now) + amount`.
  /// - Sliding window, in the `_sliding` table: a log of grant times in order, one entry per permit;
  ///   the entries younger than the window (`g > now - window`) are a suffix, found by binary search
  ///   (`width_bucket`), `used` is their number; granted if `used + amount <= capacity`, which
  ///   keeps them and appends `amount` entries of `now`; denied, the wait is until the entry whose
  ///   expiry frees enough: the `(used + amount - capacity)`-th oldest, plus the window, less now.
  /// - Fixed window, in the `_fixed` table: the window ends at the next multiple of its length
  ///   after now (floor division from the Unix epoch); `used` is the row's count if the row names
  ///   that window, else 0; granted if `used + amount <= capacity`; denied, the wait is until the
  ///   window ends.
  ///
  /// A key with no row under its algorithm may have one under another (its limit changed
  /// algorithm): that state is read under the new limit (see "What a key keeps when its plan
  /// changes" in the article), and moves to the new algorithm's table when the decision writes. A
  /// token bucket's row records its emission interval per permit (`unit`), so that a new rate keeps
  /// the permits owed.
  ///
  /// Each decision gets what is left of the batch's budget as its `lock_timeout` (set again only
  /// when that value, in milliseconds, changes), and one that holds its row after the budget takes
  /// nothing and answers `late`, as the single statement does: a batch whose callers stopped
  /// waiting takes nothing. A lock timeout fails the whole batch (its transaction takes nothing),
  /// and its callers follow the failure policy. A batch that took something and ends after its
  /// budget (a slow trigger, say) raises `query_canceled`, which undoes it: whatever PostgreSQL
  /// waited on, nothing is taken for a caller who was answered by the policy. The budget is always
  /// measured on the database's clock, also when a test chose the instants the policies decide at,
  /// from the transaction's start, and ends at the batch's `deadline` if that comes first: a
  /// statement that reaches the database late (a server starved of CPU) has only what is left of
  /// its caller's wait, so it cannot take after its caller was answered.
  ///
  /// The store calls it, or its overload for one decision, for every batch: its statement names
  /// no table, so the statement's preparation (a transaction of its own, before the budget's clock starts) never
  /// waits for the table's lock; every wait for the table comes after the `lock_timeout` is set.
  static func functionSQL(table: TableName) throws(PacePostgresError) -> String {
    try decisionFunctionSQL(table: table, single: false)
  }

  /// The batch function's overload for a batch of one, with a scalar for each of its arrays (`$8`
  /// NULL for the database's clock): the same decision, in the same body (see
  /// ``decisionFunctionSQL(table:single:)``), without the arrays to build and index, which cost a
  /// lone decision's database time.
  static func singleFunctionSQL(table: TableName) throws(PacePostgresError) -> String {
    try decisionFunctionSQL(table: table, single: true)
  }

  /// The batch function (``functionSQL(table:)``), or its overload for a single decision: one
  /// body, whose loop runs once over the single decision's parameters where the batch's runs over
  /// its arrays, so that the two never decide differently. Without `commonCase` (tests only, under
  /// a name with `suffix`), every decision goes through the general body, which the common case's
  /// path (``tokenBucketCommonCase(table:inputs:clock:guarded:)``) is checked against.
  static func decisionFunctionSQL(
    table: TableName, single: Bool, commonCase: Bool = true, suffix: String = ""
  ) throws(PacePostgresError) -> String {
    // Each decision's inputs, as the body reads them: the `i`-th of each array, or the scalar.
    let inputs = ["keys", "policies", "amounts", "capacities", "windows", "takes", "nows", "units"]
    let types = ["text", "smallint", "bigint", "bigint", "bigint", "boolean", "bigint", "bigint"]
    let names = inputs.map { single ? "one_\($0)" : $0 }
    let read = single ? names : names.map { "\($0)[i]" }
    let (keys, policies, amounts, capacities, windows, takes, nows, units) = (
      read[0], read[1], read[2], read[3], read[4], read[5], read[6], read[7]
    )
    let declared = zip(names, types).map { "\($0) \($1)\(single ? "" : "[]")" }
    let parameters = (declared[0..<6] + ["budget bigint"] + declared[6...] + ["deadline bigint"])
      .joined(separator: ", ")
    let count = single ? "1" : "coalesce(array_length(keys, 1), 0)"
    let clock = "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint"
    let sliding = try table.companion(StoredLimit.Algorithm.slidingWindow)
    let fixed = try table.companion(StoredLimit.Algorithm.fixedWindow)
    return """
      CREATE OR REPLACE FUNCTION \(functionName(table: table, suffix: suffix))(
        \(parameters)
      ) RETURNS TABLE (
        o_index int, o_granted bigint, o_current bigint, o_now bigint, o_late boolean, o_used bigint, o_wait bigint
      )
      LANGUAGE plpgsql AS $pace$
      #variable_conflict use_column
      DECLARE
        started bigint := (extract(epoch FROM transaction_timestamp()) * 1000000)::bigint;
        elapsed bigint;
        timeout bigint := -1;
        -- `set_config`'s answer, unused: an assignment is evaluated as a simple expression, where
        -- `PERFORM` would run a query through the executor.
        lock_setting text;
        held bigint;
        held_used bigint;
        held_grants bigint[];
        held_unit bigint;
        -- The limit a row was last written under (NULL in a row written before they were
        -- recorded): a window's permits and length, a token bucket's tolerance.
        held_permits bigint;
        held_span bigint;
        held_tolerance bigint;
        -- When the row's limit last changed (NULL: not while the row lived), and the same for
        -- another policy's row; `prior` is that instant when this decision is under a limit the
        -- row was not written under (several changes), and `change_written` what the write records.
        held_changed bigint;
        other_changed bigint;
        prior bigint;
        change_written bigint;
        edge bigint;
        steps bigint;
        live bigint[];
        row_found boolean;
        -- The key's state under another policy (its limit changed policy): the table it was
        -- found in (-1: none), and what it holds.
        moved smallint;
        other_tat bigint;
        other_unit bigint;
        other_grants bigint[];
        other_end bigint;
        other_used bigint;
        other_permits bigint;
        other_span bigint;
        -- What the old limit could have let through before what its state records: `per`
        -- permits at `latest`, `latest - step`, … (see "unseen" below).
        per bigint;
        step bigint;
        latest bigint;
        unseen bigint;
        owed numeric;
        rate_unit bigint;
        real_clock bigint;
        clock bigint;
        -- A token bucket's row: the latest instant a grant on it was decided at (NULL in a row
        -- written before it was recorded). A decision never goes back before it: one whose
        -- instant is earlier (it began before a grant it then waited behind) decides at it.
        held_decided bigint;
        window_ends bigint;
        counted bigint;
        charged boolean := false;
      BEGIN
        -- The callers' deadline, on this clock (NULL: none known): a statement that arrived late
        -- has only what is left of it, however much budget it was sent with.
        IF deadline IS NOT NULL AND deadline - started < budget THEN
          budget := deadline - started;
        END IF;\(single && commonCase ? try loneCommonCase(table: table, inputs: read, clock: clock) : "")
        FOR i IN 1 .. \(count) LOOP
          o_index := i;
          o_granted := NULL;
          o_current := NULL;
          o_used := NULL;
          o_wait := NULL;
          real_clock := \(clock);
          elapsed := real_clock - started;
          IF elapsed > budget THEN
            o_now := started + elapsed;
            o_late := true;
          ELSE
            IF greatest(1, (budget - elapsed) / 1000) <> timeout THEN
              timeout := greatest(1, (budget - elapsed) / 1000);
              lock_setting := set_config('lock_timeout', timeout::text || 'ms', true);
            END IF;\(!single && commonCase ? try tokenBucketCommonCase(table: table, inputs: read, clock: clock) : "")
            IF o_granted IS NOT NULL THEN
              o_now := clock;
              o_late := false;
              charged := true;
            ELSE LOOP
              -- Again from the start when a key was inserted meanwhile: nothing of the last look stays.
              o_granted := NULL;
              o_current := NULL;
              o_used := NULL;
              o_wait := NULL;
              -- A token bucket's emission interval per permit; NULL when unknown (a caller of an
              -- earlier version), and then nothing is carried over from another bucket's rate.
              rate_unit := nullif(\(units), 0);
              IF \(policies) = 0 THEN
                SELECT r.tat, r.unit, r.tolerance, r.changed, r.decided
                INTO held, held_unit, held_tolerance, held_changed, held_decided
                FROM \(table) AS r WHERE r.key = \(keys) FOR UPDATE;
              ELSIF \(policies) = 1 THEN
                SELECT r.grants, r.permits, r.span, r.changed INTO held_grants, held_permits, held_span, held_changed
                FROM \(sliding) AS r WHERE r.key = \(keys) FOR UPDATE;
              ELSE
                SELECT r.window_end, r.used, r.permits, r.span, r.changed
                INTO held, held_used, held_permits, held_span, held_changed
                FROM \(fixed) AS r WHERE r.key = \(keys) FOR UPDATE;
              END IF;
              row_found := FOUND;
              moved := -1;
              IF NOT row_found THEN
                -- No state under this policy: the key's limit may have changed policy, and its
                -- state under the old one carries over (and moves here when this decision writes).
                IF \(policies) <> 0 THEN
                  SELECT r.tat, r.unit, r.changed INTO other_tat, other_unit, other_changed
                  FROM \(table) AS r WHERE r.key = \(keys) FOR UPDATE;
                  IF FOUND THEN moved := 0; END IF;
                END IF;
                IF moved < 0 AND \(policies) <> 1 THEN
                  SELECT r.grants, r.permits, r.span, r.changed INTO other_grants, other_permits, other_span, other_changed
                  FROM \(sliding) AS r WHERE r.key = \(keys) FOR UPDATE;
                  IF FOUND THEN moved := 1; END IF;
                END IF;
                IF moved < 0 AND \(policies) <> 2 THEN
                  SELECT r.window_end, r.used, r.permits, r.span, r.changed
                  INTO other_end, other_used, other_permits, other_span, other_changed
                  FROM \(fixed) AS r WHERE r.key = \(keys) FOR UPDATE;
                  IF FOUND THEN moved := 2; END IF;
                END IF;
              END IF;
              real_clock := \(clock);
              clock := coalesce(nullif(\(nows), -9223372036854775808), real_clock);
              IF \(policies) = 0 AND row_found THEN clock := GREATEST(clock, held_decided); END IF;
              o_now := clock;
              o_late := real_clock - started > budget;
              EXIT WHEN o_late;
              -- Another limit than the row's (another policy, or the same with other figures):
              -- the write records `clock` as the change. Where the row's limit had changed before,
              -- at `prior`, the state holds only what its limit counts since: what the limits
              -- before it let through is not recorded, so this limit is taken as used to its
              -- maximum at `prior` (a window full then, a bucket empty then), as memory takes a
              -- limit before the earliest it keeps.
              IF moved >= 0 OR (row_found AND CASE WHEN \(policies) = 0
                THEN held_unit > 0 AND rate_unit IS NOT NULL AND (held_unit <> rate_unit OR held_tolerance <> \(capacities))
                ELSE held_permits > 0 AND (held_permits <> \(capacities) OR held_span <> \(windows)) END) THEN
                prior := CASE WHEN moved >= 0 THEN other_changed ELSE held_changed END;
                change_written := clock;
              ELSE
                prior := NULL;
                change_written := CASE WHEN row_found THEN held_changed END;
              END IF;
              -- The use the old policy's state no longer records, which the new limit may count
              -- (it looks further back): taken as the old limit's maximum, at the latest instants
              -- it allows, as in memory ("A change of plans" in KeyedRateLimiter+PlanChanges):
              -- a sliding window's permits a window apart before its log's start, a fixed
              -- window's at the last instant of each window before its current one, a token
              -- bucket's one more each emission interval before now. Nothing for a row written
              -- before limits were recorded (its old limit is unknown).
              per := NULL;
              IF moved >= 0 AND clock > -4611686018427387904 THEN
                IF moved = 0 AND other_unit > 0 THEN
                  per := 1;
                  step := other_unit;
                  latest := clock - other_unit;
                ELSIF moved > 0 AND other_permits > 0 AND other_span > 0 THEN
                  per := other_permits;
                  step := other_span;
                  latest := CASE WHEN moved = 1 THEN clock - other_span
                    ELSE clock - ((clock % other_span) + other_span) % other_span - 1 END;
                END IF;
              END IF;
              -- The permits a token bucket of another rate or another policy's count left owed at
              -- `clock`: a bucket's debt over its emission interval, a fixed window's count.
              owed := CASE
                WHEN moved = 0 AND other_unit > 0 AND other_tat > clock THEN ceil((other_tat - clock)::numeric / other_unit)
                -- (A fixed window's row of an earlier window: the assumed use covers it.)
                WHEN moved = 2 AND (per IS NULL OR other_end - 1 > latest) THEN other_used
                ELSE 0 END;
              IF moved = 1 AND per IS NOT NULL THEN
                -- The log's grants the old window still counted; the earlier ones are assumed.
                other_grants := ARRAY(SELECT g FROM unnest(other_grants) AS g WHERE g > latest ORDER BY g);
              END IF;
              IF \(policies) = 0 THEN
                IF row_found AND held_unit > 0 AND rate_unit IS NOT NULL AND held_unit <> rate_unit AND held > clock THEN
                  -- Another rate: the permits owed stay owed, at this rate.
                  held := clock + least(ceil((held - clock)::numeric / held_unit) * rate_unit, 2305843009213693951);
                END IF;
                IF row_found AND held_unit > 0 AND held_tolerance > 0 AND rate_unit > held_unit
                  AND \(capacities)::numeric * held_unit > held_tolerance::numeric * rate_unit THEN
                  -- A slower bucket with a larger burst: the use the row no longer records is
                  -- assumed at the old rate, so the new bucket starts empty.
                  held := greatest(held, clock + \(capacities));
                ELSIF NOT row_found THEN
                  held := clock;
                  IF rate_unit IS NOT NULL AND moved = 1 THEN
                    -- A sliding window's grants, replayed through this bucket.
                    owed := NULL;
                    FOR j IN 1 .. coalesce(cardinality(other_grants), 0) LOOP
                      owed := greatest(coalesce(owed, other_grants[j]), other_grants[j]) + rate_unit;
                    END LOOP;
                    held := greatest(clock, least(coalesce(owed, clock), clock + 2305843009213693951));
                  ELSIF rate_unit IS NOT NULL AND moved = 2 THEN
                    -- A fixed window's count, as grants at its last instant (now at the latest).
                    held := greatest(clock, least(least(clock, other_end - 1) + owed * rate_unit, clock + 2305843009213693951));
                  END IF;
                  IF rate_unit IS NOT NULL AND moved > 0 AND per IS NOT NULL THEN
                    -- After a window: empty if the window is faster than this bucket (sustained,
                    -- it would leave any debt); else owing for the latest window before what the
                    -- state records what this rate has not repaid since (each earlier one is
                    -- repaid before the next).
                    IF per::numeric * rate_unit > step THEN
                      held := greatest(held, clock + \(capacities));
                    ELSE
                      held := greatest(held, clock)
                        + greatest(0, least(per::numeric * rate_unit - (clock - latest), 2305843009213693951))::bigint;
                    END IF;
                  END IF;
                END IF;
                IF prior IS NOT NULL AND least(prior, clock) + \(capacities) > clock THEN
                  -- Empty at the earlier change (see `prior`), and not full again yet: empty now.
                  -- (It would owe for the grants since as well, which the row records only in
                  -- part: a bucket owes at most its whole burst at a change.)
                  held := greatest(held, clock + \(capacities));
                END IF;
                -- Denied, or at the end of the timeline, where the new TAT would pass the largest
                -- bigint: the client reads the latter from `held` as a refusal no wait lets through.
                IF GREATEST(held, clock) > 9223372036854775807 - \(amounts)
                  OR GREATEST(held, clock) - clock > \(capacities) - \(amounts) THEN
                  o_current := held;
                  EXIT;
                END IF;
                o_granted := GREATEST(held, clock) + CASE WHEN \(takes) THEN \(amounts) ELSE 0 END;
                EXIT WHEN NOT \(takes);
                IF row_found THEN
                  UPDATE \(table) AS r
                  SET tat = o_granted, unit = rate_unit, tolerance = \(capacities), changed = change_written, decided = clock
                  WHERE r.key = \(keys);
                ELSE
                  INSERT INTO \(table) AS r (key, tat, unit, tolerance, changed, decided)
                  VALUES (\(keys), o_granted, rate_unit, \(capacities), change_written, clock)
                  ON CONFLICT (key) DO NOTHING;
                  CONTINUE WHEN NOT FOUND;
                END IF;
              ELSIF \(policies) = 1 THEN
                -- The log is in order (see below): the entries that left the window are a prefix,
                -- found by binary search.
                IF moved = 1 THEN
                  held_grants := other_grants;
                ELSIF moved = 0 THEN
                  -- A bucket's permits owed, as grants now.
                  held_grants := array_fill(clock, ARRAY[least(owed, \(capacities))::int]);
                ELSIF moved = 2 AND least(clock, other_end - 1) > clock - \(windows) THEN
                  -- A fixed window's count, as grants at its last instant (now at the latest).
                  held_grants := array_fill(least(clock, other_end - 1), ARRAY[least(owed, \(capacities))::int]);
                END IF;
                held_grants := coalesce(held_grants, '{}');
                IF per IS NOT NULL AND latest > clock - \(windows) THEN
                  -- The assumed grants this window counts, before the recorded ones; only the
                  -- latest that can fill it matter.
                  unseen := least(((latest - (clock - \(windows)) - 1) / step + 1)::numeric * per, \(capacities))::bigint;
                  held_grants := ARRAY(
                    SELECT latest - (e / per) * step FROM generate_series(unseen - 1, 0, -1) AS e ORDER BY 1)
                    || held_grants;
                END IF;
                IF row_found AND held_permits > 0 AND \(windows) > held_span AND \(capacities) > held_permits
                  AND clock - held_span > -4611686018427387904 THEN
                  -- A longer window with more permits: the part of it the log no longer records
                  -- is assumed used at the old limit's maximum, its permits at each instant a
                  -- window apart before the old window's start (only the latest that can fill
                  -- the new window matter).
                  edge := clock - held_span;
                  steps := least((\(windows) - 1) / held_span, (\(capacities) + held_permits - 1) / held_permits);
                  held_grants := ARRAY(
                    SELECT edge - k * held_span FROM generate_series(steps - 1, 0, -1) AS k,
                      generate_series(1, held_permits) AS p
                    WHERE edge - k * held_span > -4611686018427387904 ORDER BY 1)
                    || ARRAY(SELECT g FROM unnest(held_grants) AS g WHERE g > edge ORDER BY g);
                END IF;
                IF prior IS NOT NULL AND prior > clock - \(windows) THEN
                  -- Full at the earlier change (see `prior`).
                  held_grants := ARRAY(
                    SELECT g FROM unnest(array_fill(prior, ARRAY[\(capacities)::int]) || held_grants) AS g ORDER BY g);
                END IF;
                live := held_grants[width_bucket(clock - \(windows), held_grants) + 1:];
                counted := cardinality(live);
                o_used := counted;
                IF clock > 9223372036854775807 - \(windows) THEN
                  -- The end of the timeline: a grant's expiry would pass the largest bigint. No
                  -- wait lets it through (a wait of the largest bigint says so).
                  o_wait := 9223372036854775807;
                  EXIT;
                END IF;
                IF counted + \(amounts) > \(capacities) THEN
                  o_wait := live[counted + \(amounts) - \(capacities)] + \(windows) - clock;
                  EXIT;
                END IF;
                o_granted := clock;
                EXIT WHEN NOT \(takes);
                live := live || array_fill(clock, ARRAY[\(amounts)::int]);
                IF counted > 0 AND live[counted] > clock THEN
                  -- The clock went back: the log is kept in order all the same.
                  live := ARRAY(SELECT g FROM unnest(live) AS g ORDER BY g);
                END IF;
                IF row_found THEN
                  UPDATE \(sliding) AS r
                  SET grants = live, expires = greatest(r.expires, clock + \(windows)), permits = \(capacities),
                    span = \(windows), changed = change_written
                  WHERE r.key = \(keys);
                ELSE
                  INSERT INTO \(sliding) AS r (key, expires, grants, permits, span, changed)
                  VALUES (\(keys), clock + \(windows), live, \(capacities), \(windows), change_written)
                  ON CONFLICT (key) DO NOTHING;
                  CONTINUE WHEN NOT FOUND;
                END IF;
              ELSE
                -- Floor division, so that instants before the epoch fall in their own window too.
                window_ends := clock - ((clock % \(windows)) + \(windows)) % \(windows);
                IF window_ends > 9223372036854775807 - \(windows) THEN
                  -- The end of the timeline: the window would end past the largest bigint. No wait
                  -- lets it through (a wait of the largest bigint says so).
                  o_used := 0;
                  o_wait := 9223372036854775807;
                  EXIT;
                END IF;
                window_ends := window_ends + \(windows);
                counted := CASE
                  WHEN row_found AND held = window_ends THEN held_used
                  -- A window of another length that overlaps this one: its count counts here.
                  WHEN row_found AND held > window_ends - \(windows) THEN least(held_used, \(capacities))
                  -- Another policy's state: a sliding window's grants in this window, a bucket's
                  -- permits owed, a fixed window's count while its window overlaps this one.
                  WHEN moved = 1 THEN least(\(capacities), (
                    SELECT count(*) FROM unnest(other_grants) AS g WHERE g >= window_ends - \(windows)))
                  WHEN moved = 0 THEN least(\(capacities), owed)
                  ELSE 0 END;
                IF per IS NOT NULL AND latest >= window_ends - \(windows) THEN
                  -- The assumed grants in this window.
                  counted := least(\(capacities),
                    counted + ((latest - (window_ends - \(windows))) / step + 1)::numeric * per);
                END IF;
                IF row_found AND held_span > 0 AND held_permits > 0 AND \(capacities) > held_permits THEN
                  -- More permits in a window that starts before the old one's current window:
                  -- each old window between the two starts is assumed used at the old limit's
                  -- maximum, since the row records only one.
                  edge := clock - ((clock % held_span) + held_span) % held_span;
                  IF window_ends - \(windows) < edge THEN
                    counted := least(\(capacities),
                      counted + ((edge - (window_ends - \(windows)) - 1) / held_span + 1)::numeric * held_permits);
                  END IF;
                END IF;
                IF prior IS NOT NULL AND prior >= window_ends - \(windows) THEN
                  -- Full at the earlier change (see `prior`).
                  counted := \(capacities);
                END IF;
                o_used := counted;
                -- Not `counted + \(amounts)`, which overflows for a window of `Int64.max` permits.
                IF \(amounts) > \(capacities) - counted THEN
                  o_wait := window_ends - clock;
                  EXIT;
                END IF;
                o_granted := window_ends;
                EXIT WHEN NOT \(takes);
                IF row_found THEN
                  UPDATE \(fixed) AS r
                  SET window_end = window_ends, used = counted + \(amounts), permits = \(capacities), span = \(windows),
                    changed = change_written
                  WHERE r.key = \(keys);
                ELSE
                  INSERT INTO \(fixed) AS r (key, window_end, used, permits, span, changed)
                  VALUES (\(keys), window_ends, counted + \(amounts), \(capacities), \(windows), change_written)
                  ON CONFLICT (key) DO NOTHING;
                  CONTINUE WHEN NOT FOUND;
                END IF;
              END IF;
              -- The state carried over from another policy's table now lives in this one.
              IF moved = 0 THEN
                DELETE FROM \(table) AS r WHERE r.key = \(keys);
              ELSIF moved = 1 THEN
                DELETE FROM \(sliding) AS r WHERE r.key = \(keys);
              ELSIF moved = 2 THEN
                DELETE FROM \(fixed) AS r WHERE r.key = \(keys);
              END IF;
              charged := true;
              EXIT;
            END LOOP; END IF;
          END IF;
          RETURN NEXT;
        END LOOP;
        -- A write that took longer than the budget (a slow trigger, a slow plan, a wait on
        -- anything but a lock) is undone: the callers stopped waiting, so the batch takes nothing.
        IF charged AND \(clock) - started > budget THEN
          RAISE EXCEPTION 'pace: the batch ran past its budget of % microseconds', budget
            USING ERRCODE = 'query_canceled';
        END IF;
      END
      $pace$
      """
  }

  /// A decision's common case, ahead of the general body in the loop of
  /// ``decisionFunctionSQL(table:single:commonCase:suffix:)``: a token bucket's permits taken in
  /// time and allowed, from a row written under the same limit (or under none recorded), or for a
  /// new key with no state under another policy. It decides as the body does in those cases (no
  /// change of limit, so nothing carried over and `changed` kept), in a fraction of its
  /// statements: PL/pgSQL prepares each expression it evaluates once a transaction, and a batch is
  /// a transaction, so the body's preparations were most of a small batch's time in the database.
  ///
  /// An existing row is decided by one `UPDATE`, whose conditions are the grant's, at
  /// `real_clock`: the instant the decision began, read by the caller after its budget check and
  /// before any wait for the row's lock (the body reads the clock once it holds the lock). A
  /// decision that waits for the lock checks the conditions again on the row committed meanwhile,
  /// as an `UPDATE` does, and an earlier instant never grants what a later one would refuse: the
  /// same TAT is further ahead of it. When that `UPDATE` changes nothing, a key with no row in any
  /// policy's table is inserted with a full bucket, at the same instant.
  ///
  /// It sets `o_granted` when it decided; any other case (another limit, state under another
  /// policy, denied, late) goes on to the body, which locks and reads the row and reads the clock
  /// again. `inputs` are the decision's values as the body reads them (see the caller); `guarded`
  /// puts the check that the decision is a token bucket's that takes its permits around it (the
  /// lone decision checks it first itself).
  private static func tokenBucketCommonCase(
    table: TableName, inputs: [String], clock: String, guarded: Bool = true
  ) throws(PacePostgresError) -> String {
    let sliding = try table.companion(StoredLimit.Algorithm.slidingWindow)
    let fixed = try table.companion(StoredLimit.Algorithm.fixedWindow)
    let (keys, policies, amounts, capacities, takes, nows, units) = (
      inputs[0], inputs[1], inputs[2], inputs[3], inputs[5], inputs[6], inputs[7]
    )
    let decision = """
      clock := coalesce(nullif(\(nows), -9223372036854775808), real_clock);
      -- At the row's latest grant's instant if this decision's is earlier (`GREATEST` skips a
      -- NULL `decided`): the grant then leaves what it would in memory, and says so.
      UPDATE \(table) AS r
      SET tat = GREATEST(r.tat, clock, r.decided) + \(amounts), unit = \(units), tolerance = \(capacities),
        decided = GREATEST(clock, r.decided)
      WHERE r.key = \(keys)
        AND ((r.unit = \(units) AND r.tolerance = \(capacities)) OR coalesce(r.unit, 0) <= 0)
        AND GREATEST(r.tat, clock, r.decided) <= 9223372036854775807 - \(amounts)
        AND GREATEST(r.tat, clock, r.decided) - GREATEST(clock, r.decided) <= \(capacities) - \(amounts)
      RETURNING r.tat, r.decided INTO o_granted, held_decided;
      IF o_granted IS NOT NULL THEN clock := held_decided; END IF;
      IF o_granted IS NULL THEN
        -- A new key, with no state under another policy to carry over: a full bucket. Any other
        -- row (another limit, or no permits at that instant) goes on to the body.
        IF \(amounts) <= \(capacities) AND clock <= 9223372036854775807 - \(amounts)
          AND NOT EXISTS (SELECT FROM \(table) AS r WHERE r.key = \(keys))
          AND NOT EXISTS (SELECT FROM \(sliding) AS r WHERE r.key = \(keys))
          AND NOT EXISTS (SELECT FROM \(fixed) AS r WHERE r.key = \(keys)) THEN
          o_granted := clock + \(amounts);
          INSERT INTO \(table) AS r (key, tat, unit, tolerance, changed, decided)
          VALUES (\(keys), o_granted, \(units), \(capacities), NULL, clock)
          ON CONFLICT (key) DO NOTHING;
          -- Inserted meanwhile by another decision: the body decides on its row.
          IF NOT FOUND THEN o_granted := NULL; END IF;
        END IF;
      END IF;
      """
    guard guarded else { return indented(decision, by: 12) }
    return """

                  IF \(policies) = 0 AND \(takes) AND \(units) > 0 THEN\(indented(decision, by: 20))
                  END IF;
      """
  }

  /// `text`'s lines, each on a new line indented by `spaces`.
  private static func indented(_ text: String, by spaces: Int) -> String {
    let indent = String(repeating: " ", count: spaces)
    return text.split(separator: "\n", omittingEmptySubsequences: false).map { "\n\(indent)\($0)" }.joined()
  }

  /// The lone decision's common case (``tokenBucketCommonCase(table:inputs:clock:guarded:)``)
  /// ahead of the loop, which a lone decision then never enters: the loop's own expressions (each
  /// prepared afresh in a lone decision's transaction) cost a lone caller about 1.5 % of its
  /// decisions.
  private static func loneCommonCase(
    table: TableName, inputs: [String], clock: String
  ) throws(PacePostgresError) -> String {
    """

        IF \(inputs[1]) = 0 AND \(inputs[5]) AND \(inputs[7]) > 0 THEN
          real_clock := \(clock);
          elapsed := real_clock - started;
          IF elapsed <= budget THEN
            lock_setting := set_config('lock_timeout', greatest(1, (budget - elapsed) / 1000)::text || 'ms', true);\(
              try tokenBucketCommonCase(table: table, inputs: inputs, clock: clock, guarded: false))
            IF o_granted IS NOT NULL THEN
              IF \(clock) - started > budget THEN
                RAISE EXCEPTION 'pace: the batch ran past its budget of % microseconds', budget
                  USING ERRCODE = 'query_canceled';
              END IF;
              o_index := 1;
              o_now := clock;
              o_late := false;
              RETURN NEXT;
              RETURN;
            END IF;
          END IF;
        END IF;
    """
  }

  /// The batch function and its overload for one decision under the signatures of earlier
  /// versions, for instances not yet upgraded: without a deadline (they decide as before, on
  /// their budget alone), and, for the oldest, without the token buckets' emission intervals
  /// (their decisions carry nothing over from another rate).
  ///
  /// PL/pgSQL, not SQL: a volatile SQL function is never inlined, and PostgreSQL before 18 plans
  /// its body again at every call, which made an instance not yet upgraded decide 12-16 % slower;
  /// PL/pgSQL keeps the plan for the session.
  static func previousFunctionsSQL(table: TableName) -> [String] {
    let name = functionName(table: table)
    let returns = """
      RETURNS TABLE (
        o_index int, o_granted bigint, o_current bigint, o_now bigint, o_late boolean, o_used bigint, o_wait bigint
      )
      """
    return [
      """
      CREATE OR REPLACE FUNCTION \(name)(
        keys text[], policies smallint[], amounts bigint[], capacities bigint[], windows bigint[],
        takes boolean[], budget bigint, nows bigint[]
      ) \(returns)
      LANGUAGE plpgsql AS $pace$
      BEGIN
        RETURN QUERY SELECT * FROM \(name)(keys, policies, amounts, capacities, windows, takes, budget, nows, '{}'::bigint[], NULL);
      END
      $pace$
      """,
      """
      CREATE OR REPLACE FUNCTION \(name)(
        keys text[], policies smallint[], amounts bigint[], capacities bigint[], windows bigint[],
        takes boolean[], budget bigint, nows bigint[], units bigint[]
      ) \(returns)
      LANGUAGE plpgsql AS $pace$
      BEGIN
        RETURN QUERY SELECT * FROM \(name)(keys, policies, amounts, capacities, windows, takes, budget, nows, units, NULL);
      END
      $pace$
      """,
      """
      CREATE OR REPLACE FUNCTION \(name)(
        one_keys text, one_policies smallint, one_amounts bigint, one_capacities bigint, one_windows bigint,
        one_takes boolean, budget bigint, one_nows bigint, one_units bigint
      ) \(returns)
      LANGUAGE plpgsql AS $pace$
      BEGIN
        RETURN QUERY SELECT * FROM \(name)(one_keys, one_policies, one_amounts, one_capacities, one_windows, one_takes, budget,
          one_nows, one_units, NULL);
      END
      $pace$
      """,
    ]
  }

  /// The decision. `$1` key, `$2` the cost's increment of the TAT, `$3` the burst tolerance, `$4`
  /// the statement's budget, all in microseconds; `$5` the budget as a `lock_timeout` setting.
  ///
  /// The clock that decides is read after the row is locked: `locked` is a materialized CTE, read
  /// when the `ON CONFLICT` clause first asks for it, once the row is locked, so decisions on one
  /// key see non-decreasing clocks in the order they hold the row (read before the lock, a
  /// statement that waited would decide, and report `remaining`, with an older clock than the
  /// statement before it). `proposed` is the clock of a new row, which no other statement holds.
  /// `granted` holds the new TAT and the clock it was computed with if the permits were taken
  /// (a TAT of `proposed + $2` is the new row's, or a locked clock equal to `proposed`);
  /// otherwise `denied` reads the row's current TAT (`FOR SHARE` reads the latest committed
  /// version, not the statement's snapshot), to say when the request would be allowed.
  ///
  /// `started` is the transaction's start, when the statement's first message arrived: a wait for
  /// the table's lock comes after it (`statement_timestamp()` would be read after that wait, when
  /// the statement's last message is processed).
  ///
  /// The statement gives up when its caller does: `proposed` sets this transaction's
  /// `lock_timeout` before the row is locked, and a statement that starts deciding after its
  /// budget (it waited for the row, or for the table's lock before it could run at all) takes
  /// nothing and answers `late`, so a decision nobody waits for any more never takes permits.
  static func decisionSQL(table: TableName) -> String {
    """
    WITH proposed AS MATERIALIZED (
      SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS now,
        (extract(epoch FROM transaction_timestamp()) * 1000000)::bigint AS started,
        set_config('lock_timeout', $5, true) AS lock_timeout
    ), locked AS MATERIALIZED (
      SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS now
    ), granted AS (
      INSERT INTO \(table) AS r (key, tat)
      SELECT $1, proposed.now + $2 FROM proposed WHERE proposed.now - proposed.started <= $4
      ON CONFLICT (key) DO UPDATE
        SET tat = GREATEST(r.tat, (SELECT now FROM locked)) + $2
        WHERE GREATEST(r.tat, (SELECT now FROM locked)) + $2 - (SELECT now FROM locked) <= $3
          AND (SELECT now FROM locked) - (SELECT started FROM proposed) <= $4
      RETURNING r.tat, CASE WHEN r.tat = (SELECT now FROM proposed) + $2
        THEN (SELECT now FROM proposed) ELSE (SELECT now FROM locked) END AS now
    ), denied AS (
      SELECT r.tat FROM \(table) AS r
      WHERE r.key = $1 AND NOT EXISTS (SELECT 1 FROM granted)
      FOR SHARE
    )
    SELECT (SELECT tat FROM granted), (SELECT tat FROM denied),
      COALESCE((SELECT now FROM granted), (SELECT now FROM locked)),
      (SELECT now FROM locked) - (SELECT started FROM proposed) > $4
    """
  }
}
#endif
