-- nccl_graph: the rings and trees NCCL logged, as graphs to draw.
-- requires: nccl_topology

-- nccl_ring_orders(rid): the ring order of every ring channel of every communicator of run
-- `rid` (printed by the communicator's rank 0).
--   rid       run_id.
--   returns   comm_key (see nccl_comm_keys), channel, n_channels,
--             ring       ranks in ring order (INTEGER[]),
--             truncated  the line was cut by NCCL (the ring is incomplete).
-- Algorithm: ring rows of nccl_channels joined to their communicator key; one row per
-- (comm_key, channel), the first logged.
CREATE OR REPLACE TEMP MACRO nccl_ring_orders(rid) AS TABLE
SELECT k.comm_key, c.channel, any_value(c.n_channels) AS n_channels,
    arg_min(c.ring, c.line_no) AS ring, bool_or(c.truncated) AS truncated
FROM nccl_channels c
JOIN nccl_comm_keys(rid) k ON k.file_id = c.file_id AND k.proc = c.proc AND k.comm = c.comm
WHERE c.run_id = rid AND c.kind = 'ring'
GROUP BY k.comm_key, c.channel
ORDER BY k.comm_key, c.channel;

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
