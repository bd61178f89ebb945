-- nccl_transports: which transport NCCL used between ranks, within and between nodes.

-- nccl_connection_scopes(rid): every connection line of run `rid` with its scope.
--   rid       run_id.
--   returns   file_id, proc, line_no, comm, comm_id, channel, own_rank, peer, direction,
--             transport, net, gdr, via,
--             host, peer_host   the process's host and the peer rank's (NULL: no log of the
--                               peer, or no commId to find it by),
--             scope         intra-node | inter-node,
--             scope_source  hosts (the two hosts compared) | transport (no peer host:
--                           NET/*, COLLNET/* and P2P/MNNVL count as inter-node, the rest as
--                           intra-node).
-- Algorithm: the line's communicator gives its commId; the peer's host is the host of the
-- log process holding that commId at rank `peer`. Hosts compare on their first label.
CREATE OR REPLACE TEMP MACRO nccl_connection_scopes(rid) AS TABLE
WITH comms AS (
    SELECT file_id, proc, comm, arg_max(comm_id, line_no) AS comm_id,
        arg_max(rank, line_no) AS rank
    FROM nccl_communicators WHERE run_id = rid
    GROUP BY ALL
),
members AS (
    SELECT c.comm_id, c.rank, min(lower(split_part(p.host, '.', 1))) AS host
    FROM nccl_communicators c
    JOIN nccl_processes p ON p.run_id = c.run_id AND p.file_id = c.file_id AND p.proc = c.proc
    WHERE c.run_id = rid AND c.comm_id IS NOT NULL
    GROUP BY ALL
),
x AS (
    SELECT x.file_id, x.proc, x.line_no, x.comm, m.comm_id, x.channel,
        CASE WHEN x.direction = 'receive' THEN x.dst ELSE x.src END AS own_rank,
        x.peer, x.direction, x.transport, x.net, x.gdr, x.via,
        lower(split_part(p.host, '.', 1)) AS host, o.host AS peer_host
    FROM nccl_connections x
    JOIN nccl_processes p ON p.run_id = x.run_id AND p.file_id = x.file_id AND p.proc = x.proc
    LEFT JOIN comms m ON m.file_id = x.file_id AND m.proc = x.proc AND m.comm = x.comm
    LEFT JOIN members o ON o.comm_id = m.comm_id AND o.rank = x.peer
    WHERE x.run_id = rid
)
SELECT *,
    CASE
        WHEN peer_host IS NOT NULL AND peer_host = host THEN 'intra-node'
        WHEN peer_host IS NOT NULL THEN 'inter-node'
        WHEN transport LIKE 'NET/%' OR transport LIKE 'COLLNET/%' OR transport = 'P2P/MNNVL'
            THEN 'inter-node'
        ELSE 'intra-node'
    END AS scope,
    CASE WHEN peer_host IS NOT NULL THEN 'hosts' ELSE 'transport' END AS scope_source
FROM x;

-- nccl_transports(rid): connection counts per scope and transport in run `rid`.
--   rid       run_id.
--   returns   scope         intra-node | inter-node,
--             transport     P2P/IPC, P2P/CUMEM, SHM, NET/IB, NET/Socket, NET/<plugin> ...,
--             count         connection lines,
--             n_processes   log processes that printed them,
--             n_gdr         of the lines, those with GPU Direct RDMA (/GDRDMA),
--             scope_source  hosts | transport | mixed (how the scope was decided),
--             as_printed    what NCCL printed after `via`, device numbers as N
--                           ('P2P/direct pointer/read', 'NET/IBext/N(N)/GDRDMA'), distinct,
--                           in no set order.
-- Algorithm: aggregation of nccl_connection_scopes.
CREATE OR REPLACE TEMP MACRO nccl_transports(rid) AS TABLE
SELECT scope, transport, count(*) AS count,
    count(DISTINCT (file_id, proc)) AS n_processes,
    count(*) FILTER (WHERE gdr) AS n_gdr,
    CASE WHEN count(DISTINCT scope_source) > 1 THEN 'mixed' ELSE min(scope_source) END
        AS scope_source,
    list(DISTINCT regexp_replace(regexp_replace(via, '/[0-9]+', '/N', 'g'), '\([0-9]+\)', '(N)',
        'g')) AS as_printed
FROM nccl_connection_scopes(rid)
GROUP BY scope, transport
ORDER BY scope DESC, count DESC, transport;
