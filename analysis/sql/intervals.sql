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
