-- nccl_procs: which rank each process of the NCCL logs of a run is.
-- requires: nccl_topology

-- nccl_world(rid): the job's size as the run knows it (one row).
--   rid       run_id.
--   returns   world_size   the largest of: trace world sizes, NCCL communicator sizes (also
--                          the `[nranks=N]` of COLL lines and the length of a whole ring
--                          order), and 1 + the highest rank named by a watchdog line (not
--                          by a launcher tag; NULL: none known).
-- Algorithm: max over the sources.
CREATE OR REPLACE TEMP MACRO nccl_world(rid) AS TABLE
SELECT nullif(greatest(
    coalesce((SELECT max(world_size) FROM ranks WHERE run_id = rid), 0),
    coalesce((SELECT max(nranks) FROM nccl_communicators WHERE run_id = rid), 0),
    coalesce((SELECT max(nranks) FROM nccl_colls WHERE run_id = rid), 0),
    coalesce((SELECT max(len(ring)) FROM nccl_channels
              WHERE run_id = rid AND kind = 'ring' AND NOT coalesce(truncated, false)), 0),
    coalesce((SELECT max(rank) + 1 FROM nccl_timeouts
              WHERE run_id = rid AND rank_source IS DISTINCT FROM 'launcher_tag'), 0)
), 0) AS world_size;

-- nccl_listed_world(rid): how many ranks (0 .. n-1) a listing of every rank of the job may
-- enumerate (one row).
--   rid       run_id.
--   returns   listed_size   the world size (nccl_world) when it is at most 131,072 ranks
--                           (2^17, beyond any job known to run); else 0: a larger claim is a
--                           number read from a file, kept as claimed and flagged
--                           (claim_unlisted), never expanded into rows,
--             claim_unlisted  the world size is over that bound.
-- Algorithm: a constant bound, so that no size read from a file allocates in proportion to
-- itself; ranks that some row names are listed whatever the bound (see nccl_rank_coverage).
CREATE OR REPLACE TEMP MACRO nccl_listed_world(rid) AS TABLE
SELECT CASE WHEN coalesce(world_size, 0) <= 131072 THEN coalesce(world_size, 0) ELSE 0 END
        AS listed_size,
    coalesce(world_size, 0) > 131072 AS claim_unlisted
FROM nccl_world(rid);

-- nccl_proc_ranks(rid): one row per NCCL log process of run `rid`, with its global rank.
--   rid       run_id.
--   returns   file_id, proc, host, pid,
--             rank          global rank, NULL when nothing says,
--             rank_source   host_pid (a trace of the run has this host and pid; only the
--                           pid when the trace names no host) |
--                           comm_rank (its rank in a communicator spanning the whole job) |
--                           launcher_tag (the launcher's rank tag on its lines, when no
--                           two processes of the run share a tag) | NULL,
--             nccl_version, cuda_version   as credited to the process (NULL: not printed).
-- Algorithm: the first source that answers unambiguously, in the order above. Hosts are
-- compared on their first label, case-insensitively (NCCL cuts host names at the first dot). A
-- communicator spans the job when its size is the world size (nccl_world); a process in
-- several such communicators must have the same rank in all of them.
CREATE OR REPLACE TEMP MACRO nccl_proc_ranks(rid) AS TABLE
WITH p AS (
    SELECT * FROM nccl_processes WHERE run_id = rid
),
by_trace AS (
    SELECT p.file_id, p.proc, min(k.rank) AS rank
    FROM p JOIN ranks k
        ON k.run_id = rid AND k.pid = p.pid
        AND (k.host IS NULL OR lower(split_part(k.host, '.', 1)) = lower(p.host))
    GROUP BY ALL
    HAVING count(DISTINCT k.rank) = 1
),
by_comm AS (
    SELECT c.file_id, c.proc, min(c.rank) AS rank
    FROM nccl_communicators c, nccl_world(rid) w
    WHERE c.run_id = rid AND c.nranks = w.world_size AND c.rank IS NOT NULL
    GROUP BY ALL
    HAVING count(DISTINCT c.rank) = 1
),
tags AS (
    SELECT tag_rank, count(DISTINCT (host, pid)) AS n FROM p
    WHERE tag_rank IS NOT NULL GROUP BY tag_rank
),
by_tag AS (
    -- launcher tags name ranks only when no two processes (host, pid) share one: `srun -l`
    -- over one torchrun per node tags all of a node's processes with the node's task number,
    -- so a tag shared anywhere means the run's tags are no ranks at all
    SELECT tag_rank FROM tags WHERE NOT EXISTS (SELECT 1 FROM tags WHERE n > 1)
)
SELECT p.file_id, p.proc, p.host, p.pid,
    coalesce(t.rank, c.rank, g.tag_rank) AS rank,
    CASE
        WHEN t.rank IS NOT NULL THEN 'host_pid'
        WHEN c.rank IS NOT NULL THEN 'comm_rank'
        WHEN g.tag_rank IS NOT NULL THEN 'launcher_tag'
    END AS rank_source,
    p.nccl_version, p.cuda_version
FROM p
LEFT JOIN by_trace t USING (file_id, proc)
LEFT JOIN by_comm c USING (file_id, proc)
LEFT JOIN by_tag g ON g.tag_rank = p.tag_rank
ORDER BY rank NULLS LAST, p.file_id, p.proc;

-- nccl_rank_coverage(rid): every rank of the job and whether an NCCL log speaks for it.
--   rid       run_id.
--   returns   rank,
--             has_log       some log process maps to this rank, PyTorch lines under its
--                           `[rankN]:` prefix speak for it (a watchdog-only log), or one
--                           process holds it among several ranks of one communicator as
--                           large as the job (ncclCommInitAll),
--             n_processes   how many NCCL processes (more than one: the rank appears in
--                           several files),
--             in_trace      the rank has a trace in the run.
-- Algorithm: ranks 0 .. world_size-1 (nccl_world; none when nccl_listed_world says the size
-- is too large to list) plus any mapped rank, left-joined
-- with nccl_proc_ranks, the ranks of nccl_timeouts and the ranks table.
CREATE OR REPLACE TEMP MACRO nccl_rank_coverage(rid) AS TABLE
WITH procs AS (
    SELECT rank, count(*) AS n FROM nccl_proc_ranks(rid) WHERE rank IS NOT NULL GROUP BY rank
),
mapped AS (
    SELECT rank, max(n) AS n FROM (
        SELECT rank, n FROM procs
        UNION ALL
        SELECT DISTINCT rank, 0 FROM nccl_timeouts WHERE run_id = rid AND rank IS NOT NULL
            AND rank_source IS DISTINCT FROM 'launcher_tag'
        UNION ALL  -- the ranks a process holds of one communicator as large as the job
                   -- when it holds several (ncclCommInitAll over a node's GPUs)
        SELECT DISTINCT c.rank, 0
        FROM nccl_communicators c
        JOIN nccl_comm_keys(rid) k
            ON k.file_id = c.file_id AND k.proc = c.proc AND k.comm = c.comm
            AND k.line_no = c.line_no
        CROSS JOIN nccl_world(rid) w
        WHERE c.run_id = rid AND c.nranks = w.world_size AND c.rank IS NOT NULL
        QUALIFY count(DISTINCT c.rank) OVER (PARTITION BY c.file_id, c.proc, k.comm_key) > 1
    ) GROUP BY rank
),
every AS (
    SELECT unnest(range((SELECT listed_size FROM nccl_listed_world(rid)))) AS rank
    UNION
    SELECT rank FROM mapped
)
SELECT e.rank::INTEGER AS rank, m.n IS NOT NULL AS has_log, coalesce(m.n, 0) AS n_processes,
    e.rank IN (SELECT rank FROM ranks WHERE run_id = rid) AS in_trace
FROM every e LEFT JOIN mapped m ON m.rank = e.rank
ORDER BY e.rank;
