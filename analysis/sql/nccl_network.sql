-- nccl_network: the network NCCL chose, GPU Direct RDMA, and TCP used where RDMA was expected.
-- requires: nccl_transports

-- nccl_networks(rid): inter-node networks NCCL chose (`Using network X`) in run `rid`.
--   rid       run_id.
--   returns   network       IB | Socket | AWS Libfabric | IBext ...,
--             n_processes   log processes that chose it,
--             first_file_id, first_line   where it is first said.
-- Algorithm: nccl_network rows of kind 'network', grouped by network.
CREATE OR REPLACE TEMP MACRO nccl_networks(rid) AS TABLE
SELECT device AS network, count(DISTINCT (file_id, proc)) AS n_processes,
    arg_min(file_id, (file_id, line_no)) AS first_file_id,
    arg_min(line_no, (file_id, line_no)) AS first_line
FROM nccl_network
WHERE run_id = rid AND kind = 'network'
GROUP BY device
ORDER BY n_processes DESC, network;

-- nccl_nics(rid): the RDMA devices and socket interfaces NCCL listed in run `rid`.
--   rid       run_id.
--   returns   kind          ib | socket,
--             device        mlx5_0, eth0 ...,
--             port          IB port (NULL for sockets),
--             link          IB | RoCE (NULL for sockets),
--             n_processes   log processes that listed it.
-- Algorithm: distinct (kind, device, port, link) of nccl_network rows.
CREATE OR REPLACE TEMP MACRO nccl_nics(rid) AS TABLE
SELECT kind, device, CASE WHEN kind = 'ib' THEN port END AS port, link,
    count(DISTINCT (file_id, proc)) AS n_processes
FROM nccl_network
WHERE run_id = rid AND kind IN ('ib', 'socket')
GROUP BY ALL
ORDER BY kind, device;

-- nccl_gdr(rid): is GPU Direct RDMA in use in run `rid` (one row, or none without evidence)?
--   rid       run_id.
--   returns   gdr           true | false,
--             basis         connections (some NET connection line ends in /GDRDMA, or
--                           none of them does) | capability (`GPU Direct RDMA Enabled|
--                           Disabled for ...`) | ring_gdr (only `use ring PXN x GDR y`, 2.24+),
--             file_id, line_no   the line that decides,
--             evidence      what that line says.
-- Algorithm: nccl_logs.md §4 step 4, strongest evidence first: a NET connection with
-- /GDRDMA (true), NET connections all without it (false), the capability lines (any Enabled
-- = true), then the 2.24+ ring GDR flag (a communicator setting: it reads 1 on a host whose
-- HCAs all say GDR Disabled, so it only decides when nothing else does). A NET/Socket connection never has GDR and does
-- not count as evidence against it.
CREATE OR REPLACE TEMP MACRO nccl_gdr(rid) AS TABLE
WITH net AS (
    SELECT file_id, line_no, gdr, via, channel, own_rank, peer, direction
    FROM nccl_connection_scopes(rid)
    WHERE transport LIKE 'NET/%' AND transport <> 'NET/Socket'
),
by_conn AS (
    SELECT bool_or(gdr) AS gdr, 'connections' AS basis,
        arg_min(file_id, (NOT gdr, file_id, line_no)) AS file_id,
        arg_min(line_no, (NOT gdr, file_id, line_no)) AS line_no,
        arg_min(printf('channel %d: rank %d %s rank %d via %s', channel, own_rank,
            CASE WHEN direction = 'receive' THEN '<-' ELSE '->' END, peer, via),
            (NOT gdr, file_id, line_no)) AS evidence,
        1 AS strength
    FROM net
    HAVING count(*) > 0
),
by_ring AS (
    SELECT bool_or(ring_gdr = 1) AS gdr, 'ring_gdr' AS basis,
        arg_min(file_id, (ring_gdr <> 1, file_id, line_no)) AS file_id,
        arg_min(line_no, (ring_gdr <> 1, file_id, line_no)) AS line_no,
        arg_min(printf('Connected all rings, use ring PXN %d GDR %d', ring_pxn, ring_gdr),
            (ring_gdr <> 1, file_id, line_no)) AS evidence,
        3 AS strength
    FROM nccl_communicators
    WHERE run_id = rid AND ring_gdr IS NOT NULL
    HAVING count(*) > 0
),
by_cap AS (
    SELECT bool_or(enabled) AS gdr, 'capability' AS basis,
        arg_min(file_id, (NOT enabled, file_id, line_no)) AS file_id,
        arg_min(line_no, (NOT enabled, file_id, line_no)) AS line_no,
        arg_min(detail, (NOT enabled, file_id, line_no)) AS evidence,
        2 AS strength
    FROM nccl_network
    WHERE run_id = rid AND kind = 'gdr'
    HAVING count(*) > 0
)
SELECT gdr, basis, file_id, line_no, evidence
FROM (SELECT * FROM by_conn UNION ALL SELECT * FROM by_ring UNION ALL SELECT * FROM by_cap)
ORDER BY strength
LIMIT 1;

-- nccl_tcp_fallback(rid): did run `rid` send inter-node traffic over TCP sockets (one row)?
--   rid       run_id.
--   returns   detected      true when inter-node traffic used NET/Socket,
--             reason        why RDMA was expected, or why sockets were used: rdma_devices
--                           (IB/RoCE devices were listed yet sockets carried the traffic) |
--                           ib_disabled (NCCL_IB_DISABLE=1) | net_forced (NCCL_NET=Socket) |
--                           no_ib_device (`NET/IB : No device found`: RDMA libraries or
--                           devices missing, e.g. in the container) | no_rdma_seen;
--                           NULL when not detected,
--             file_id, line_no   first line showing sockets between nodes,
--             evidence      what that line says.
-- Algorithm: inter-node NET/Socket connection lines (nccl_connection_scopes); failing
-- those, `Using network Socket` in a run whose logs span more than one host or whose
-- communicators report more than one node. The reason is the first hint that applies, in
-- the order listed.
CREATE OR REPLACE TEMP MACRO nccl_tcp_fallback(rid) AS TABLE
WITH conn AS (
    SELECT file_id, line_no, printf('channel %d: rank %d %s rank %d via %s', channel, own_rank,
            CASE WHEN direction = 'receive' THEN '<-' ELSE '->' END, peer, via) AS evidence
    FROM nccl_connection_scopes(rid)
    WHERE transport = 'NET/Socket' AND scope = 'inter-node'
),
multi AS (
    SELECT (SELECT count(DISTINCT lower(split_part(host, '.', 1))) FROM nccl_processes
            WHERE run_id = rid) > 1
        OR coalesce((SELECT max(n_nodes) FROM nccl_communicators WHERE run_id = rid), 1) > 1
        AS multi_node
),
chosen AS (
    SELECT file_id, line_no, 'Using network Socket' AS evidence
    FROM nccl_network, multi
    WHERE run_id = rid AND kind = 'network' AND device = 'Socket' AND multi_node
),
first AS (
    SELECT * FROM (SELECT *, 1 AS k FROM conn UNION ALL SELECT *, 2 FROM chosen)
    ORDER BY k, file_id, line_no LIMIT 1
),
env AS (
    SELECT bool_or(name = 'NCCL_IB_DISABLE' AND trim(value) = '1') AS ib_disabled,
        bool_or(name = 'NCCL_NET' AND lower(trim(value)) = 'socket') AS net_forced
    FROM nccl_env WHERE run_id = rid
),
hints AS (
    SELECT
        EXISTS (SELECT 1 FROM nccl_network WHERE run_id = rid AND kind = 'ib') AS rdma_devices,
        EXISTS (SELECT 1 FROM nccl_network WHERE run_id = rid AND kind = 'no_ib') AS no_ib
)
SELECT f.file_id IS NOT NULL AS detected,
    CASE
        WHEN f.file_id IS NULL THEN NULL
        WHEN h.rdma_devices THEN 'rdma_devices'
        WHEN coalesce(e.ib_disabled, false) THEN 'ib_disabled'
        WHEN coalesce(e.net_forced, false) THEN 'net_forced'
        WHEN h.no_ib THEN 'no_ib_device'
        ELSE 'no_rdma_seen'
    END AS reason,
    f.file_id, f.line_no, f.evidence
FROM hints h CROSS JOIN env e LEFT JOIN first f ON true;

-- nccl_inter_node(rid): does NCCL traffic of run `rid` cross nodes, and over which network
-- (one row)?
--   rid       run_id.
--   returns   inter_node    true | false | NULL (no NCCL process line: nothing tells),
--             basis         hosts (log processes on two or more hosts) | nodes (a
--                           communicator reports nNodes > 1, 2.20+) | connections (a NET
--                           connection to a peer of unknown host: NET is taken as crossing
--                           nodes) | one_host (everything on one host, no sign of more),
--             network       the network between nodes: the net of inter-node NET
--                           connections, else the one NCCL says it uses (`Using network X`,
--                           the net plugin it closes), else AWS Libfabric when the
--                           aws-ofi-nccl plugin initialised (`NET/OFI Initializing
--                           aws-ofi-nccl`), else IB when IB devices were listed, else Socket
--                           when socket interfaces were; NULL when not inter-node,
--             network_basis connections | chosen | plugin | devices.
-- Algorithm: NET does not always mean inter-node (NCCL may use it between GPUs of one
-- host), so hosts decide first, then the communicators' node counts, then NET connections
-- whose peer's host is unknown (the log holds only some ranks).
CREATE OR REPLACE TEMP MACRO nccl_inter_node(rid) AS TABLE
WITH n_hosts AS (
    SELECT count(DISTINCT lower(split_part(host, '.', 1))) AS n
    FROM nccl_processes WHERE run_id = rid
),
n_nodes AS (
    SELECT coalesce(max(n_nodes), 0) AS n FROM nccl_communicators WHERE run_id = rid
),
unknown_peers AS (
    SELECT count(*) FILTER (WHERE scope = 'inter-node' AND scope_source = 'transport') AS n_unknown
    FROM nccl_connection_scopes(rid)
),
decision AS (
    SELECT CASE WHEN h.n > 1 THEN 'hosts' WHEN d.n > 1 THEN 'nodes'
            WHEN c.n_unknown > 0 THEN 'connections' WHEN h.n = 1 THEN 'one_host' END AS basis
    FROM n_hosts h, n_nodes d, unknown_peers c
),
by_conn AS (
    SELECT net AS network, 'connections' AS network_basis, 1 AS k, count(*) AS n
    FROM nccl_connection_scopes(rid)
    WHERE scope = 'inter-node' AND net IS NOT NULL
    GROUP BY net
),
by_choice AS (
    SELECT device AS network, 'chosen' AS network_basis, 2 AS k, count(*) AS n
    FROM nccl_network WHERE run_id = rid AND kind = 'network'
    GROUP BY device
),
by_plugin AS (
    SELECT 'AWS Libfabric' AS network, 'plugin' AS network_basis, 3 AS k, count(*) AS n
    FROM nccl_network WHERE run_id = rid AND kind = 'ofi'
    HAVING count(*) > 0
),
by_device AS (
    SELECT CASE kind WHEN 'ib' THEN 'IB' ELSE 'Socket' END AS network,
        'devices' AS network_basis, CASE kind WHEN 'ib' THEN 4 ELSE 5 END AS k, count(*) AS n
    FROM nccl_network WHERE run_id = rid AND kind IN ('ib', 'socket')
    GROUP BY kind
),
best AS (
    SELECT * FROM (SELECT * FROM by_conn UNION ALL SELECT * FROM by_choice
                   UNION ALL SELECT * FROM by_plugin UNION ALL SELECT * FROM by_device)
    ORDER BY k, n DESC, network LIMIT 1
)
SELECT CASE WHEN x.basis IS NULL THEN NULL ELSE x.basis <> 'one_host' END AS inter_node,
    x.basis,
    CASE WHEN x.basis <> 'one_host' THEN b.network END AS network,
    CASE WHEN x.basis <> 'one_host' THEN b.network_basis END AS network_basis
FROM decision x LEFT JOIN best b ON true;

-- nccl_ib_mtu(rid): the path MTUs of the IB/RoCE queue pairs NCCL set up in run `rid`.
--   rid       run_id.
--   returns   mtu_bytes     the MTU (verbs enum 1-5 → 256-4096 bytes),
--             n_processes   processes with a queue pair at that MTU,
--             file_id, line_no, evidence   the first such line.
--   One row per MTU, smallest first; none when no QP line was logged (NCCL 2.2x+ with
--   NCCL_DEBUG_SUBSYS including NET prints them).
-- Algorithm: the ib_mtu rows of nccl_network grouped by MTU.
CREATE OR REPLACE TEMP MACRO nccl_ib_mtu(rid) AS TABLE
SELECT (128 << idx)::INTEGER AS mtu_bytes, count(DISTINCT (file_id, proc)) AS n_processes,
    arg_min(file_id, (file_id, line_no)) AS file_id,
    arg_min(line_no, (file_id, line_no)) AS line_no,
    arg_min(detail, (file_id, line_no)) AS evidence
FROM nccl_network
WHERE run_id = rid AND kind = 'ib_mtu'
GROUP BY idx
ORDER BY mtu_bytes;
