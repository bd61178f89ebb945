-- overlap: compute/communication overlap metrics per rank (whole trace) and per step.
-- requires: intervals, steps
-- Definitions (ns unless noted):
--   tau_comp = |∪ compute|, tau_comm = |∪ comm|, overlap = |∪ compute ∩ ∪ comm|,
--   eta = overlap / min(tau_comp, tau_comm)   (NULL when the minimum is 0),
--   gamma = tau_comm / tau_comp                (NULL when tau_comp is 0),
--   exposed_comm = tau_comm - overlap,
--   idle = span - |∪ all timeline activity|,
--   comm_overlap_fraction = overlap / tau_comm (HTA's comp_comm_overlap_pctg / 100).

-- _overlap_ratios(tbl): adds the ratio columns to a table of covered times.
--   tbl       table name with span_ns, compute_ns, comm_ns, both_ns, busy_ns.
--   returns   all of tbl's columns plus eta, gamma, exposed_comm_ns, idle_ns,
--             comm_overlap_fraction.
-- Algorithm: plain arithmetic; NULLIF guards the divisions.
CREATE OR REPLACE TEMP MACRO _overlap_ratios(tbl) AS TABLE
SELECT *,
    both_ns / NULLIF(least(compute_ns, comm_ns), 0) AS eta,
    comm_ns / NULLIF(compute_ns, 0) AS gamma,
    comm_ns - both_ns AS exposed_comm_ns,
    greatest(span_ns - busy_ns, 0) AS idle_ns,
    both_ns / NULLIF(comm_ns, 0) AS comm_overlap_fraction
FROM query_table(tbl);

-- _rank_overlap_from(cover, rid): rank_overlap's rows from covered times per rank.
--   cover     table name with rank, span_ns, compute_ns, comm_ns, both_ns, busy_ns: one row per
--             rank with timeline activity of dur > 0 (timeline_cover's figures and the span).
--   returns   rank_overlap's columns, one row per rank of the run.
-- Algorithm: the run's ranks left-joined to `cover` (zeros when absent), then _overlap_ratios.
CREATE OR REPLACE TEMP MACRO _rank_overlap_from(cover, rid) AS TABLE
WITH r AS (
    SELECT k.rank,
        coalesce(c.span_ns, 0) AS span_ns,
        coalesce(c.compute_ns, 0) AS compute_ns,
        coalesce(c.comm_ns, 0) AS comm_ns,
        coalesce(c.both_ns, 0) AS both_ns,
        coalesce(c.busy_ns, 0) AS busy_ns
    FROM (SELECT rank FROM ranks WHERE run_id = rid) k
    LEFT JOIN query_table(cover) c ON c.rank = k.rank
)
SELECT * FROM _overlap_ratios(r) ORDER BY rank;

-- rank_overlap(rid): whole-trace metrics per rank of run `rid` (HTA's scope: every timeline
-- activity in the file, warm-up included).
--   returns   rank, span_ns (first start to last end of timeline activity), compute_ns,
--             comm_ns, both_ns, busy_ns, eta, gamma, exposed_comm_ns, idle_ns,
--             comm_overlap_fraction. Ranks without timeline activity have zeros and NULLs.
-- Algorithm: timeline_cover grouped by rank; span from min/max over the same rows;
-- _rank_overlap_from. (A run's analysis session computes the same figures in one sweep:
-- analysis/steps/sweep.py.)
CREATE OR REPLACE TEMP MACRO rank_overlap(rid) AS TABLE
WITH a AS (
    SELECT rank AS grp, ts, dur, kind FROM activities
    WHERE run_id = rid AND kind IN ('compute', 'comm', 'memory')
),
span AS (SELECT grp, max(ts + dur) - min(ts) AS span_ns FROM a WHERE dur > 0 GROUP BY grp),
cover AS (
    SELECT c.grp AS rank, s.span_ns, c.compute_ns, c.comm_ns, c.both_ns, c.busy_ns
    FROM timeline_cover(a) c JOIN span s ON s.grp = c.grp
)
SELECT * FROM _rank_overlap_from(cover, rid);

-- _step_overlap_from(cover, rid): step_overlap's rows from covered times per step window.
--   cover     table name with rank, step, compute_ns, comm_ns, both_ns, busy_ns (timeline_cover
--             of the activities clipped to the window; windows without activity may be absent).
--   returns   step_overlap's columns, one row per step window of the run.
-- Algorithm: step_windows left-joined to `cover` (zeros when absent), then _overlap_ratios.
CREATE OR REPLACE TEMP MACRO _step_overlap_from(cover, rid) AS TABLE
WITH r AS (
    SELECT w.rank, w.step,
        w.dur AS span_ns,
        coalesce(c.compute_ns, 0) AS compute_ns,
        coalesce(c.comm_ns, 0) AS comm_ns,
        coalesce(c.both_ns, 0) AS both_ns,
        coalesce(c.busy_ns, 0) AS busy_ns
    FROM step_windows(rid) w
    LEFT JOIN query_table(cover) c ON c.rank = w.rank AND c.step = w.step
)
SELECT * FROM _overlap_ratios(r) ORDER BY rank, step;

-- step_overlap(rid): the same metrics per (rank, step) of run `rid`, inside step windows.
--   returns   rank, step, span_ns (= the window length, the step time), compute_ns,
--             comm_ns, both_ns, busy_ns, eta, gamma, exposed_comm_ns, idle_ns,
--             comm_overlap_fraction.
-- Algorithm: timeline_cover over step_activities grouped by (rank, step); windows without
-- activity keep their length as idle (_step_overlap_from). (A run's analysis session computes
-- the same figures in one sweep: analysis/steps/sweep.py.)
CREATE OR REPLACE TEMP MACRO step_overlap(rid) AS TABLE
WITH a AS (
    SELECT {'rank': rank, 'step': step} AS grp, ts, dur, kind FROM step_activities(rid)
),
cover AS (
    SELECT grp.rank AS rank, grp.step AS step, compute_ns, comm_ns, both_ns, busy_ns
    FROM timeline_cover(a)
)
SELECT * FROM _step_overlap_from(cover, rid);
