-- hang: what PyTorch Flight Recorder dumps (fr_* tables) say about a hung job. Rules in
-- docs/hangs.md. Collectives only: point-to-point entries (is_p2p) are matched by p2p_seq_id
-- and left out here.

-- hang_entries(rid): the collective entries of run `rid`, one dump per rank.
--   rid       run_id.
--   returns   rank, pg_name, pg_desc, seq (collective_seq_id), profiling_name,
--             op_name    profiling_name without its backend prefix ('all_gather'),
--             op         normalised op ('allgather'),
--             input_sizes, output_sizes, in_nelems, out_nelems, input_dtypes, output_dtypes,
--             state, time_created_ns, time_started_ns, time_completed_ns, record_id,
--             timeout_ms.
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
    e.record_id, e.timeout_ms
FROM fr_entries e JOIN d USING (rank, file_id)
WHERE e.run_id = rid AND NOT coalesce(e.is_p2p, false)
QUALIFY row_number() OVER (PARTITION BY e.rank, e.pg_name, e.collective_seq_id
    ORDER BY e.record_id DESC) = 1;

-- hang_members(rid): the members of every process group with collective entries in run `rid`.
--   rid       run_id.
--   returns   pg_name, pg_desc,
--             members   its ranks (INTEGER[], sorted): from the pg_config entry of the same
--                       name; else, in a dump with a single pg_config entry named '' (gloo)
--                       when the run has entries of one group only, that entry; else the
--                       ranks with entries of the group. Empty member lists are no answer:
--                       with subgroups, gloo's lone '' entry holds [] on their members and
--                       all ranks on the others, whatever the group.
-- Algorithm: pg_config entries of each rank's latest dump matched by name (or the lone ''
-- entry), members combined over ranks (union).
CREATE OR REPLACE TEMP MACRO hang_members(rid) AS TABLE
WITH pg AS (
    SELECT pg_name, any_value(pg_desc) AS pg_desc, list(DISTINCT rank) AS seen
    FROM hang_entries(rid) GROUP BY pg_name
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
        ON len(c.ranks) > 0 AND (
            c.pg_name = pg.pg_name
            OR (c.pg_name = '' AND c.n_cfg = 1 AND (SELECT count(*) FROM pg) = 1
                AND NOT EXISTS (SELECT 1 FROM cfg x WHERE x.pg_name = pg.pg_name)))
    GROUP BY pg.pg_name
)
SELECT pg.pg_name, pg.pg_desc, coalesce(mem.members, list_sort(pg.seen)) AS members
FROM pg LEFT JOIN mem USING (pg_name);

-- hang_progress(rid): how far every member of every group got, one row per (group, member).
--   rid       run_id.
--   returns   pg_name, rank,
--             has_dump    the run has a dump of this rank,
--             last_seq    the highest seq it entered: of its entries, or its pg_status
--                         last_enqueued_collective when higher (a dump of active entries
--                         only, or a ring buffer without the group); NULL: none,
--             last_done   its highest seq in state 'completed' (NULL: none),
--             tracked     some of its entries are 'started' or 'completed'.
-- Algorithm: entries per (group, rank); pg_status of the rank's latest dump joined to the group
-- through the entries' pg_id (any rank's: uids are given in the same order on every rank).
CREATE OR REPLACE TEMP MACRO hang_progress(rid) AS TABLE
WITH latest AS (
    SELECT max(file_id) AS file_id FROM fr_dumps WHERE run_id = rid GROUP BY rank
),
ids AS (
    SELECT DISTINCT pg_id::VARCHAR AS pg_id, pg_name FROM fr_entries
    WHERE run_id = rid AND pg_id IS NOT NULL
),
st AS (
    SELECT s.rank, ids.pg_name, max(s.last_enqueued) AS enqueued
    FROM fr_pg_status s JOIN ids USING (pg_id)
    WHERE s.run_id = rid AND s.file_id IN (SELECT file_id FROM latest) AND s.last_enqueued > 0
    GROUP BY s.rank, ids.pg_name
),
m AS (
    SELECT g.pg_name, unnest(g.members) AS rank FROM hang_members(rid) g
)
SELECT m.pg_name, m.rank,
    m.rank IN (SELECT rank FROM fr_dumps WHERE run_id = rid) AS has_dump,
    greatest(max(e.seq), any_value(st.enqueued)) AS last_seq,
    max(e.seq) FILTER (WHERE e.state = 'completed') AS last_done,
    coalesce(bool_or(e.state IN ('started', 'completed')), false) AS tracked
FROM m
LEFT JOIN hang_entries(rid) e ON e.pg_name = m.pg_name AND e.rank = m.rank
LEFT JOIN st ON st.pg_name = m.pg_name AND st.rank = m.rank
GROUP BY m.pg_name, m.rank;

-- hang_groups(rid): one row per process group with collective entries in run `rid`.
--   rid       run_id.
--   returns   pg_name, pg_desc, members (see hang_members),
--             dumped         members with a dump (any dump of the run),
--             missing_dumps  members without one,
--             last_common_seq  the last seq every dumped member entered (min over them of
--                            their last_seq in hang_progress; 0 when one entered none),
--             max_seq        the highest seq any member entered,
--             first_unentered_seq  the first seq some dumped member never entered while
--                            another did (last_common_seq + 1), NULL when none,
--             state_tracked  true when some entry of the group is 'started' or 'completed'
--                            (gloo leaves all 'scheduled'),
--             last_completed_seq  with state_tracked, the last seq every dumped member
--                            completed (0: none); NULL without.
-- Algorithm: aggregates of hang_progress per group.
CREATE OR REPLACE TEMP MACRO hang_groups(rid) AS TABLE
WITH a AS (
    SELECT g.pg_name, g.pg_desc, g.members,
        list_sort(list(p.rank) FILTER (WHERE p.has_dump)) AS dumped,
        coalesce(list_sort(list(p.rank) FILTER (WHERE NOT p.has_dump)), []) AS missing_dumps,
        coalesce(min(coalesce(p.last_seq, 0)) FILTER (WHERE p.has_dump), 0) AS last_common_seq,
        max(p.last_seq) AS max_seq,
        bool_or(p.tracked) AS state_tracked,
        min(coalesce(p.last_done, 0)) FILTER (WHERE p.has_dump) AS last_done
    FROM hang_members(rid) g JOIN hang_progress(rid) p USING (pg_name)
    GROUP BY g.pg_name, g.pg_desc, g.members
)
SELECT pg_name, pg_desc, members, dumped, missing_dumps, last_common_seq, max_seq,
    CASE WHEN max_seq > last_common_seq THEN last_common_seq + 1 END AS first_unentered_seq,
    state_tracked,
    CASE WHEN state_tracked THEN last_done END AS last_completed_seq
FROM a
ORDER BY pg_name;

-- hang_rank_progress(rid): how far each dumped member of each group got.
--   rid       run_id.
--   returns   pg_name, rank,
--             last_seq                         as in hang_progress,
--             last_op, last_state              op_name and state of its entry at last_seq
--                                              (NULL when only pg_status tells last_seq),
--             last_completed_seq               its highest seq in state 'completed' (NULL),
--             first_seq                        its lowest seq still in the ring buffer.
-- Algorithm: hang_progress of dumped members joined to their hang_entries.
CREATE OR REPLACE TEMP MACRO hang_rank_progress(rid) AS TABLE
SELECT p.pg_name, p.rank, any_value(p.last_seq) AS last_seq,
    any_value(e.op_name) FILTER (WHERE e.seq = p.last_seq) AS last_op,
    any_value(e.state) FILTER (WHERE e.seq = p.last_seq) AS last_state,
    any_value(p.last_done) AS last_completed_seq, min(e.seq) AS first_seq
FROM hang_progress(rid) p
LEFT JOIN hang_entries(rid) e USING (pg_name, rank)
WHERE p.has_dump
GROUP BY p.pg_name, p.rank
ORDER BY p.pg_name, p.rank;
