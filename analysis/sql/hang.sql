-- hang: what PyTorch Flight Recorder dumps (fr_* tables) say about a hung job. Rules in
-- docs/hangs.md. Collectives only: point-to-point entries (is_p2p) are matched by p2p_seq_id
-- and left out here.

-- hang_entries(rid): the collective entries of run `rid`, one dump per rank.
--   rid       run_id.
--   returns   rank, pg_name, pg_desc, seq (collective_seq_id), profiling_name,
--             op_name    profiling_name without its backend prefix ('all_gather'),
--             op         normalised op ('allgather'),
--             input_sizes, output_sizes, in_nelems, out_nelems, input_dtypes, output_dtypes,
--             state, time_created_ns, time_started_ns, time_completed_ns, record_id.
-- Algorithm: entries of the latest file (highest file_id) per rank, is_p2p false; when a seq
-- occurs twice in one rank's buffer (a restarted group) the entry with the highest record_id.
CREATE OR REPLACE TEMP MACRO hang_entries(rid) AS TABLE
WITH d AS (
    SELECT rank, max(file_id) AS file_id FROM fr_dumps WHERE run_id = rid GROUP BY rank
)
SELECT e.rank, e.pg_name, e.pg_desc, e.collective_seq_id AS seq, e.profiling_name,
    regexp_replace(e.profiling_name, '^[^:]*:', '') AS op_name, e.op,
    e.input_sizes, e.output_sizes, e.in_nelems, e.out_nelems, e.input_dtypes,
    e.output_dtypes, e.state, e.time_created_ns, e.time_started_ns, e.time_completed_ns,
    e.record_id
FROM fr_entries e JOIN d USING (rank, file_id)
WHERE e.run_id = rid AND NOT coalesce(e.is_p2p, false)
QUALIFY row_number() OVER (PARTITION BY e.rank, e.pg_name, e.collective_seq_id
    ORDER BY e.record_id DESC) = 1;

-- hang_groups(rid): one row per process group with collective entries in run `rid`.
--   rid       run_id.
--   returns   pg_name, pg_desc,
--             members        its ranks (INTEGER[], sorted): from the pg_config entry of the
--                            same name; else, in a dump with a single pg_config entry named ''
--                            (gloo), that entry; else the ranks with entries of the group,
--             dumped         members with a dump (any dump of the run),
--             missing_dumps  members without one,
--             last_common_seq  the last seq every dumped member entered (min over them of
--                            their highest seq; 0 when one entered none),
--             max_seq        the highest seq any member entered,
--             first_unentered_seq  the first seq some dumped member never entered while
--                            another did (last_common_seq + 1), NULL when none,
--             state_tracked  true when some entry of the group is 'started' or 'completed'
--                            (gloo leaves all 'scheduled'),
--             last_completed_seq  with state_tracked, the last seq every dumped member
--                            completed (0: none); NULL without.
-- Algorithm: members resolved per (rank, group) from fr_groups and combined over ranks
-- (union); progress = max seq per (group, rank) over hang_entries.
CREATE OR REPLACE TEMP MACRO hang_groups(rid) AS TABLE
WITH e AS (
    SELECT * FROM hang_entries(rid)
),
pg AS (
    SELECT pg_name, any_value(pg_desc) AS pg_desc, list(DISTINCT rank) AS seen
    FROM e GROUP BY pg_name
),
cfg AS (
    SELECT g.rank, g.pg_name, g.ranks,
        count(*) OVER (PARTITION BY g.file_id) AS n_cfg
    FROM fr_groups g
    WHERE g.run_id = rid
        AND g.file_id IN (SELECT max(file_id) FROM fr_dumps WHERE run_id = rid GROUP BY rank)
),
mem AS (
    SELECT pg.pg_name, list_sort(list_distinct(flatten(list(c.ranks)))) AS members
    FROM pg JOIN cfg c
        ON c.pg_name = pg.pg_name
        OR (c.pg_name = '' AND c.n_cfg = 1
            AND NOT EXISTS (SELECT 1 FROM cfg x WHERE x.pg_name = pg.pg_name))
    GROUP BY pg.pg_name
),
dumps AS (
    SELECT list(DISTINCT rank) AS ranks FROM fr_dumps WHERE run_id = rid
),
g AS (
    SELECT pg.pg_name, pg.pg_desc, coalesce(mem.members, list_sort(pg.seen)) AS members
    FROM pg LEFT JOIN mem USING (pg_name)
),
prog AS (
    SELECT g.pg_name, m.rank, max(e.seq) AS last_seq,
        max(e.seq) FILTER (WHERE e.state = 'completed') AS last_done,
        bool_or(e.state IN ('started', 'completed')) AS tracked,
        list_contains((SELECT ranks FROM dumps), m.rank) AS has_dump
    FROM g, unnest(g.members) AS m(rank)
    LEFT JOIN e ON e.pg_name = g.pg_name AND e.rank = m.rank
    GROUP BY g.pg_name, m.rank
)
SELECT g.pg_name, g.pg_desc, g.members,
    list_sort(list(p.rank) FILTER (WHERE p.has_dump)) AS dumped,
    coalesce(list_sort(list(p.rank) FILTER (WHERE NOT p.has_dump)), []) AS missing_dumps,
    coalesce(min(coalesce(p.last_seq, 0)) FILTER (WHERE p.has_dump), 0) AS last_common_seq,
    max(p.last_seq) AS max_seq,
    CASE WHEN max(p.last_seq) > coalesce(min(coalesce(p.last_seq, 0)) FILTER (WHERE p.has_dump), 0)
        THEN coalesce(min(coalesce(p.last_seq, 0)) FILTER (WHERE p.has_dump), 0) + 1
    END AS first_unentered_seq,
    coalesce(bool_or(p.tracked), false) AS state_tracked,
    CASE WHEN bool_or(p.tracked)
        THEN min(coalesce(p.last_done, 0)) FILTER (WHERE p.has_dump) END AS last_completed_seq
FROM g JOIN prog p USING (pg_name)
GROUP BY g.pg_name, g.pg_desc, g.members
ORDER BY g.pg_name;

-- hang_rank_progress(rid): how far each dumped member of each group got.
--   rid       run_id.
--   returns   pg_name, rank,
--             last_seq, last_op, last_state   its highest seq (NULL: none), the op_name and
--                                              state of that entry,
--             last_completed_seq               its highest seq in state 'completed' (NULL),
--             first_seq                        its lowest seq still in the ring buffer.
-- Algorithm: arg_max over hang_entries per (group, rank), members from hang_groups.
CREATE OR REPLACE TEMP MACRO hang_rank_progress(rid) AS TABLE
WITH m AS (
    SELECT pg_name, unnest(dumped) AS rank FROM hang_groups(rid)
)
SELECT m.pg_name, m.rank, max(e.seq) AS last_seq, arg_max(e.op_name, e.seq) AS last_op,
    arg_max(e.state, e.seq) AS last_state,
    max(e.seq) FILTER (WHERE e.state = 'completed') AS last_completed_seq,
    min(e.seq) AS first_seq
FROM m LEFT JOIN hang_entries(rid) e USING (pg_name, rank)
GROUP BY m.pg_name, m.rank
ORDER BY m.pg_name, m.rank;
