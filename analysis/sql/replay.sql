-- replay: the inputs of the what-if replay (analysis/replay.py), all on the aligned clock.
-- requires: steps, collectives, intervals
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

-- replay_calls(rid): the collective calls of run `rid` that act as barriers in the replay.
--   returns   rank, ik (instance id), step (the instance's step), ts (aligned arrival), te
--             (the call's own aligned end), last_ts (the instance's last arrival S), end_ts (the
--             instance's end E: the median aligned end over its ranks).
--   Only instances seen by >= 2 ranks without size mismatch; other calls stay inside the gaps.
-- Algorithm: collective_ranks, with S and E per ik by window.
CREATE OR REPLACE TEMP MACRO replay_calls(rid) AS TABLE
SELECT rank, ik, step, ts, te, max(ts) OVER i AS last_ts,
    round(median(te) OVER i)::BIGINT AS end_ts
FROM collective_ranks(rid)
WHERE n_ranks >= 2 AND NOT size_mismatch
WINDOW i AS (PARTITION BY ik)
ORDER BY rank, ts;

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
