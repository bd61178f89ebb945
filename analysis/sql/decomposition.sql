-- decomposition: every step of every rank split into parts that add up to it exactly.
-- requires: intervals, steps, collectives, collective_summary, p2p
-- Parts (ns), per (rank, step) window of steps.sql, from the rank's timeline activities and
-- its matched collective calls:
--   compute_only        compute with no communication running,
--   compute_overlapped  compute while communication runs (hidden communication),
--   exposed_transfer    communication not hidden by compute, after the last peer arrived (or
--                       communication that no matched instance explains: unmatched calls,
--                       point-to-point, instances of one rank),
--   exposed_wait        communication not hidden by compute, before the last peer arrived:
--                       the rank sits in the collective waiting for a late rank,
--   memory_only         memory copies/sets and nothing else,
--   idle                no activity at all (host, input pipeline, launch latency, sync).
-- compute_only + compute_overlapped = tau_comp; exposed_transfer + exposed_wait = exposed_comm
-- = tau_comm - overlap (overlap.sql); idle is overlap.sql's idle; the six add up to the window.
-- The wait of a call is the aligned [arrival, last arrival) of its instance (collectives.sql),
-- mapped back to the rank's own clock, and cut to the call's duration; only instances that are
-- end-synchronous, seen by >= 2 ranks and whose sizes agree (_sizes_agree: all-to-alls whatever
-- their sizes) have a wait. A call of an
-- instance that a traced rank never joined (a hang: collective_summary's _has_transfer is
-- false) is a wait from start to end: the others sat in it until the timeout, no data moved,
-- and the last of them to arrive did not stop waiting either.

-- wait_intervals(rid): the waiting part of every usable collective call of run `rid`, and of
-- every matched send and receive (p2p_wait_intervals: a receive before its send began).
--   returns   rank, ts, dur (ns, the rank's own clock), kind = 'wait'.
-- Algorithm: [raw_ts, raw_ts + least(wait_ns, dur)) of collective_ranks rows; the whole call
-- for an instance without a transfer.
CREATE OR REPLACE TEMP MACRO wait_intervals(rid) AS TABLE
WITH c AS (
    SELECT rank, raw_ts, wait_ns, dur,
        NOT _has_transfer(rid, n_ranks, complete, group_size) AS hung
    FROM collective_ranks(rid)
    WHERE n_ranks >= 2 AND end_sync AND _sizes_agree(size_mismatch, op) AND dur > 0
)
SELECT rank, raw_ts AS ts, CASE WHEN hung THEN dur ELSE least(wait_ns, dur) END AS dur,
    'wait' AS kind
FROM c
WHERE wait_ns > 0 OR hung
UNION ALL
SELECT * FROM p2p_wait_intervals(rid);

-- _decomposition_rows(rid): timeline activities and wait intervals of run `rid`.
--   returns   rank, ts, dur, kind ('compute' | 'comm' | 'memory' | 'wait').
CREATE OR REPLACE TEMP MACRO _decomposition_rows(rid) AS TABLE
SELECT rank, ts, dur, kind FROM activities
WHERE run_id = rid AND kind IN ('compute', 'comm', 'memory')
UNION ALL
SELECT * FROM wait_intervals(rid);

-- _step_decomposition_from(parts, rid): step_decomposition's rows from the parts per window.
--   parts     table name with rank, step, compute_only_ns, compute_overlapped_ns,
--             exposed_transfer_ns, exposed_wait_ns, memory_only_ns, busy_ns (timeline_parts of
--             the rows clipped to the window; windows without rows may be absent).
--   returns   step_decomposition's columns, one row per step window of the run.
-- Algorithm: step_windows left-joined to `parts` (zeros when absent); idle = window - busy.
CREATE OR REPLACE TEMP MACRO _step_decomposition_from(parts, rid) AS TABLE
SELECT w.rank, w.step, w.dur AS step_ns,
    coalesce(p.compute_only_ns, 0) AS compute_only_ns,
    coalesce(p.compute_overlapped_ns, 0) AS compute_overlapped_ns,
    coalesce(p.exposed_transfer_ns, 0) AS exposed_transfer_ns,
    coalesce(p.exposed_wait_ns, 0) AS exposed_wait_ns,
    coalesce(p.memory_only_ns, 0) AS memory_only_ns,
    w.dur - coalesce(p.busy_ns, 0) AS idle_ns
FROM step_windows(rid) w
LEFT JOIN query_table(parts) p ON p.rank = w.rank AND p.step = w.step
ORDER BY w.rank, w.step;

-- step_decomposition(rid): the parts of every (rank, step) window of run `rid`.
--   returns   rank, step, step_ns (the window length), compute_only_ns,
--             compute_overlapped_ns, exposed_transfer_ns, exposed_wait_ns, memory_only_ns,
--             idle_ns. The six parts add up to step_ns.
-- Algorithm: step_clip of activities and wait intervals, timeline_parts per (rank, step);
-- idle = window - busy; windows without activity are all idle (_step_decomposition_from).
-- (A run's analysis session computes the same parts in one sweep: analysis/steps/sweep.py.)
CREATE OR REPLACE TEMP MACRO step_decomposition(rid) AS TABLE
WITH rows AS MATERIALIZED (SELECT * FROM _decomposition_rows(rid)),
c AS (SELECT {'rank': rank, 'step': step} AS grp, ts, dur, kind FROM step_clip(rows, rid)),
p AS (SELECT grp.rank AS rank, grp.step AS step, * EXCLUDE (grp) FROM timeline_parts(c))
SELECT * FROM _step_decomposition_from(p, rid);

-- _rank_decomposition_from(parts): rank_decomposition's rows from the parts per rank.
--   parts     table name with rank, span_ns (first start to last end of the rank's timeline
--             activity of dur > 0; NULL: none, the rank is left out), compute_only_ns,
--             compute_overlapped_ns, exposed_transfer_ns, exposed_wait_ns, memory_only_ns,
--             busy_ns (timeline_parts of all the rank's rows).
--   returns   rank_decomposition's columns.
-- Algorithm: the ranks with a span; idle = span - busy.
CREATE OR REPLACE TEMP MACRO _rank_decomposition_from(parts) AS TABLE
SELECT rank, span_ns AS step_ns,
    coalesce(compute_only_ns, 0) AS compute_only_ns,
    coalesce(compute_overlapped_ns, 0) AS compute_overlapped_ns,
    coalesce(exposed_transfer_ns, 0) AS exposed_transfer_ns,
    coalesce(exposed_wait_ns, 0) AS exposed_wait_ns,
    coalesce(memory_only_ns, 0) AS memory_only_ns,
    span_ns - coalesce(busy_ns, 0) AS idle_ns
FROM query_table(parts)
WHERE span_ns IS NOT NULL
ORDER BY rank;

-- rank_decomposition(rid): the same parts over each rank's whole trace (first start to last
-- end of its timeline activity), for runs without step annotations.
--   returns   rank, step_ns (the span), the six parts as step_decomposition.
-- Algorithm: timeline_parts grouped by rank; idle = span - busy (_rank_decomposition_from).
-- (A run's analysis session computes the same parts in one sweep: analysis/steps/sweep.py.)
CREATE OR REPLACE TEMP MACRO rank_decomposition(rid) AS TABLE
WITH rows AS MATERIALIZED (SELECT * FROM _decomposition_rows(rid)),
span AS (
    SELECT rank, max(ts + dur) - min(ts) AS span_ns FROM rows
    WHERE kind <> 'wait' AND dur > 0 GROUP BY rank
),
g AS (SELECT rank AS grp, ts, dur, kind FROM rows),
p AS (
    SELECT s.rank, s.span_ns, t.* EXCLUDE (grp)
    FROM span s LEFT JOIN timeline_parts(g) t ON t.grp = s.rank
)
SELECT * FROM _rank_decomposition_from(p);
