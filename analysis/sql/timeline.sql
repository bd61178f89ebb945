-- timeline: what each rank did during one step, reduced to drawable tracks on one clock.
-- requires: intervals, steps, collectives

-- rank_clock(rid): the clock offset of every rank of run `rid` (from its host's clock_offsets).
--   returns   rank, offset_ns (aligned time = raw time - offset_ns).
-- Algorithm: unnest the ranks of each clock domain.
CREATE OR REPLACE TEMP MACRO rank_clock(rid) AS TABLE
SELECT unnest(ranks) AS rank, offset_ns FROM clock_offsets(rid);

-- step_tracks(rid, stp): the busy intervals of every rank of run `rid` in step `stp`, per kind.
--   rid       run_id.
--   stp       step number.
--   returns   rank, kind ('compute' | 'comm' | 'memory'),
--             ts, dur   maximal disjoint intervals (ns) covered by that kind's activities,
--                       clipped to the rank's step window; ts on the aligned clock.
-- Algorithm: step_activities of the step, grouped by (rank, kind), merged with interval_merge,
-- shifted by the rank's clock offset (0 when unknown).
CREATE OR REPLACE TEMP MACRO step_tracks(rid, stp) AS TABLE
WITH a AS (
    SELECT {'rank': rank, 'kind': kind} AS grp, ts, dur
    FROM step_activities(rid) WHERE step = stp
),
merged AS (SELECT grp.rank AS rank, grp.kind AS kind, ts, dur FROM interval_merge(a)),
clock AS (SELECT * FROM rank_clock(rid))
SELECT m.rank, m.kind, m.ts - coalesce(o.offset_ns, 0) AS ts, m.dur
FROM merged m
LEFT JOIN clock o ON o.rank = m.rank;

-- step_origin(rid, stp): where step `stp` of run `rid` begins on the aligned clock.
--   returns   one row: origin_ns, the earliest step-window start over all ranks (NULL when
--             no rank has that step).
-- Algorithm: min over step_windows of ts minus the rank's clock offset.
CREATE OR REPLACE TEMP MACRO step_origin(rid, stp) AS TABLE
SELECT min(w.ts - coalesce(o.offset_ns, 0)) AS origin_ns
FROM step_windows(rid) w
LEFT JOIN rank_clock(rid) o ON o.rank = w.rank
WHERE w.step = stp;

-- rank_step_wait(rid): how long each rank waited for its peers in each step.
--   returns   rank, step, wait_ms (DOUBLE, ms: the sum of the rank's wait_ns over the
--             end-synchronous collective instances of the step), n_calls.
-- Algorithm: collective_ranks filtered on end_sync, grouped by (rank, step).
CREATE OR REPLACE TEMP MACRO rank_step_wait(rid) AS TABLE
SELECT rank, step, sum(wait_ns) / 1e6 AS wait_ms, count(*) AS n_calls
FROM collective_ranks(rid)
WHERE end_sync AND step IS NOT NULL
GROUP BY rank, step;
