-- nccl_topology: communicators of a run and the shape of their rings and trees.

-- nccl_comm_keys(rid): one key per communicator row of run `rid`, shared by every process
-- of the same communicator.
--   rid       run_id.
--   returns   file_id, proc, comm, line_no,
--             comm_key   the commId ('0x5f3c…', NCCL 2.16+); before that 'n<nranks>#<k>'
--                        when the communicator is the k-th of that size the process
--                        created on that GPU (processes create communicators in the same
--                        order; one process driving several GPUs, ncclCommInitAll, holds
--                        one rank of the same communicator per GPU), with '@<file_id>'
--                        appended since older logs cannot be matched across files.
-- Algorithm: commId when present, else the creation-order heuristic above.
CREATE OR REPLACE TEMP MACRO nccl_comm_keys(rid) AS TABLE
SELECT file_id, proc, comm, line_no,
    coalesce(comm_id, printf('n%d#%d@%d', nranks,
        row_number() OVER (PARTITION BY file_id, proc, nranks, cuda_dev ORDER BY line_no),
        file_id)) AS comm_key
FROM nccl_communicators
WHERE run_id = rid;

-- nccl_tree_edges(rid): every rank's place in every channel tree of run `rid`.
--   returns   comm_key, channel, rank, parent (-1 for a root),
--             depth   edges from the root (0 at a root; NULL when the chain of parents does
--                     not reach a logged root).
-- Algorithm: distinct (rank, parent) tree rows per communicator key and channel; recursive
-- walk from the roots, capped at 4096 levels against damaged input, joined back for depth.
CREATE OR REPLACE TEMP MACRO nccl_tree_edges(rid) AS TABLE
WITH RECURSIVE t AS (
    SELECT DISTINCT k.comm_key, c.channel, c.tree_rank AS rank, c.tree_up AS parent
    FROM nccl_channels c
    JOIN nccl_comm_keys(rid) k
        ON k.file_id = c.file_id AND k.proc = c.proc AND k.comm = c.comm
    WHERE c.run_id = rid AND c.kind = 'tree'
),
walk(comm_key, channel, rank, depth) AS (
    SELECT comm_key, channel, rank, 0 FROM t WHERE parent = -1
    UNION ALL
    SELECT t.comm_key, t.channel, t.rank, w.depth + 1
    FROM walk w JOIN t ON t.comm_key = w.comm_key AND t.channel = w.channel AND t.parent = w.rank
    WHERE w.depth < 4096
)
SELECT t.comm_key, t.channel, t.rank, t.parent, min(w.depth) AS depth
FROM t
LEFT JOIN walk w ON w.comm_key = t.comm_key AND w.channel = t.channel AND w.rank = t.rank
GROUP BY t.comm_key, t.channel, t.rank, t.parent
ORDER BY t.comm_key, t.channel, depth, t.rank;

-- nccl_tree_depths(rid): depth of every channel tree of every communicator of run `rid`.
--   rid       run_id.
--   returns   comm_key, channel,
--             depth    edges on the longest root-to-leaf path among the ranks logged,
--             roots    ranks without a parent (up = -1).
-- Algorithm: nccl_tree_edges aggregated per (comm_key, channel): the largest depth and the
-- ranks at depth 0.
CREATE OR REPLACE TEMP MACRO nccl_tree_depths(rid) AS TABLE
SELECT comm_key, channel, max(depth) AS depth,
    list(DISTINCT rank ORDER BY rank) FILTER (WHERE depth = 0) AS roots
FROM nccl_tree_edges(rid)
WHERE depth IS NOT NULL
GROUP BY comm_key, channel;

-- nccl_collnet_fallbacks(rid): the processes of run `rid` whose NCCL gave up on CollNet.
--   rid       run_id.
--   returns   file_id, proc, line_no, message: each `Cannot initialize CollNet, using
--             point-to-point network instead` WARN (NCCL could not set CollNet up, e.g. SHARP's
--             aggregation manager not running, and runs without it; the errors logged before
--             it come from that attempt).
-- Algorithm: the WARN lines of nccl_warnings with that message.
CREATE OR REPLACE TEMP MACRO nccl_collnet_fallbacks(rid) AS TABLE
SELECT file_id, proc, line_no, message FROM nccl_warnings
WHERE run_id = rid AND level = 'WARN' AND message LIKE 'Cannot initialize CollNet%'
ORDER BY file_id, line_no;

-- nccl_comm_shapes(rid): one row per communicator of run `rid`.
--   rid       run_id.
--   returns   comm_key (see nccl_comm_keys), comm_id, nranks,
--             n_nodes, local_ranks     from the 2.20.3+ nNodes line (NULL before),
--             n_processes    log processes in it; ranks_logged  its ranks they cover,
--             ring_channels  ring channels: the MM of `Channel NN/MM` where NCCL prints it (an
--                            excerpt may stop before the last channel's line), else the channels
--                            with a ring order line (printed by rank 0),
--             ring           ring order of the lowest channel,
--             rings_distinct distinct ring orders over the channels,
--             ring_truncated a ring line was cut: NCCL up to 2.22 prints at most 20 ranks and
--                            says nothing (20 ranks of a larger communicator), later ones cut
--                            at 128 characters with `...`,
--             tree_channels  channels with tree lines,
--             tree_roots     distinct roots over the channels,
--             tree_depth     deepest channel tree (edges),
--             max_children   largest number of children of a rank,
--             nvls, collnet  NVLS / CollNet in use (collnet: COLLNET connections, `collnet +
--                            chain` connected, or a collnet channel count that differs from the
--                            coll one — NCCL 2.20 and later print the coll count in both
--                            fields — unless a process of the communicator logged `Cannot
--                            initialize CollNet, using point-to-point network instead`),
--             connected      what NCCL reported connected (rings, trees, NVLS tree ...).
-- Algorithm: communicators grouped by comm_key, joined with their ring and tree rows and
-- nccl_tree_depths.
CREATE OR REPLACE TEMP MACRO nccl_comm_shapes(rid) AS TABLE
WITH c AS (
    SELECT k.comm_key, c.*
    FROM nccl_communicators c
    JOIN nccl_comm_keys(rid) k
        ON k.file_id = c.file_id AND k.proc = c.proc AND k.comm = c.comm
        AND k.line_no = c.line_no
    WHERE c.run_id = rid
),
ch AS (
    SELECT k.comm_key, x.*
    FROM nccl_channels x
    JOIN nccl_comm_keys(rid) k ON k.file_id = x.file_id AND k.proc = x.proc AND k.comm = x.comm
    WHERE x.run_id = rid
),
rings AS (
    SELECT comm_key,
        greatest(count(DISTINCT channel), coalesce(max(n_channels), 0)) AS ring_channels,
        arg_min(ring, channel) AS ring, count(DISTINCT ring) AS rings_distinct,
        bool_or(truncated) AS ring_truncated
    FROM ch WHERE kind = 'ring' GROUP BY comm_key
),
trees AS (
    SELECT comm_key, count(DISTINCT channel) AS tree_channels,
        max(len(tree_down)) AS max_children
    FROM ch WHERE kind = 'tree' GROUP BY comm_key
),
depths AS (
    SELECT comm_key, max(depth) AS tree_depth,
        list_sort(list_distinct(flatten(list(roots)))) AS tree_roots
    FROM nccl_tree_depths(rid) GROUP BY comm_key
),
collnet_conns AS (
    SELECT DISTINCT k.comm_key
    FROM nccl_connections x
    JOIN nccl_comm_keys(rid) k ON k.file_id = x.file_id AND k.proc = x.proc AND k.comm = x.comm
    WHERE x.run_id = rid AND x.transport LIKE 'COLLNET/%'
),
collnet_failed AS (
    SELECT DISTINCT c.comm_key
    FROM nccl_collnet_fallbacks(rid) w
    JOIN c ON c.file_id = w.file_id AND c.proc = w.proc
),
agg AS (
    SELECT comm_key, max(comm_id) AS comm_id, max(nranks) AS nranks, max(n_nodes) AS n_nodes,
        max(local_ranks) AS local_ranks, count(*) AS n_processes,
        count(DISTINCT rank) AS ranks_logged,
        bool_or(coalesce(nvls_heads, 0) > 0 OR coalesce(nvls_channels, 0) > 0) AS nvls,
        bool_or(
            coalesce(collnet_channels, 0) > 0 AND collnet_channels IS DISTINCT FROM coll_channels
            OR list_contains(connected, 'collnet + chain')
        ) AS collnet,
        list_sort(list_distinct(flatten(list(connected)))) AS connected
    FROM c GROUP BY comm_key
)
SELECT a.comm_key, a.comm_id, a.nranks, a.n_nodes, a.local_ranks, a.n_processes,
    a.ranks_logged, coalesce(r.ring_channels, 0) AS ring_channels, r.ring,
    coalesce(r.rings_distinct, 0) AS rings_distinct,
    coalesce(r.ring_truncated, false) OR (len(r.ring) = 20 AND a.nranks > 20) AS ring_truncated,
    coalesce(t.tree_channels, 0) AS tree_channels, coalesce(d.tree_roots, []) AS tree_roots,
    d.tree_depth, t.max_children, a.nvls,
    (a.collnet OR a.comm_key IN (SELECT comm_key FROM collnet_conns))
        AND a.comm_key NOT IN (SELECT comm_key FROM collnet_failed) AS collnet,
    a.connected
FROM agg a
LEFT JOIN rings r USING (comm_key)
LEFT JOIN trees t USING (comm_key)
LEFT JOIN depths d USING (comm_key)
ORDER BY a.nranks DESC, a.comm_key;
