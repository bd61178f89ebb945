-- hang_timeline: the last collectives of each rank before a hang, with their Kineto times.
-- requires: hang

-- hang_timeline(rid, n): the last `n` collective entries of every rank and group of run `rid`,
-- joined to the run's Kineto/Nsight collectives of the same rank when there are any.
--   rid       run_id.
--   n         entries per (group, rank), counted back from the rank's highest seq.
--   returns   pg_name, rank, seq, op_name, state, in_nelems, input_dtypes,
--             time_created_ns        when Flight Recorder saw the call enqueued (ns),
--             trace_ts, trace_dur    the matched trace collective's start and duration (ns;
--                                    NULL when none matched),
--             join_key               'seq' (the trace's own seq id equals collective_seq_id) |
--                                    'order' (the trace has no seq ids: the k-th collective of
--                                    the rank in the trace, by start time, is seq k — valid
--                                    when the trace covers the job from its first collective) |
--                                    NULL (no match).
-- Algorithm: trace collectives numbered per (rank, group name or none) by start; an entry
-- matches the row of the same rank whose seq (else number) equals its seq, of the same op
-- and, when the trace names groups, the same group name; and, where the entry has a
-- time_created_ns and the rank's trace an absolute time base, whose start lies within ten
-- minutes of it (the same call is traced when it is enqueued: traces of an earlier window of
-- the job, numbered from their own first collective, would otherwise match by order). A trace
-- that does not name groups is matched only for ranks whose dump holds one group: seq ids
-- count per group, and the trace's collectives of all groups would be numbered together.
CREATE OR REPLACE TEMP MACRO hang_timeline(rid, n) AS TABLE
WITH e AS (
    SELECT *, row_number() OVER (PARTITION BY pg_name, rank ORDER BY seq DESC) AS back
    FROM hang_entries(rid)
),
k AS (
    SELECT rank, ts, dur, op, pg_name, seq,
        row_number() OVER (PARTITION BY rank, pg_name ORDER BY ts, dur) AS ord
    FROM collectives WHERE run_id = rid
),
one_group AS (
    SELECT rank FROM hang_entries(rid) GROUP BY rank HAVING count(DISTINCT pg_name) = 1
),
absolute AS (
    SELECT DISTINCT rank FROM ranks
    WHERE run_id = rid AND time_base IS NOT NULL AND time_base <> 'unknown'
),
m AS (
    SELECT e.pg_name, e.rank, e.seq, k.ts, k.dur,
        CASE WHEN k.seq IS NOT NULL THEN 'seq' ELSE 'order' END AS join_key
    FROM e JOIN k ON k.rank = e.rank AND k.op = e.op
        AND (k.pg_name = e.pg_name
            OR k.pg_name IS NULL AND e.rank IN (SELECT rank FROM one_group))
        AND coalesce(k.seq, k.ord) = e.seq
        AND (e.time_created_ns IS NULL OR e.rank NOT IN (SELECT rank FROM absolute)
            OR abs(k.ts - e.time_created_ns) <= 600000000000)
    WHERE e.back <= n
    QUALIFY row_number() OVER (PARTITION BY e.pg_name, e.rank, e.seq
        ORDER BY k.seq IS NULL, k.ts) = 1
)
SELECT e.pg_name, e.rank, e.seq, e.op_name, e.state, e.in_nelems, e.input_dtypes,
    e.time_created_ns, m.ts AS trace_ts, m.dur AS trace_dur, m.join_key
FROM e LEFT JOIN m USING (pg_name, rank, seq)
WHERE e.back <= n
ORDER BY e.pg_name, e.rank, e.seq;
