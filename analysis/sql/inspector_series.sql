-- inspector_series: NCCL Inspector records over the run's wall-clock time (docs/inspector.md).
-- requires: inspector_instances

-- inspector_bandwidth_minutes(rid, tie_ns): the fabric's bus bandwidth per series and minute.
-- A series is (comm_id, op, size_log2, algo, proto): one communicator, collective, size class
-- [2^size_log2, 2^(size_log2+1)) bytes and algorithm/protocol.
--   rid, tie_ns  as inspector_instances.
--   returns   comm_id, op, size_log2, algo, proto, minute_ts, n (instances, or records),
--             busbw_gbs, source ('instances' | 'aggregates').
-- Algorithm: with per-instance rows, the median over the minute's instances of their
-- fabric_busbw_gbs (the bus bandwidth of the rank that did not wait). Without (an ingest of
-- aggregates only), from inspector_minutes: per rank the mean bus bandwidth of its records in
-- the minute, and the largest of those over ranks (the rank that waited least on average):
-- an estimate that reads low when no rank is consistently last.
CREATE OR REPLACE TEMP MACRO inspector_bandwidth_minutes(rid, tie_ns) AS TABLE
WITH i AS (
    SELECT comm_id, op, size_log2, algo, proto, ts - ts % 60000000000 AS minute_ts,
        count(*) AS n, median(fabric_busbw_gbs) AS busbw_gbs, 'instances' AS source
    FROM inspector_instances(rid, tie_ns)
    GROUP BY ALL
),
a AS (
    SELECT comm_id, op, size_log2, algo, proto, minute_ts, sum(n) // count(DISTINCT rank) AS n,
        max(busbw_sum / n) AS busbw_gbs, 'aggregates' AS source
    FROM (
        SELECT comm_id, op, size_log2, algo, proto, minute_ts, rank,
            sum(n) AS n, sum(busbw_sum) AS busbw_sum
        FROM inspector_minutes
        WHERE run_id = rid AND kind = 'coll'
            AND comm_id NOT IN (SELECT DISTINCT comm_id FROM i)
        GROUP BY ALL
    )
    GROUP BY comm_id, op, size_log2, algo, proto, minute_ts
)
SELECT * FROM i
UNION ALL
SELECT * FROM a
ORDER BY comm_id, op, size_log2, algo, proto, minute_ts;

-- inspector_losses(rid): records the plugin's ring buffers lost, per communicator and rank.
--   rid       run_id.
--   returns   comm_id, rank, hostname, pid, n_dumps (dump_stats markers), written (records
--             the markers announced), coll_dropped, p2p_dropped, proxy_dropped (the largest
--             cumulative *_dropped_total), proxy_ops_dropped, first_loss_ts (start of the
--             first minute with a loss; NULL when none), has_markers (false: a v4.0 file, whose
--             losses are unknown).
-- Algorithm: inspector_dumps summed per (comm_id, rank, pid); every (communicator, rank) of
-- inspector_comms is listed, with or without markers.
CREATE OR REPLACE TEMP MACRO inspector_losses(rid) AS TABLE
WITH d AS (
    SELECT comm_id, rank, pid, sum(n_dumps) AS n_dumps,
        sum(coll_records + p2p_records + proxy_records) AS written,
        max(coll_dropped_total) AS coll_dropped, max(p2p_dropped_total) AS p2p_dropped,
        max(proxy_dropped_total) AS proxy_dropped, sum(proxy_ops_dropped) AS proxy_ops_dropped,
        min(minute_ts) FILTER (WHERE coll_dropped + p2p_dropped + proxy_dropped > 0)
            AS first_loss_ts
    FROM inspector_dumps WHERE run_id = rid
    GROUP BY comm_id, rank, pid
)
SELECT c.comm_id, c.rank, c.hostname, c.pid, coalesce(d.n_dumps, 0) AS n_dumps,
    coalesce(d.written, 0) AS written, coalesce(d.coll_dropped, 0) AS coll_dropped,
    coalesce(d.p2p_dropped, 0) AS p2p_dropped, coalesce(d.proxy_dropped, 0) AS proxy_dropped,
    coalesce(d.proxy_ops_dropped, 0) AS proxy_ops_dropped, d.first_loss_ts,
    d.comm_id IS NOT NULL AS has_markers
FROM (SELECT DISTINCT comm_id, rank, hostname, pid FROM inspector_comms WHERE run_id = rid) c
LEFT JOIN d ON d.comm_id = c.comm_id AND d.rank = c.rank AND d.pid IS NOT DISTINCT FROM c.pid
ORDER BY c.comm_id, c.rank;

-- inspector_prom_buckets(rid): the Prometheus textfiles' bus bandwidth per bucket, over GPUs.
--   rid       run_id.
--   returns   kind ('coll' | 'p2p'), comm_name, op, message_size, size_lo_bytes, algo_proto,
--             n_gpus, busbw_min, busbw_median, busbw_max (GB/s), slowest_node, slowest_gpu,
--             exec_us_median.
-- Algorithm: the bus-bandwidth samples (nccl_bus_bandwidth_gbs, nccl_p2p_bus_bandwidth_gbs;
-- each a geometric mean over its GPU's operations of the dump interval) grouped by bucket;
-- the slowest GPU is the one of least bandwidth.
CREATE OR REPLACE TEMP MACRO inspector_prom_buckets(rid) AS TABLE
WITH b AS (
    SELECT * FROM inspector_prom WHERE run_id = rid
        AND metric IN ('nccl_bus_bandwidth_gbs', 'nccl_p2p_bus_bandwidth_gbs')
),
e AS (
    SELECT kind, comm_name, op, message_size, algo_proto, node, gpu, value AS exec_us
    FROM inspector_prom WHERE run_id = rid
        AND metric IN ('nccl_collective_exec_time_microseconds', 'nccl_p2p_exec_time_microseconds')
)
SELECT b.kind, b.comm_name, b.op, b.message_size, any_value(b.size_lo_bytes) AS size_lo_bytes,
    b.algo_proto, count(*) AS n_gpus, min(b.value) AS busbw_min,
    median(b.value) AS busbw_median, max(b.value) AS busbw_max,
    arg_min(b.node, b.value) AS slowest_node, arg_min(b.gpu, b.value) AS slowest_gpu,
    median(e.exec_us) AS exec_us_median
FROM b LEFT JOIN e ON e.kind = b.kind AND e.comm_name IS NOT DISTINCT FROM b.comm_name
    AND e.op IS NOT DISTINCT FROM b.op AND e.message_size IS NOT DISTINCT FROM b.message_size
    AND e.algo_proto IS NOT DISTINCT FROM b.algo_proto AND e.node IS NOT DISTINCT FROM b.node
    AND e.gpu IS NOT DISTINCT FROM b.gpu
GROUP BY b.kind, b.comm_name, b.op, b.message_size, b.algo_proto
ORDER BY b.kind, b.comm_name, b.op, size_lo_bytes, b.algo_proto;

-- inspector_groups(rid): the run's process groups (Kineto pg_config, Flight Recorder dumps)
-- that are Inspector communicators.
--   rid       run_id.
--   returns   comm_id, members (global ranks, sorted), pg_name, pg_desc, source
--             ('kineto' | 'flight_recorder').
-- Algorithm: a communicator is a process group when its members' global ranks
-- (inspector_members) are exactly the group's ranks; the first such group by name.
CREATE OR REPLACE TEMP MACRO inspector_groups(rid) AS TABLE
WITH m AS (
    SELECT comm_id, list_sort(list(global_rank)) AS members, count(*) AS n,
        count(global_rank) AS n_known
    FROM inspector_members(rid) GROUP BY comm_id
),
g AS (
    SELECT DISTINCT pg_name, pg_desc,
        list_sort(try_cast(json_transform(ranks, '["INTEGER"]') AS INTEGER[])) AS ranks,
        'kineto' AS source
    FROM process_groups WHERE run_id = rid
    UNION ALL
    SELECT DISTINCT pg_name, pg_desc, list_sort(ranks), 'flight_recorder'
    FROM fr_groups WHERE run_id = rid
)
SELECT m.comm_id, m.members, min(g.pg_name) AS pg_name, arg_min(g.pg_desc, g.pg_name) AS pg_desc,
    arg_min(g.source, g.pg_name) AS source
FROM m JOIN g ON g.ranks = m.members
WHERE m.n = m.n_known
GROUP BY m.comm_id, m.members;

-- inspector_traced_window(rid): the window the run's traces cover, to set against the whole run.
--   rid       run_id.
--   returns   one row: start_ts, end_ts (ns; NULL when the run has no trace), source ('steps'
--             | 'collectives').
-- Algorithm: the span of the profiler's steps; without steps, of the traced collectives.
CREATE OR REPLACE TEMP MACRO inspector_traced_window(rid) AS TABLE
SELECT coalesce(s.lo, c.lo) AS start_ts, coalesce(s.hi, c.hi) AS end_ts,
    CASE WHEN s.lo IS NOT NULL THEN 'steps' WHEN c.lo IS NOT NULL THEN 'collectives' END
        AS source
FROM (SELECT min(ts) AS lo, max(ts + dur) AS hi FROM steps WHERE run_id = rid) s,
    (SELECT min(ts) AS lo, max(ts + dur) AS hi FROM collectives WHERE run_id = rid) c;

-- inspector_nccl_comms(rid): the Inspector communicators the run's NCCL_DEBUG=INFO logs name.
--   rid       run_id.
--   returns   comm_id, nranks (as the log says), n_processes (processes of the logs that
--             created it).
-- Algorithm: the Inspector's header `id` and the log's `commId` (nccl_communicators.comm_id)
-- are both the communicator's 64-bit hash printed in hex: equal text (case aside) is the same
-- communicator.
CREATE OR REPLACE TEMP MACRO inspector_nccl_comms(rid) AS TABLE
SELECT i.comm_id, max(n.nranks) AS nranks, count(DISTINCT (n.file_id, n.proc)) AS n_processes
FROM (SELECT DISTINCT comm_id FROM inspector_comms WHERE run_id = rid) i
JOIN nccl_communicators n ON n.run_id = rid AND lower(n.comm_id) = lower(i.comm_id)
GROUP BY i.comm_id
ORDER BY i.comm_id;

-- inspector_baseline(rid): the nccl-tests result of the same collective, ranks and size for
-- each Inspector collective series, where the run's logs hold nccl-tests tables.
--   rid       run_id.
--   returns   comm_id, op, size_log2, test_size_bytes, test_busbw_gbs (out-of-place bus
--             bandwidth, in-place where out-of-place is not printed), test_n_ranks,
--             test_n_nodes, table_no.
-- Algorithm: the series' op equals the test's name with underscores removed (all_reduce ->
-- allreduce); the test ran on as many ranks as the communicator has; of those rows, the one
-- whose size is nearest (in log2) the middle of the series' size class [2^k, 2^(k+1)),
-- ties to the larger size, then the later table.
CREATE OR REPLACE TEMP MACRO inspector_baseline(rid) AS TABLE
WITH s AS (
    SELECT DISTINCT m.comm_id, m.op, m.size_log2, c.n_ranks
    FROM inspector_minutes m
    JOIN (SELECT comm_id, max(n_ranks) AS n_ranks FROM inspector_comms WHERE run_id = rid
          GROUP BY comm_id) c USING (comm_id)
    WHERE m.run_id = rid AND m.kind = 'coll' AND m.size_log2 >= 0
),
t AS (
    SELECT replace(test, '_', '') AS op, n_ranks, n_nodes, size_bytes, table_no,
        coalesce(oop_busbw_gbs, ip_busbw_gbs) AS busbw
    FROM nccl_test_results
    WHERE run_id = rid AND test IS NOT NULL AND size_bytes > 0
        AND coalesce(oop_busbw_gbs, ip_busbw_gbs) IS NOT NULL
)
SELECT s.comm_id, s.op, s.size_log2,
    arg_min(t.size_bytes, (abs(log2(t.size_bytes) - s.size_log2 - 0.5), -t.size_bytes,
        -t.table_no)) AS test_size_bytes,
    arg_min(t.busbw, (abs(log2(t.size_bytes) - s.size_log2 - 0.5), -t.size_bytes,
        -t.table_no)) AS test_busbw_gbs,
    any_value(t.n_ranks) AS test_n_ranks,
    arg_min(t.n_nodes, (abs(log2(t.size_bytes) - s.size_log2 - 0.5), -t.size_bytes,
        -t.table_no)) AS test_n_nodes,
    arg_min(t.table_no, (abs(log2(t.size_bytes) - s.size_log2 - 0.5), -t.size_bytes,
        -t.table_no)) AS table_no
FROM s JOIN t ON t.op = replace(s.op, '_', '') AND t.n_ranks = s.n_ranks
GROUP BY s.comm_id, s.op, s.size_log2
ORDER BY s.comm_id, s.op, s.size_log2;
