-- steps: where each training step lies on a rank's timeline, and the activities within it.

-- step_windows(rid): the device window of every (rank, step) of run `rid`.
--   rid       run_id.
--   returns   rank, step,
--             ts, dur        the window [ts, ts + dur) in ns on the rank's timeline,
--             cpu_ts, cpu_dur the host annotation (ProfilerStep#N) the window comes from,
--             n_launched     timeline activities launched within the host annotation.
-- Algorithm: an activity belongs to step N when the host issued it inside step N's host
-- window (launch_ts ∈ [cpu_ts, cpu_ts + cpu_dur)): a GPU kernel through its launching runtime
-- call, a CPU op by its own start. The window of step N starts at the first start of its
-- activities (the host start when it has none) and ends where the next step's window starts;
-- the last step ends at the later of its host end and its last activity's end. Windows thus
-- partition the rank's timeline: GPU work that runs after the host moved on is counted in
-- its own step, and no nanosecond is counted twice. A step whose activities all ran on the
-- host (a CPU trace: each starts where it was issued) starts at its host start instead, unless
-- the previous step's activities were still running then (from their last end, or its first
-- activity if earlier): the time the host spent in the step before its first operator (a
-- data-loader wait, a stall before the forward pass) is the step's own, not the previous
-- step's tail.
CREATE OR REPLACE TEMP MACRO step_windows(rid) AS TABLE
WITH s AS (
    SELECT rank, step, ts, dur FROM steps WHERE run_id = rid
),
a AS (
    SELECT rank, ts, dur, launch_ts FROM activities
    WHERE run_id = rid AND kind IN ('compute', 'comm', 'memory')
),
assigned AS (
    SELECT s.rank, s.step, min(a.ts) AS first_ts, max(a.ts + a.dur) AS last_te, count(*) AS n,
        bool_and(a.launch_ts = a.ts) AS host_only
    FROM a JOIN s
        ON a.rank = s.rank AND a.launch_ts >= s.ts AND a.launch_ts < s.ts + s.dur
    GROUP BY s.rank, s.step
),
j AS (
    SELECT s.rank, s.step, s.ts AS cpu_ts, s.dur AS cpu_dur, x.first_ts, x.last_te, x.n,
        x.host_only, lag(x.last_te) OVER (PARTITION BY s.rank ORDER BY s.step) AS prev_te
    FROM s LEFT JOIN assigned x ON s.rank = x.rank AND s.step = x.step
),
b AS (
    SELECT rank, step, cpu_ts, cpu_dur,
        CASE WHEN host_only THEN least(first_ts, greatest(cpu_ts, coalesce(prev_te, cpu_ts)))
             ELSE coalesce(first_ts, cpu_ts) END AS start_ts,
        greatest(cpu_ts + cpu_dur, coalesce(last_te, cpu_ts + cpu_dur)) AS natural_end,
        coalesce(n, 0) AS n_launched
    FROM j
)
SELECT rank, step, start_ts AS ts,
    greatest(coalesce(lead(start_ts) OVER w, natural_end) - start_ts, 0) AS dur,
    cpu_ts, cpu_dur, n_launched
FROM b
WINDOW w AS (PARTITION BY rank ORDER BY step);

-- step_clip(tbl, rid): intervals of run `rid` clipped to each step window.
--   tbl       table name with rank, ts, dur (int64 ns, on the rank's own clock), kind.
--   rid       run_id (for step_windows).
--   returns   rank, step, ts, dur, kind: every interval overlapping a window of its rank, cut to
--             [window ts, window end). An interval spanning two windows appears in both, each
--             time with only its part inside.
-- Algorithm: interval join with step_windows on rank and overlap, then greatest/least
-- clipping. The one place where anything is assigned to steps by time.
CREATE OR REPLACE TEMP MACRO step_clip(tbl, rid) AS TABLE
SELECT w.rank, w.step,
    greatest(a.ts, w.ts) AS ts,
    least(a.ts + a.dur, w.ts + w.dur) - greatest(a.ts, w.ts) AS dur,
    a.kind
FROM query_table(tbl) a
JOIN step_windows(rid) w
    ON a.rank = w.rank AND a.ts < w.ts + w.dur AND a.ts + a.dur > w.ts;

-- step_activities(rid): timeline activities of run `rid` clipped to each step window.
--   returns   rank, step, ts, dur, kind: every compute/comm/memory activity overlapping the
--             window, cut to [window ts, window end) (step_clip).
-- Algorithm: step_clip over the run's timeline activities.
CREATE OR REPLACE TEMP MACRO step_activities(rid) AS TABLE
WITH a AS (
    SELECT rank, ts, dur, kind FROM activities
    WHERE run_id = rid AND kind IN ('compute', 'comm', 'memory')
)
SELECT * FROM step_clip(a, rid);
