-- replay: the inputs of the what-if replay (analysis/replay/engine.py), all on the aligned clock.
-- requires: steps, collectives, intervals, p2p
-- The replay needs, per rank: its step windows, its collective calls with the figures of their
-- instances, and its busy time (to know how much of a gap between two calls was idle). Times
-- are aligned with the per-domain clock offsets of collectives.sql (aligned = raw - offset).

-- rank_offsets(rid): the clock offset of every rank of run `rid` (0 without collectives).
--   returns   rank, offset_ns (raw - aligned).
-- Algorithm: clock_offsets' domains unnested to their ranks.
CREATE OR REPLACE TEMP MACRO rank_offsets(rid) AS TABLE
WITH o AS (SELECT unnest(ranks) AS rank, offset_ns FROM clock_offsets(rid))
SELECT k.rank, coalesce(o.offset_ns, 0) AS offset_ns
FROM (SELECT DISTINCT rank FROM ranks WHERE run_id = rid) k LEFT JOIN o ON o.rank = k.rank;

-- replay_windows(rid): the step windows of run `rid` on the aligned clock.
--   returns   rank, step, ts, dur (ns).
-- Algorithm: step_windows shifted by the rank's offset.
CREATE OR REPLACE TEMP MACRO replay_windows(rid) AS TABLE
SELECT w.rank, w.step, w.ts - coalesce(o.offset_ns, 0) AS ts, w.dur
FROM step_windows(rid) w LEFT JOIN rank_offsets(rid) o ON o.rank = w.rank
ORDER BY w.rank, w.step;

-- replay_issues(rid): when the program issued each collective call that runs on a host thread
-- (gloo: a `c10d::*` op on the calling thread enqueues the work, a worker thread runs it as
-- `gloo:*` when it is free, so the work can start well after the program asked for it).
--   returns   rank, raw_ts (the call's unaligned start), issue_raw (its `c10d::*` op's start).
--   Only ranks whose `c10d::*` ops and host-thread comm calls are equally many: the n-th op
--   issued the n-th call (the workers take work in order); other ranks have no row.
-- Algorithm: both numbered per rank in time order, joined on the number.
CREATE OR REPLACE TEMP MACRO replay_issues(rid) AS TABLE
WITH calls AS (
    SELECT rank, ts, row_number() OVER (PARTITION BY rank ORDER BY ts, tid) AS n
    FROM activities WHERE run_id = rid AND kind = 'comm' AND stream IS NULL
),
ops AS (
    SELECT rank, ts, row_number() OVER (PARTITION BY rank ORDER BY ts, tid) AS n
    FROM activities WHERE run_id = rid AND kind = 'other' AND name LIKE 'c10d::%'
),
paired AS (
    SELECT rank FROM (SELECT rank, count(*) AS k FROM calls GROUP BY rank) c
    JOIN (SELECT rank, count(*) AS k FROM ops GROUP BY rank) o USING (rank, k)
)
SELECT c.rank, c.ts AS raw_ts, min(o.ts) AS issue_raw
FROM calls c JOIN ops o USING (rank, n)
WHERE c.rank IN (SELECT rank FROM paired)
GROUP BY c.rank, c.ts;

-- _replay_barrier(n_ranks, size_mismatch, op): whether a collective instance (collective_ranks'
-- figures) is a barrier of the replay: seen by >= 2 ranks, its calls' sizes agreeing
-- (_sizes_agree: an all-to-all-v's differ by design), sends and receives aside
-- (p2p_replay_rows pairs them).
CREATE OR REPLACE TEMP MACRO _replay_barrier(n_ranks, size_mismatch, op) AS
    n_ranks >= 2 AND _sizes_agree(size_mismatch, op) AND op NOT IN ('send', 'recv');

-- replay_calls_in(rid, steps): replay_calls (below) of the steps in the list `steps` (NULL: all;
-- the rows of instances without a step only then).
--   returns   the columns of replay_calls, the same rows for those steps.
-- Algorithm: the barriers are the collective instances of collective_ranks that
-- _replay_barrier keeps, and the matched point-to-point pairs of p2p_replay_rows (a send and
-- its receive: a barrier of two, which ends when the receive ends: a send may end before its
-- receive begins, an eager send of a small message, and then waits for nothing); kept to the
-- steps first (every call of an instance has the instance's step, so its S and E are those over
-- all of its calls), with S and E per ik by window; the issue shifted by the call's own clock offset (ts - raw_ts); a point-to-point
-- call arrives when it was issued (p2p_calls), its issue.
CREATE OR REPLACE TEMP MACRO replay_calls_in(rid, steps) AS TABLE
WITH b AS (
    SELECT rank, ik, step, ts, te, raw_ts, NULL::BIGINT AS recv_te FROM collective_ranks(rid)
    WHERE _replay_barrier(n_ranks, size_mismatch, op)
    UNION ALL
    SELECT rank, ik, step, ts, te, raw_ts, recv_te FROM p2p_replay_rows(rid)
)
SELECT c.rank, ik, step, c.ts, te, max(c.ts) OVER i AS last_ts,
    coalesce(c.recv_te, round(median(te) OVER i)::BIGINT) AS end_ts,
    CASE WHEN ik < 0 THEN c.ts
        ELSE least(coalesce(q.issue_raw + (c.ts - c.raw_ts), c.ts), c.ts) END AS issue_ts
FROM b c
LEFT JOIN replay_issues(rid) q ON q.rank = c.rank AND q.raw_ts = c.raw_ts
WHERE steps IS NULL OR list_contains(steps, step)
WINDOW i AS (PARTITION BY ik)
ORDER BY c.rank, c.ts;

-- replay_calls(rid): the collective calls of run `rid` that act as barriers in the replay.
--   returns   rank, ik (instance id; negative for a point-to-point pair), step (the
--             instance's step), ts (aligned arrival), te (the call's own aligned end), last_ts
--             (the instance's last arrival S), end_ts (the instance's end E: the median aligned
--             end over its ranks; a point-to-point pair's: its receive's end), issue_ts
--             (aligned time the program issued the call, replay_issues; ts when unknown; never
--             after ts).
--   Only the instances _replay_barrier keeps (>= 2 ranks, sizes agreeing but for all-to-alls)
--   and matched send/receive pairs (p2p.sql); other calls stay inside the gaps.
-- Algorithm: replay_calls_in (above) of every step.
CREATE OR REPLACE TEMP MACRO replay_calls(rid) AS TABLE
SELECT * FROM replay_calls_in(rid, NULL);

-- replay_call_counts(rid): how many rows replay_calls has in each step of run `rid`.
--   returns   step, n (steps with calls; not the calls without a step).
-- Algorithm: replay_calls_in's rows counted (its join to replay_issues matches at most one row
-- per call).
CREATE OR REPLACE TEMP MACRO replay_call_counts(rid) AS TABLE
SELECT step, count(*) AS n FROM (
    SELECT step FROM collective_ranks(rid)
    WHERE _replay_barrier(n_ranks, size_mismatch, op)
    UNION ALL
    SELECT step FROM p2p_replay_rows(rid)
)
WHERE step IS NOT NULL
GROUP BY step;

-- replay_busy(rid): each rank's busy intervals (any timeline activity), merged, aligned.
--   returns   rank, ts, dur: disjoint, in order.
-- Algorithm: interval_merge of compute/comm/memory activities, shifted by the rank's offset.
CREATE OR REPLACE TEMP MACRO replay_busy(rid) AS TABLE
WITH a AS (
    SELECT rank AS grp, ts, dur FROM activities
    WHERE run_id = rid AND kind IN ('compute', 'comm', 'memory')
),
mm AS (SELECT * FROM interval_merge(a))
SELECT mm.grp AS rank, mm.ts - coalesce(o.offset_ns, 0) AS ts, mm.dur
FROM mm LEFT JOIN rank_offsets(rid) o ON o.rank = mm.grp
ORDER BY rank, ts;

-- replay_busy_within(rid, ranges): replay_busy measured only where the replay looks.
--   ranges    table name with rank, lo, hi (aligned ns): per rank the time the replay asks
--             about (the windows and calls of the steps it replays).
--   returns   rank, ts, dur: the merged busy intervals of the rank's activities that overlap
--             [lo, hi] (aligned), in order, which give the same busy time as replay_busy at
--             every instant of [lo, hi]; and first one row (rank, NULL, NULL) per rank with any
--             activity, so that a rank idle over all of its range is told from a rank without
--             activity.
-- Algorithm: interval_merge of the shifted activities that overlap the rank's range (a run whose
-- replay samples a few steps merges a few steps' activities, not all of them).
CREATE OR REPLACE TEMP MACRO replay_busy_within(rid, ranges) AS TABLE
WITH x AS (
    SELECT a.rank, a.ts - coalesce(o.offset_ns, 0) AS ts, a.dur
    FROM activities a LEFT JOIN rank_offsets(rid) o ON o.rank = a.rank
    WHERE a.run_id = rid AND a.kind IN ('compute', 'comm', 'memory') AND a.dur > 0
),
a AS (
    SELECT x.rank AS grp, x.ts, x.dur
    FROM x JOIN query_table(ranges) r ON r.rank = x.rank
    WHERE x.ts <= r.hi AND x.ts + x.dur >= r.lo
)
SELECT rank, ts, dur FROM (
    SELECT grp AS rank, ts, dur FROM interval_merge(a)
    UNION ALL
    SELECT DISTINCT rank, NULL, NULL FROM x
)
ORDER BY rank, ts NULLS FIRST;

-- replay_alltoall_balance(rid): how evenly each all-to-all instance of run `rid` spreads its
-- bytes over the pairs of ranks (for the what-if "experts balanced", analysis/replay/dimensions.py).
--   returns   ik (collective_ranks' instance id), pair_mean_bytes, pair_max_bytes (DOUBLE: the
--             mean and the largest bytes one rank sent one other rank in the instance), n_pairs;
--             instances whose split sizes or group ranks are unknown have no row.
-- Algorithm: every call of the instance (collective_ranks joined to its grouped_calls row on
-- rank, unaligned start, duration and group) split over its group's ranks as alltoall_pairs
-- (dimension.sql) splits it: its input bytes in proportion to its input split sizes (an even
-- split where NULL), to the group's global ranks (the call's pg_ranks, else the group's ranks
-- in process_groups, else 0 .. n-1 for the whole world); a rank's bytes to itself aside.
CREATE OR REPLACE TEMP MACRO replay_alltoall_balance(rid) AS TABLE
WITH pg AS (
    SELECT pg_name, any_value(ranks) AS ranks FROM process_groups
    WHERE run_id = rid GROUP BY pg_name
),
world AS (SELECT max(world_size) AS n FROM ranks WHERE run_id = rid),
g AS MATERIALIZED (
    SELECT rank, ts, dur, pg_name, in_bytes, in_splits, pg_ranks, group_size
    FROM grouped_calls(rid)
    WHERE op = 'alltoall' AND in_bytes IS NOT NULL AND group_size >= 1
        AND unmatched_reason IS NULL
),
r AS MATERIALIZED (
    SELECT ik, rank, raw_ts, dur, pg_name FROM collective_ranks(rid)
    WHERE op = 'alltoall' AND n_ranks >= 2
),
c AS (
    SELECT r.ik, r.rank AS src, any_value(g.in_bytes) AS in_bytes,
        any_value(coalesce(TRY_CAST(g.in_splits AS BIGINT[]),
            list_transform(range(g.group_size), lambda i: 1::BIGINT))) AS w,
        any_value(coalesce(TRY_CAST(g.pg_ranks AS BIGINT[]), TRY_CAST(pg.ranks AS BIGINT[]),
            CASE WHEN g.group_size = (SELECT n FROM world) THEN range(g.group_size) END))
            AS members
    FROM r
    JOIN g ON g.rank = r.rank AND g.ts = r.raw_ts AND g.dur = r.dur
        AND g.pg_name IS NOT DISTINCT FROM r.pg_name
    LEFT JOIN pg ON pg.pg_name = g.pg_name
    GROUP BY r.ik, r.rank
),
p AS (
    SELECT ik, src, in_bytes, w, members, unnest(range(1, len(w) + 1)) AS j
    FROM c WHERE members IS NOT NULL AND len(members) = len(w) AND list_sum(w) > 0
)
SELECT ik, avg(in_bytes * w[j] / list_sum(w)) AS pair_mean_bytes,
    max(in_bytes * w[j] / list_sum(w)) AS pair_max_bytes, count(*) AS n_pairs
FROM p
WHERE members[j] <> src
GROUP BY ik
ORDER BY ik;
