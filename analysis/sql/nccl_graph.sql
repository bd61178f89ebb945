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
