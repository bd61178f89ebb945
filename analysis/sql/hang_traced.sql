-- hang_traced: whether a run's traces reach the collective its job hung in.
-- requires: hang_findings
--
-- A profiler often records a few steps early in a job that hangs hours later: then the traces
-- are a healthy window and their figures say nothing about the hang. When they reach it (the
-- profiler was still recording), the hung collective's wait until the timeout is in them and
-- reads as communication. Flight Recorder's `time_created_ns` and the traces' times are both
-- nanoseconds since the epoch on the ranks' hosts, so the two can be compared wherever every
-- rank's trace has an absolute time base.

-- hang_traced(rid): for every hung call that hang_findings(rid) names, whether the traces reach
-- it.
--   rid         run_id.
--   returns     pg_name, seq      the hung call (as hang_findings names it),
--               created_ns        the earliest time_created_ns of its entries on any rank
--                                 (NULL when no rank entered it),
--               traces_end_ns     the latest end of any activity of the run (NULL: no traces),
--               in_traces         traces_end_ns >= created_ns; NULL (not known) when either is
--                                 NULL or a rank's trace has no absolute time base (time_base
--                                 'unknown').
-- Algorithm: one aggregate per input; time bases are those of the ranks table's rows that
-- have one (Flight Recorder and NCCL log rows have none).
CREATE OR REPLACE TEMP MACRO hang_traced(rid) AS TABLE
WITH f AS (
    SELECT DISTINCT pg_name, seq FROM hang_findings(rid)
),
c AS (
    SELECT f.pg_name, f.seq, min(e.time_created_ns) AS created_ns
    FROM f JOIN hang_entries(rid) e USING (pg_name, seq)
    GROUP BY f.pg_name, f.seq
),
t AS (
    SELECT max(ts + dur) AS traces_end_ns FROM activities WHERE run_id = rid
),
b AS (
    SELECT coalesce(bool_and(time_base <> 'unknown'), false) AS absolute
    FROM ranks WHERE run_id = rid AND time_base IS NOT NULL
)
SELECT f.pg_name, f.seq, c.created_ns, t.traces_end_ns,
    CASE WHEN c.created_ns IS NULL OR t.traces_end_ns IS NULL OR NOT b.absolute THEN NULL
        ELSE t.traces_end_ns >= c.created_ns END AS in_traces
FROM f LEFT JOIN c USING (pg_name, seq) CROSS JOIN t CROSS JOIN b
ORDER BY f.pg_name, f.seq;
