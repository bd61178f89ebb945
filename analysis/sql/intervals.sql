-- intervals: generic interval algebra over (grp, ts, dur) tables. No knowledge of traces.
-- Callers rename their columns to grp (any type, e.g. a struct), ts and dur (int64 ns).

-- timeline_cover(tbl): covered time per group of compute, comm, both, and any activity.
--   tbl       table name (table, view or CTE) with columns grp, ts BIGINT, dur BIGINT,
--             kind VARCHAR ('compute' | 'comm' | 'memory').
--   returns   grp,
--             compute_ns  length of the union of compute intervals,
--             comm_ns     length of the union of comm intervals,
--             both_ns     length of (union of compute) ∩ (union of comm),
--             busy_ns     length of the union of all intervals (any kind).
--   Rows with dur <= 0 contribute nothing. Groups without rows are absent.
-- Algorithm: sweep line. Each interval adds +1 to its kind's depth (and to the total depth)
-- at ts and -1 at ts + dur; the running depths over events ordered by t hold on the
-- segment [t, next t). A segment is credited to every set whose depth is > 0. Ties make
-- zero-length segments, which add nothing whatever their order (ROWS frame, not RANGE).
CREATE OR REPLACE TEMP MACRO timeline_cover(tbl) AS TABLE
WITH ev AS (
    SELECT grp, ts AS t, (kind = 'compute')::INT AS dc, (kind = 'comm')::INT AS dm, 1 AS da
    FROM query_table(tbl) WHERE dur > 0
    UNION ALL
    SELECT grp, ts + dur, -(kind = 'compute')::INT, -(kind = 'comm')::INT, -1
    FROM query_table(tbl) WHERE dur > 0
),
d AS (
    SELECT grp, t,
        sum(dc) OVER w AS nc, sum(dm) OVER w AS nm, sum(da) OVER w AS na,
        lead(t) OVER w AS t_next
    FROM ev
    WINDOW w AS (PARTITION BY grp ORDER BY t ROWS UNBOUNDED PRECEDING)
)
SELECT grp,
    coalesce(sum(t_next - t) FILTER (WHERE nc > 0), 0)::BIGINT AS compute_ns,
    coalesce(sum(t_next - t) FILTER (WHERE nm > 0), 0)::BIGINT AS comm_ns,
    coalesce(sum(t_next - t) FILTER (WHERE nc > 0 AND nm > 0), 0)::BIGINT AS both_ns,
    coalesce(sum(t_next - t) FILTER (WHERE na > 0), 0)::BIGINT AS busy_ns
FROM d
GROUP BY grp;

-- interval_merge(tbl): the disjoint union of intervals per group.
--   tbl       table name with columns grp, ts BIGINT, dur BIGINT.
--   returns   grp, ts, dur: maximal disjoint intervals covering the same time; touching
--             intervals ([0,5) and [5,9)) merge. Rows with dur <= 0 are ignored.
-- Algorithm: gaps and islands. Order by (ts, end); a row opens a new island when it starts
-- after the largest end of all earlier rows; islands are aggregated to (min ts, max end).
CREATE OR REPLACE TEMP MACRO interval_merge(tbl) AS TABLE
WITH e AS (
    SELECT grp, ts, ts + dur AS te,
        max(ts + dur) OVER (PARTITION BY grp ORDER BY ts, ts + dur
                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_te
    FROM query_table(tbl) WHERE dur > 0
),
i AS (
    SELECT grp, ts, te,
        sum((prev_te IS NULL OR ts > prev_te)::INT)
            OVER (PARTITION BY grp ORDER BY ts, te ROWS UNBOUNDED PRECEDING) AS island
    FROM e
)
SELECT grp, min(ts) AS ts, max(te) - min(ts) AS dur
FROM i
GROUP BY grp, island;

-- timeline_parts(tbl): every instant of a group's timeline assigned to exactly one part.
--   tbl       table name with columns grp, ts BIGINT, dur BIGINT, kind VARCHAR ('compute' |
--             'comm' | 'wait' | 'memory'). 'wait' intervals mark the part of a communication
--             interval spent before the last peer arrived; they lie inside 'comm' intervals.
--   returns   grp,
--             compute_only_ns        compute, no communication,
--             compute_overlapped_ns  compute and communication at once,
--             exposed_transfer_ns    communication, no compute, some of it past its wait,
--             exposed_wait_ns        communication, no compute, all of it waiting for peers,
--             memory_only_ns         memory copies/sets only,
--             busy_ns                length of the union of all intervals (= the five above).
--   Rows with dur <= 0 contribute nothing.
-- Algorithm: the sweep line of timeline_cover with four depths (compute c, comm m, wait w,
-- memory y); each segment goes to the first part whose condition holds, in the order above:
-- c > 0 and (m > 0 or w > 0); c > 0; m > w (a comm interval not in its wait); w > 0 or m > 0;
-- y > 0. So the parts are disjoint and add up to busy_ns exactly.
CREATE OR REPLACE TEMP MACRO timeline_parts(tbl) AS TABLE
WITH ev AS (
    SELECT grp, ts AS t, (kind = 'compute')::INT AS dc, (kind = 'comm')::INT AS dm,
        (kind = 'wait')::INT AS dw, (kind = 'memory')::INT AS dy
    FROM query_table(tbl) WHERE dur > 0
    UNION ALL
    SELECT grp, ts + dur, -(kind = 'compute')::INT, -(kind = 'comm')::INT,
        -(kind = 'wait')::INT, -(kind = 'memory')::INT
    FROM query_table(tbl) WHERE dur > 0
),
d AS (
    SELECT grp, t,
        sum(dc) OVER w AS c, sum(dm) OVER w AS m, sum(dw) OVER w AS wt, sum(dy) OVER w AS y,
        lead(t) OVER w AS t_next
    FROM ev
    WINDOW w AS (PARTITION BY grp ORDER BY t ROWS UNBOUNDED PRECEDING)
),
p AS (
    SELECT grp, t_next - t AS len,
        CASE
            WHEN c > 0 AND (m > 0 OR wt > 0) THEN 2
            WHEN c > 0 THEN 1
            WHEN m > wt THEN 3
            WHEN wt > 0 OR m > 0 THEN 4
            WHEN y > 0 THEN 5
            ELSE 0
        END AS part
    FROM d
    WHERE t_next > t
)
SELECT grp,
    coalesce(sum(len) FILTER (WHERE part = 1), 0)::BIGINT AS compute_only_ns,
    coalesce(sum(len) FILTER (WHERE part = 2), 0)::BIGINT AS compute_overlapped_ns,
    coalesce(sum(len) FILTER (WHERE part = 3), 0)::BIGINT AS exposed_transfer_ns,
    coalesce(sum(len) FILTER (WHERE part = 4), 0)::BIGINT AS exposed_wait_ns,
    coalesce(sum(len) FILTER (WHERE part = 5), 0)::BIGINT AS memory_only_ns,
    coalesce(sum(len) FILTER (WHERE part > 0), 0)::BIGINT AS busy_ns
FROM p
GROUP BY grp;
