-- dimension: the step's exposed communication split by the parallelism dimension it serves.
-- requires: intervals, steps, groups, collectives, collective_summary, decomposition, p2p
-- Definitions (docs/parallelism.md, "Step by dimension"). Every collective call has a process
-- group (grouped_calls: as the trace names it, or inferred for CPU traces); every group has a
-- role (analysis/collectives/roles.py role_of, from its name and description, else from what
-- its calls do), and the role names a dimension: TP, CP, PP, EP, FSDP, DP or unknown. The
-- caller passes that mapping as a table (`roles`: pg_name, dimension; pg_name NULL for calls
-- that name no group). A call's *key* is its dimension, with FSDP split in two:
--   'FSDP all-gather'      the all-gathers of an FSDP group (parameters gathered: those not
--                          prefetched behind compute are exposed),
--   'FSDP reduce-scatter'  its other calls (gradient reduce-scatters; gloo runs them as
--                          all-reduces),
-- and 'unknown' for a call left out of matching (its group could not be told).
-- A communication activity that is no collective call (a blocking wait for a functional
-- collective, `_c10d_functional::wait_tensor`) takes the key of the call on its rank that it
-- overlaps longest (the collective it waits for), else of the last call that ended before it
-- began, else 'unknown'. A call's waiting interval
-- (decomposition.sql, wait_intervals) takes the call's key.
-- Each instant that decomposition.sql counts as exposed communication (no compute running) is
-- then given to the keys exposed at that instant, in equal shares:
--   exposed wait      (every running communication interval is inside its wait): the keys
--                     with a waiting interval running;
--   exposed transfer  (some communication interval is past its wait): the keys with more
--                     communication intervals than waiting ones running.
-- So, per (rank, step) window, the keys' waits add up to the decomposition's exposed_wait_ns
-- and their transfers to its exposed_transfer_ns, exactly (up to the shares' rounding).

-- dimension_group_facts(rid): what the calls of each process group of run `rid` do, for its
-- structural role (roles.py structural_role).
--   returns   pg_name (NULL: calls naming no group), pg_desc (any one), n_calls,
--             n_allreduce, n_allgather, n_reduce_scatter, n_alltoall, n_send, n_recv,
--             n_sendrecv, n_other (BIGINT counts),
--             allgather_out_nelems  BIGINT[]: distinct output element counts of its all-gathers
--                                   (the input's times the group size where the trace gives
--                                   no output),
--             reduce_nelems         BIGINT[]: distinct element counts of its reduce-scatters'
--                                   inputs and its all-reduces,
--             functional_share      DOUBLE: of its all-reduces, the share that a blocking wait
--                                   (`_c10d_functional::wait_tensor`) on the same rank overlaps
--                                   in time (NULL: no all-reduce).
-- Algorithm: grouped_calls of the run (calls left out of matching aside), aggregated per
-- pg_name; the waits are joined to the all-reduces by rank and overlap.
CREATE OR REPLACE TEMP MACRO dimension_group_facts(rid) AS TABLE
WITH c AS MATERIALIZED (
    SELECT rank, ts, dur, op, pg_name, pg_desc, in_nelems,
        coalesce(out_nelems, CASE WHEN op = 'allgather' THEN in_nelems * group_size END)
            AS out_nelems
    FROM grouped_calls(rid) WHERE unmatched_reason IS NULL
),
w AS (
    SELECT rank, ts, dur FROM activities
    WHERE run_id = rid AND kind = 'comm' AND regexp_matches(name, '^_?c10d_functional::wait_tensor$')
),
fw AS (
    SELECT c.pg_name, count(*) AS n_waited
    FROM (SELECT DISTINCT rank, ts, dur, pg_name FROM c WHERE op = 'allreduce') c
    WHERE EXISTS (
        SELECT 1 FROM w WHERE w.rank = c.rank AND w.ts < c.ts + c.dur AND w.ts + w.dur > c.ts
    )
    GROUP BY c.pg_name
)
SELECT g.*, fw.n_waited::DOUBLE / nullif(g.n_allreduce, 0) AS functional_share
FROM (
    SELECT pg_name, any_value(pg_desc) AS pg_desc, count(*) AS n_calls,
        count(*) FILTER (WHERE op = 'allreduce') AS n_allreduce,
        count(*) FILTER (WHERE op = 'allgather') AS n_allgather,
        count(*) FILTER (WHERE op = 'reduce_scatter') AS n_reduce_scatter,
        count(*) FILTER (WHERE op = 'alltoall') AS n_alltoall,
        count(*) FILTER (WHERE op = 'send') AS n_send,
        count(*) FILTER (WHERE op = 'recv') AS n_recv,
        count(*) FILTER (WHERE op = 'sendrecv') AS n_sendrecv,
        count(*) FILTER (
            WHERE op NOT IN ('allreduce', 'allgather', 'reduce_scatter', 'alltoall', 'send',
                'recv', 'sendrecv')
        ) AS n_other,
        coalesce(list(DISTINCT out_nelems ORDER BY out_nelems)
            FILTER (WHERE op = 'allgather' AND out_nelems IS NOT NULL), []) AS allgather_out_nelems,
        coalesce(list(DISTINCT coalesce(in_nelems, out_nelems) ORDER BY coalesce(in_nelems, out_nelems))
            FILTER (WHERE op IN ('allreduce', 'reduce_scatter')
                AND coalesce(in_nelems, out_nelems) IS NOT NULL), []) AS reduce_nelems
    FROM c GROUP BY pg_name
) g
LEFT JOIN fw ON fw.pg_name IS NOT DISTINCT FROM g.pg_name;

-- _dimension_key(dimension, op): the key of a call of `op` in a group of `dimension`.
CREATE OR REPLACE TEMP MACRO _dimension_key(dimension, op) AS
    CASE
        WHEN dimension IS NULL THEN 'unknown'
        WHEN dimension = 'FSDP' AND op = 'allgather' THEN 'FSDP all-gather'
        WHEN dimension = 'FSDP' THEN 'FSDP reduce-scatter'
        ELSE dimension
    END;

-- dimension_rows(rid, roles): the timeline intervals of run `rid` with the key each serves.
--   roles     table name with pg_name (NULL for calls naming no group), dimension.
--   returns   rank, ts, dur, kind ('compute' | 'comm' | 'memory' | 'wait'), dkey (the key of a
--             'comm' or 'wait' interval, see the header; NULL for the others).
-- Algorithm: the activities of decomposition.sql's _decomposition_rows; a comm activity joined
-- to its call in grouped_calls on (rank, ts, dur, name), one without a call to the call of the
-- same rank it overlaps longest, else (ASOF join) the last one that ended before it began;
-- the waits of wait_intervals' calls, with their call's group (collective_ranks' pg_name),
-- and of matched sends and receives (p2p_waits).
CREATE OR REPLACE TEMP MACRO dimension_rows(rid, roles) AS TABLE
WITH calls AS MATERIALIZED (
    SELECT DISTINCT g.rank, g.ts, g.dur, g.name,
        CASE WHEN g.unmatched_reason IS NOT NULL THEN 'unknown'
             ELSE _dimension_key(r.dimension, g.op) END AS dkey
    FROM grouped_calls(rid) g
    LEFT JOIN query_table(roles) r ON r.pg_name IS NOT DISTINCT FROM g.pg_name
),
acts AS MATERIALIZED (
    SELECT row_number() OVER () AS aid, rank, ts, dur, kind, name FROM activities
    WHERE run_id = rid AND kind IN ('compute', 'comm', 'memory')
),
named AS (
    SELECT a.aid, any_value(c.dkey) AS dkey
    FROM acts a JOIN calls c
        ON c.rank = a.rank AND c.ts = a.ts AND c.dur = a.dur AND c.name IS NOT DISTINCT FROM a.name
    WHERE a.kind = 'comm'
    GROUP BY a.aid
),
loose AS (
    SELECT a.aid, arg_max(c.dkey, least(a.ts + a.dur, c.ts + c.dur) - greatest(a.ts, c.ts))
        AS dkey
    FROM acts a JOIN calls c
        ON c.rank = a.rank AND c.ts < a.ts + a.dur AND c.ts + c.dur > a.ts
    WHERE a.kind = 'comm' AND a.aid NOT IN (SELECT aid FROM named)
    GROUP BY a.aid
),
after AS (
    SELECT a.aid, c.dkey
    FROM (SELECT * FROM acts WHERE kind = 'comm'
          AND aid NOT IN (SELECT aid FROM named) AND aid NOT IN (SELECT aid FROM loose)) a
    ASOF JOIN (SELECT rank, ts + dur AS te, dkey FROM calls) c
        ON c.rank = a.rank AND c.te <= a.ts
),
waits AS (
    SELECT c.rank, c.raw_ts AS ts,
        CASE WHEN NOT _has_transfer(rid, c.n_ranks, c.complete, c.group_size) THEN c.dur
             ELSE least(c.wait_ns, c.dur) END AS dur,
        c.pg_name, c.op
    FROM collective_ranks(rid) c
    WHERE c.n_ranks >= 2 AND c.end_sync AND _sizes_agree(c.size_mismatch, c.op) AND c.dur > 0
        AND (c.wait_ns > 0 OR NOT _has_transfer(rid, c.n_ranks, c.complete, c.group_size))
    UNION ALL
    SELECT rank, ts, dur, pg_name, op FROM p2p_waits(rid)
)
SELECT a.rank, a.ts, a.dur, a.kind,
    CASE WHEN a.kind = 'comm' THEN coalesce(n.dkey, l.dkey, f.dkey, 'unknown') END AS dkey
FROM acts a
LEFT JOIN named n ON n.aid = a.aid
LEFT JOIN loose l ON l.aid = a.aid
LEFT JOIN after f ON f.aid = a.aid
UNION ALL
SELECT w.rank, w.ts, w.dur, 'wait' AS kind, _dimension_key(r.dimension, w.op) AS dkey
FROM waits w
LEFT JOIN query_table(roles) r ON r.pg_name IS NOT DISTINCT FROM w.pg_name;

-- dimension_parts(tbl): the exposed communication of every group of intervals split by key.
--   tbl       table name with grp (any type), ts, dur, kind ('compute' | 'comm' | 'memory' |
--             'wait'), dkey (as dimension_rows).
--   returns   grp, dkey, exposed_transfer_ns, exposed_wait_ns (DOUBLE: equal shares of
--             instants that several keys share); keys with nothing exposed are absent.
-- Algorithm: the sweep line of intervals.sql's timeline_parts, with the depths of comm (m) and
-- wait (w) intervals kept per key as well as in total. A segment with no compute and m > w in
-- total is exposed transfer, shared among the keys with m_k > w_k; one with no compute and
-- w > 0 or m > 0 otherwise is exposed wait, shared among the keys with w_k > 0. Per-key depths
-- at each segment: a running sum over the key's own events, carried to every later segment of
-- the group by an ASOF join (the key's last event at or before the segment's start).
CREATE OR REPLACE TEMP MACRO dimension_parts(tbl) AS TABLE
WITH ev AS MATERIALIZED (
    SELECT grp, ts AS t, dkey, (kind = 'compute')::INT AS dc, (kind = 'comm')::INT AS dm,
        (kind = 'wait')::INT AS dw
    FROM query_table(tbl) WHERE dur > 0 AND kind IN ('compute', 'comm', 'wait')
    UNION ALL
    SELECT grp, ts + dur, dkey, -(kind = 'compute')::INT, -(kind = 'comm')::INT,
        -(kind = 'wait')::INT
    FROM query_table(tbl) WHERE dur > 0 AND kind IN ('compute', 'comm', 'wait')
),
seg AS MATERIALIZED (
    SELECT grp, t, t_next,
        CASE WHEN m > wt THEN 'transfer' ELSE 'wait' END AS part
    FROM (
        SELECT grp, t,
            sum(dc) OVER w AS c, sum(dm) OVER w AS m, sum(dw) OVER w AS wt,
            lead(t) OVER w AS t_next
        FROM ev
        WINDOW w AS (PARTITION BY grp ORDER BY t ROWS UNBOUNDED PRECEDING)
    )
    WHERE t_next > t AND c = 0 AND (m > 0 OR wt > 0)
),
kev AS (
    SELECT grp, dkey, t, sum(dm) AS dm, sum(dw) AS dw FROM ev
    WHERE dkey IS NOT NULL GROUP BY grp, dkey, t
),
kd AS MATERIALIZED (
    SELECT grp, dkey, t,
        sum(dm) OVER w AS mk, sum(dw) OVER w AS wk
    FROM kev
    WINDOW w AS (PARTITION BY grp, dkey ORDER BY t ROWS UNBOUNDED PRECEDING)
),
keys AS (SELECT DISTINCT grp, dkey FROM kd),
sk AS (
    SELECT s.grp, s.t, s.t_next, s.part, k.dkey
    FROM seg s JOIN keys k ON k.grp = s.grp
),
st AS (
    SELECT sk.*, kd.mk, kd.wk,
        CASE WHEN sk.part = 'transfer' THEN kd.mk > kd.wk ELSE kd.wk > 0 END AS active
    FROM sk ASOF JOIN kd ON kd.grp = sk.grp AND kd.dkey = sk.dkey
        AND kd.t <= sk.t
),
sh AS (
    SELECT grp, t, t_next, part, dkey,
        (t_next - t)::DOUBLE / count(*) OVER (PARTITION BY grp, t) AS share
    FROM st WHERE active
)
SELECT grp, dkey,
    coalesce(sum(share) FILTER (WHERE part = 'transfer'), 0) AS exposed_transfer_ns,
    coalesce(sum(share) FILTER (WHERE part = 'wait'), 0) AS exposed_wait_ns
FROM sh
GROUP BY grp, dkey;

-- step_dimensions(rid, roles): the exposed communication of every (rank, step) window of run
-- `rid` split by key (roles as dimension_rows).
--   returns   rank, step, dkey, exposed_transfer_ns, exposed_wait_ns (DOUBLE ns); only
--             (window, key) pairs with something exposed.
-- Algorithm: dimension_rows clipped to step_windows as step_clip does (carrying the key), then
-- dimension_parts per (rank, step).
CREATE OR REPLACE TEMP MACRO step_dimensions(rid, roles) AS TABLE
WITH rows AS MATERIALIZED (SELECT * FROM dimension_rows(rid, roles)),
c AS (
    SELECT {'rank': w.rank, 'step': w.step} AS grp,
        greatest(a.ts, w.ts) AS ts,
        least(a.ts + a.dur, w.ts + w.dur) - greatest(a.ts, w.ts) AS dur,
        a.kind, a.dkey
    FROM rows a JOIN step_windows(rid) w
        ON a.rank = w.rank AND a.ts < w.ts + w.dur AND a.ts + a.dur > w.ts
)
SELECT grp.rank AS rank, grp.step AS step, dkey, exposed_transfer_ns, exposed_wait_ns
FROM dimension_parts(c);

-- rank_dimensions(rid, roles): the same over each rank's whole trace, for runs without steps.
--   returns   rank, dkey, exposed_transfer_ns, exposed_wait_ns (DOUBLE ns).
-- Algorithm: dimension_parts of dimension_rows grouped by rank (no clipping: the window is the
-- rank's span, as rank_decomposition's).
CREATE OR REPLACE TEMP MACRO rank_dimensions(rid, roles) AS TABLE
WITH rows AS MATERIALIZED (SELECT * FROM dimension_rows(rid, roles)),
g AS (SELECT rank AS grp, ts, dur, kind, dkey FROM rows)
SELECT grp AS rank, dkey, exposed_transfer_ns, exposed_wait_ns FROM dimension_parts(g);

-- alltoall_pairs(rid): the bytes each rank sent each other rank in run `rid`'s all-to-alls.
--   returns   src, dst (global ranks), bytes (DOUBLE, summed over calls), n_calls.
-- Algorithm: every all-to-all call of grouped_calls with its input bytes split over its
-- group's ranks in proportion to its input split sizes (collectives.in_splits; an even split
-- where NULL). The group's global ranks in order: the call's pg_ranks, else its group's
-- `ranks` in process_groups, else 0 .. n-1 when the group is the whole world. Calls whose
-- group's ranks are unknown, or whose split list is not one entry per rank, are left out.
CREATE OR REPLACE TEMP MACRO alltoall_pairs(rid) AS TABLE
WITH pg AS (
    SELECT pg_name, any_value(ranks) AS ranks FROM process_groups
    WHERE run_id = rid GROUP BY pg_name
),
world AS (SELECT max(world_size) AS n FROM ranks WHERE run_id = rid),
c AS (
    SELECT x.rank AS src, x.in_bytes,
        coalesce(TRY_CAST(x.in_splits AS BIGINT[]),
            list_transform(range(x.group_size), lambda i: 1::BIGINT)) AS w,
        coalesce(TRY_CAST(x.pg_ranks AS BIGINT[]), TRY_CAST(pg.ranks AS BIGINT[]),
            CASE WHEN x.group_size = (SELECT n FROM world) THEN range(x.group_size) END)
            AS members
    FROM grouped_calls(rid) x
    LEFT JOIN pg ON pg.pg_name = x.pg_name
    WHERE x.op = 'alltoall' AND x.in_bytes IS NOT NULL AND x.group_size >= 1
        AND x.unmatched_reason IS NULL
),
p AS (
    SELECT src, in_bytes, w, members, unnest(range(1, len(w) + 1)) AS j
    FROM c WHERE members IS NOT NULL AND len(members) = len(w) AND list_sum(w) > 0
)
SELECT src, members[j] AS dst, sum(in_bytes * w[j] / list_sum(w)) AS bytes, count(*) AS n_calls
FROM p
GROUP BY src, dst
ORDER BY src, dst;
