-- groups: the process group of every collective call, where the trace names none per call.
-- Definitions (docs/parallelism.md, "Process groups of CPU traces"). A CPU (gloo) trace records
-- no process group per call, but its `distributedInfo.pg_config` (table process_groups) lists
-- the groups the rank belongs to, and gloo runs each process group's collectives on a thread pool
-- of its own (`pt_gloo_runloop`, two threads by default) whose threads are created together,
-- when the group is: their thread ids are consecutive. So on one rank:
--   lane         a run of consecutive thread ids that ran end-synchronous host collectives
--                (send and receive aside), numbered 0, 1, ... in thread-id order, which is
--                the order in which the rank created the groups;
--   groups       the rank's pg_config groups in creation order (numeric pg_name: PyTorch
--                names groups by a counter);
--   m lanes, n groups: lane i belongs to group n - m + i (0-based): the groups used in the
--                profiled window are the last ones created (the default group, created
--                first, often carries nothing there); every lane is a group when m = n.
-- A lane's calls take its group's name, description and size. The assignment is checked: the
-- ranks whose lane names group g must be exactly g's members (pg_config `ranks`). Calls are
-- left unmatched, with the reason, where it fails: more lanes than groups, or a group whose
-- lanes are not on exactly its members. Only ranks whose pg_config lists a group smaller than
-- the world are looked at; elsewhere (one group, or none listed) the calls keep their NULL
-- group: the world, as before.

-- _rank_groups(rid): every process group a rank of run `rid` lists, in creation order.
--   returns   rank, pg_name, pg_desc, pg_size, ranks (JSON list text),
--             k (1-based position in creation order), n (the rank's number of groups),
--             world (the run's world size: max of ranks.world_size, else of pg_size).
-- Algorithm: distinct process_groups rows; creation order by numeric pg_name, then the name.
CREATE OR REPLACE TEMP MACRO _rank_groups(rid) AS TABLE
WITH g AS (
    SELECT DISTINCT rank, pg_name, pg_desc, pg_size, ranks
    FROM process_groups WHERE run_id = rid
),
w AS (
    SELECT greatest(
        (SELECT max(world_size) FROM ranks WHERE run_id = rid),
        (SELECT max(pg_size) FROM g)
    ) AS world
)
SELECT g.*,
    row_number() OVER (
        PARTITION BY rank ORDER BY TRY_CAST(pg_name AS BIGINT) NULLS LAST, pg_name
    ) AS k,
    count(*) OVER (PARTITION BY rank) AS n,
    w.world
FROM g CROSS JOIN w;

-- _lane_calls(rid): the calls of run `rid` without a process group on the ranks that list a
-- group smaller than the world, with their thread and lane.
--   returns   rank, ts, dur, name (the call's key in collectives), tid, lane (0-based).
-- Algorithm: the call's thread from its activity (same rank, start, duration and name, kind
-- comm); lanes by a break wherever the sorted thread ids of the rank jump over an id that is no
-- other rank's (of the same host) calling thread, or the process changes. Thread ids are
-- numbered per host: ranks that create a group together (new_group is collective) interleave
-- their pools' threads, so a jump over other ranks' calling threads only stays in the lane.
CREATE OR REPLACE TEMP MACRO _lane_calls(rid) AS TABLE
WITH cand AS MATERIALIZED (
    SELECT DISTINCT rank FROM _rank_groups(rid) WHERE pg_size < world
),
c AS MATERIALIZED (
    SELECT x.rank, x.ts, x.dur, x.name
    FROM collectives x SEMI JOIN cand ON cand.rank = x.rank
    WHERE x.run_id = rid AND x.pg_name IS NULL AND x.op NOT IN ('send', 'recv', 'sendrecv')
),
t AS MATERIALIZED (
    SELECT DISTINCT c.rank, c.ts, c.dur, c.name, a.pid, a.tid
    FROM c JOIN activities a
        ON a.run_id = rid AND a.rank = c.rank AND a.ts = c.ts AND a.dur = c.dur
        AND a.name = c.name AND a.kind = 'comm'
),
-- every calling thread with its rank's host
ht AS MATERIALIZED (
    SELECT DISTINCT t.rank, h.host, t.pid, t.tid
    FROM t LEFT JOIN (
        SELECT rank, any_value(host) AS host FROM ranks WHERE run_id = rid GROUP BY rank
    ) h ON h.rank = t.rank
),
th AS (
    SELECT rank, pid, tid,
        sum(CASE WHEN brk THEN 1 ELSE 0 END) OVER (
            PARTITION BY rank ORDER BY pid, tid ROWS UNBOUNDED PRECEDING
        )::BIGINT - 1 AS lane
    FROM (
        SELECT p.rank, p.pid, p.tid,
            p.prev IS NULL OR p.pid IS DISTINCT FROM p.prev_pid
                OR p.tid - p.prev - 1 > (
                    SELECT count(DISTINCT o.tid) FROM ht o
                    WHERE o.rank <> p.rank AND o.host IS NOT DISTINCT FROM p.host
                        AND o.tid > p.prev AND o.tid < p.tid
                ) AS brk
        FROM (
            SELECT *, lag(tid) OVER w AS prev, lag(pid) OVER w AS prev_pid FROM ht
            WINDOW w AS (PARTITION BY rank ORDER BY pid, tid)
        ) p
    )
)
SELECT t.rank, t.ts, t.dur, t.name, t.tid, th.lane
FROM t JOIN th ON th.rank = t.rank AND th.pid IS NOT DISTINCT FROM t.pid AND th.tid = t.tid;

-- call_groups(rid): the process group inferred for each lane of run `rid` (see the header).
--   returns   rank, lane, n_calls, pg_name, pg_desc, group_size (NULL when unassigned),
--             causal_share  DOUBLE: of the group's k-th calls of one op on ranks of one host,
--                           the share that overlap in time (max start <= min end), as the calls
--                           of one collective must (NULL: no two members share a host),
--             unmatched_reason  NULL when assigned, else why the lane's calls stay unmatched:
--                               'more gloo thread lanes than process groups on this rank' |
--                               'the lanes named for this group are not on exactly its
--                               ranks' | 'the calls named for this group do not overlap in
--                               time across its ranks'.
-- Algorithm: lane i of m on a rank of n groups takes group k = n - m + i + 1 (1-based); a group
-- passes when the ranks naming it equal its pg_config members and at least half of its calls
-- overlap in time where its members share a clock (a lane given the wrong group, all ranks
-- shifted alike, passes the first test but not this one).
CREATE OR REPLACE TEMP MACRO call_groups(rid) AS TABLE
WITH l AS MATERIALIZED (
    SELECT rank, lane, count(*) AS n_calls FROM _lane_calls(rid) GROUP BY rank, lane
),
lm AS (SELECT *, count(*) OVER (PARTITION BY rank) AS m FROM l),
rg AS MATERIALIZED (SELECT * FROM _rank_groups(rid)),
a AS (
    SELECT lm.rank, lm.lane, lm.n_calls, lm.m, rg.pg_name, rg.pg_desc, rg.pg_size, rg.ranks
    FROM lm LEFT JOIN rg ON rg.rank = lm.rank AND rg.k = rg.n - lm.m + lm.lane + 1
),
members AS (
    SELECT pg_name, list(DISTINCT rank ORDER BY rank) AS seen,
        any_value(ranks) AS ranks
    FROM a WHERE pg_name IS NOT NULL GROUP BY pg_name
),
ok AS (
    SELECT pg_name,
        TRY_CAST(ranks AS INTEGER[]) IS NOT NULL
            AND list_sort(TRY_CAST(ranks AS INTEGER[])) = seen AS passes
    FROM members
),
-- the k-th call of each op on the lanes of a group, on ranks of one host (one clock)
kth AS (
    SELECT a.pg_name, r.host, lc.name, lc.ts, lc.ts + lc.dur AS te,
        row_number() OVER (PARTITION BY lc.rank, lc.lane, lc.name ORDER BY lc.ts) AS k
    FROM _lane_calls(rid) lc
    JOIN a ON a.rank = lc.rank AND a.lane = lc.lane
    LEFT JOIN (SELECT rank, any_value(host) AS host FROM ranks WHERE run_id = rid GROUP BY rank) r
        ON r.rank = lc.rank
    WHERE a.pg_name IS NOT NULL AND r.host IS NOT NULL
),
inst AS (
    SELECT pg_name, max(ts) <= min(te) AS causal
    FROM kth GROUP BY pg_name, host, name, k HAVING count(*) >= 2
),
timing AS (
    SELECT pg_name, avg(causal::INTEGER) AS causal_share FROM inst GROUP BY pg_name
)
SELECT a.rank, a.lane, a.n_calls,
    CASE WHEN ok.passes AND coalesce(t.causal_share, 1) >= 0.5 THEN a.pg_name END AS pg_name,
    CASE WHEN ok.passes AND coalesce(t.causal_share, 1) >= 0.5 THEN a.pg_desc END AS pg_desc,
    CASE WHEN ok.passes AND coalesce(t.causal_share, 1) >= 0.5 THEN a.pg_size END
        AS group_size,
    t.causal_share,
    CASE
        WHEN a.pg_name IS NULL THEN 'more gloo thread lanes than process groups on this rank'
        WHEN NOT ok.passes THEN 'the lanes named for this group are not on exactly its ranks'
        WHEN t.causal_share < 0.5
        THEN 'the calls named for this group do not overlap in time across its ranks'
    END AS unmatched_reason
FROM a LEFT JOIN ok ON ok.pg_name = a.pg_name LEFT JOIN timing t ON t.pg_name = a.pg_name
ORDER BY a.rank, a.lane;

-- grouped_calls(rid): the collectives rows of run `rid` with their process group: as the trace
-- names it, else as call_groups infers it.
--   returns   every column of collectives with pg_name, pg_desc, group_size replaced where a
--             group was inferred, plus inferred (the group was inferred) and unmatched_reason
--             (NULL, or why the call is left out of matching: call_groups).
-- Algorithm: collectives LEFT JOIN the lane calls and their lane's group on (rank, ts, dur,
-- name).
CREATE OR REPLACE TEMP MACRO grouped_calls(rid) AS TABLE
WITH lc AS MATERIALIZED (
    SELECT l.rank, l.ts, l.dur, l.name, g.pg_name, g.pg_desc, g.group_size, g.unmatched_reason
    FROM _lane_calls(rid) l JOIN call_groups(rid) g ON g.rank = l.rank AND g.lane = l.lane
)
SELECT x.* REPLACE (
        coalesce(lc.pg_name, x.pg_name) AS pg_name,
        coalesce(lc.pg_desc, x.pg_desc) AS pg_desc,
        coalesce(lc.group_size, x.group_size) AS group_size
    ),
    lc.pg_name IS NOT NULL AS inferred,
    lc.unmatched_reason
FROM collectives x
LEFT JOIN lc ON lc.rank = x.rank AND lc.ts = x.ts AND lc.dur = x.dur AND lc.name = x.name
WHERE x.run_id = rid;
