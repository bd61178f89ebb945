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

-- run_span(rid): where the timeline of run `rid` begins and ends on the aligned clock (for
-- runs without step annotations, drawn in windows of this span).
--   returns   one row: start_ns, end_ns (both NULL when the run has no timeline activity).
-- Algorithm: min of ts and max of ts + dur over compute/comm/memory activities, each shifted
-- by its rank's clock offset (0 when unknown).
CREATE OR REPLACE TEMP MACRO run_span(rid) AS TABLE
SELECT min(a.ts - coalesce(o.offset_ns, 0)) AS start_ns,
    max(a.ts + a.dur - coalesce(o.offset_ns, 0)) AS end_ns
FROM activities a
LEFT JOIN rank_clock(rid) o ON o.rank = a.rank
WHERE a.run_id = rid AND a.kind IN ('compute', 'comm', 'memory');

-- window_tracks(rid, t0, t1): the busy intervals of every rank of run `rid` in the window
-- [t0, t1) of the aligned clock, per kind (step_tracks for a window instead of a step).
--   returns   rank, kind, ts, dur: maximal disjoint intervals (ns) covered by that kind's
--             activities, clipped to the window; ts on the aligned clock.
-- Algorithm: activities shifted by their rank's clock offset, those overlapping the window
-- clipped to it, grouped by (rank, kind) and merged with interval_merge.
CREATE OR REPLACE TEMP MACRO window_tracks(rid, t0, t1) AS TABLE
WITH s AS (
    SELECT a.rank, a.kind, a.ts - coalesce(o.offset_ns, 0) AS ts, a.dur
    FROM activities a
    LEFT JOIN rank_clock(rid) o ON o.rank = a.rank
    WHERE a.run_id = rid AND a.kind IN ('compute', 'comm', 'memory')
),
a AS (
    SELECT {'rank': rank, 'kind': kind} AS grp,
        greatest(ts, t0) AS ts,
        least(ts + dur, t1) - greatest(ts, t0) AS dur
    FROM s WHERE ts < t1 AND ts + dur > t0
)
SELECT grp.rank AS rank, grp.kind AS kind, ts, dur FROM interval_merge(a);

-- step_track_names(rid, stp, rks): step_tracks of the ranks in list `rks`, each busy interval
-- with the activity that covers most of it named (for tooltips).
--   returns   rank, kind, ts, dur (as step_tracks), top_name (the name of the activity with the
--             longest overlap with the interval), top_ns (that overlap, ns), n_activities
--             (activities overlapping the interval).
-- Algorithm: the run's activities of those ranks and kinds, shifted by the rank's clock
-- offset, range-joined to the intervals they overlap; arg_max of the overlap per interval.
CREATE OR REPLACE TEMP MACRO step_track_names(rid, stp, rks) AS TABLE
WITH t AS (SELECT * FROM step_tracks(rid, stp) WHERE list_contains(rks, rank)),
lim AS (SELECT min(ts) AS lo, max(ts + dur) AS hi FROM t),
a AS (
    SELECT a.rank, a.kind, a.ts - coalesce(o.offset_ns, 0) AS ts, a.dur, a.name
    FROM activities a
    LEFT JOIN rank_clock(rid) o ON o.rank = a.rank
    WHERE a.run_id = rid AND a.kind IN ('compute', 'comm', 'memory')
        AND list_contains(rks, a.rank)
),
near AS (SELECT a.* FROM a, lim WHERE a.ts < lim.hi AND a.ts + a.dur > lim.lo),
o AS (
    SELECT t.rank, t.kind, t.ts, t.dur, n.name,
        least(n.ts + n.dur, t.ts + t.dur) - greatest(n.ts, t.ts) AS overlap
    FROM t JOIN near n
        ON n.rank = t.rank AND n.kind = t.kind AND n.ts < t.ts + t.dur AND n.ts + n.dur > t.ts
)
SELECT rank, kind, ts, dur, arg_max(name, overlap) AS top_name, max(overlap) AS top_ns,
    count(*) AS n_activities
FROM o
GROUP BY rank, kind, ts, dur;
