-- idle: what a rank's timeline waits for when it sits idle.
-- requires: steps
-- An idle device is usually starved by its host (input pipeline, Python, launch overhead): the
-- work that ends the gap is issued only after the gap began. When the work was issued before
-- the gap began, the host is ahead and the device held queued work without running it: it
-- waited on something the trace does not show (a CUDA graph's internal order, an event or a
-- stream waiting on other work, another process on the GPU). Faster input or launches cannot
-- shorten such a gap.

-- idle_gaps(rid): the idle gaps of each rank's timeline, and how much of them had work queued.
--   rid       run_id.
--   returns   rank,
--             gaps_ns     total length of the gaps between the rank's timeline activities
--                         (compute, comm, memory: no activity runs), within the span of its
--                         step windows (steps.sql; the whole trace when it has no steps),
--             queued_ns   the part of those gaps during which the activity that ends the gap
--                         had been issued by the host already (launch_ts before the gap's end),
--             launched    timeline activities the host issued before they started
--                         (launch_ts < ts: GPU work; a CPU activity has launch_ts = ts),
--             lead_ns     median ts - launch_ts over those (NULL when none): how far ahead of
--                         the device the host issues its work.
--             One row per rank with timeline activity.
-- Algorithm: per rank, the activities in (ts, launch_ts) order; a gap ends at an activity's
-- start when the latest end of every earlier activity (a running max) lies before it, and its
-- queued part runs from the later of the gap's start and that activity's launch_ts to its
-- start. Gaps are clipped to [first window start, last window end) of the rank.
CREATE OR REPLACE TEMP MACRO idle_gaps(rid) AS TABLE
WITH a AS (
    SELECT rank, ts, dur, coalesce(launch_ts, ts) AS launch_ts FROM activities
    WHERE run_id = rid AND kind IN ('compute', 'comm', 'memory')
),
span AS (
    SELECT rank, min(ts) AS lo, max(ts + dur) AS hi FROM step_windows(rid) GROUP BY rank
),
g AS (
    SELECT rank, ts, launch_ts,
        max(ts + dur) OVER (
            PARTITION BY rank ORDER BY ts, launch_ts
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) AS prev_end
    FROM a
),
gaps AS (
    SELECT g.rank,
        greatest(g.prev_end, coalesce(s.lo, g.prev_end)) AS gs,
        least(g.ts, coalesce(s.hi, g.ts)) AS ge,
        g.launch_ts
    FROM g LEFT JOIN span s ON s.rank = g.rank
    WHERE g.prev_end < g.ts
),
per_gap AS (
    SELECT rank,
        sum(greatest(ge - gs, 0)) AS gaps_ns,
        sum(greatest(ge - greatest(gs, launch_ts), 0)) AS queued_ns
    FROM gaps GROUP BY rank
),
lead AS (
    SELECT rank,
        count(*) FILTER (WHERE launch_ts < ts) AS launched,
        median(ts - launch_ts) FILTER (WHERE launch_ts < ts) AS lead_ns
    FROM a GROUP BY rank
)
SELECT l.rank,
    coalesce(p.gaps_ns, 0)::BIGINT AS gaps_ns,
    coalesce(p.queued_ns, 0)::BIGINT AS queued_ns,
    l.launched::BIGINT AS launched,
    l.lead_ns::BIGINT AS lead_ns
FROM lead l LEFT JOIN per_gap p ON p.rank = l.rank
ORDER BY l.rank;
