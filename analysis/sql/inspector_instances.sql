-- inspector_instances: NCCL Inspector records matched across ranks (docs/inspector.md).
-- Reads the inspector_* tables (ingest/schema_inspector.sql). A collective instance is one
-- (comm_id, coll_sn): the communicator's sequence number is the same on every member.
--
-- Who the others waited for. Inspector times each rank's kernel on the GPU
-- (coll_exec_time_us), from the moment that rank's kernel starts to the end of the
-- collective: a rank that arrives early spins inside the kernel until the last member
-- arrives, so its execution is longer by that wait. Hence:
--   * with NCCL_INSPECTOR_DUMP_VERBOSE=1 (every record of the instance has its kernel start
--     time): the last rank is the one whose kernel started last (arrival order, as for
--     traces); its wait_ns is 0 and every other rank waited (last start - its start);
--   * without: the last rank is the one with the SHORTEST execution (method
--     'shortest_execution'): the one the others waited for inside the kernel. The spread
--     max - min execution is the longest wait. Limits: this assumes the data movement itself
--     takes the same time on every rank (true of ring and tree all-reduce, all-gather and
--     reduce-scatter, whose ranks finish together); a rank that is slow inside the kernel
--     (a slow link of its own) ends later but is not "last to arrive" and is not named; ties
--     within tie_ns are not named. Kernel start times of different hosts compare only as far
--     as their clocks agree (the plugin reads the host's clock).
-- The fabric's bandwidth of an instance is the bus bandwidth of its last rank: the one rank
-- that did not wait, so its execution is the transfer alone.

-- inspector_processes(rid): one row per process (hostname, pid) that wrote Inspector records.
--   rid       run_id.
--   returns   hostname, pid, global_rank (the traced rank when every process has one, else
--             world_rank), world_comm_id, n_comms, traced_rank (the rank of the run's traces
--             with the same host and pid, when there is one), world_rank (its rank in the
--             run's largest communicator: the job's rank when that communicator is the world;
--             NULL when the process is not in it).
-- Algorithm: the largest communicator is the one of most ranks (ties: the smallest comm_id);
-- a process is a traced rank when (hostname, pid) are the same.
CREATE OR REPLACE TEMP MACRO inspector_processes(rid) AS TABLE
WITH c AS (
    SELECT DISTINCT comm_id, rank, n_ranks, hostname, pid FROM inspector_comms
    WHERE run_id = rid
),
world AS (
    SELECT comm_id FROM c ORDER BY n_ranks DESC, comm_id LIMIT 1
),
p AS (
    SELECT hostname, pid, count(DISTINCT comm_id) AS n_comms FROM c GROUP BY hostname, pid
)
SELECT p.hostname, p.pid,
    CASE WHEN bool_and(t.rank IS NOT NULL) OVER () THEN t.rank ELSE w.rank END AS global_rank,
    (SELECT comm_id FROM world) AS world_comm_id, p.n_comms, t.rank AS traced_rank,
    w.rank AS world_rank
FROM p
LEFT JOIN c w ON w.hostname IS NOT DISTINCT FROM p.hostname AND w.pid IS NOT DISTINCT FROM p.pid
    AND w.comm_id = (SELECT comm_id FROM world)
LEFT JOIN (SELECT any_value(rank) AS rank, host, pid FROM ranks WHERE run_id = rid
           GROUP BY host, pid) t
    ON t.host = p.hostname AND t.pid = p.pid
ORDER BY global_rank NULLS LAST, p.hostname, p.pid;

-- inspector_members(rid): one row per (communicator, rank in it): the process and host behind it.
--   rid       run_id.
--   returns   comm_id, comm_name, n_ranks, nnodes, rank, hostname, pid, global_rank.
-- Algorithm: inspector_comms joined to inspector_processes on (hostname, pid).
CREATE OR REPLACE TEMP MACRO inspector_members(rid) AS TABLE
SELECT c.comm_id, any_value(c.comm_name) AS comm_name, max(c.n_ranks) AS n_ranks,
    max(c.nnodes) AS nnodes, c.rank, any_value(c.hostname) AS hostname, any_value(c.pid) AS pid,
    any_value(p.global_rank) AS global_rank
FROM inspector_comms c
LEFT JOIN inspector_processes(rid) p
    ON p.hostname IS NOT DISTINCT FROM c.hostname AND p.pid IS NOT DISTINCT FROM c.pid
WHERE c.run_id = rid
GROUP BY c.comm_id, c.rank;

-- inspector_instances(rid, tie_ns): one row per collective instance (comm_id, coll_sn).
--   rid       run_id.
--   tie_ns    executions (or kernel starts) within this of the best (inclusive) name no rank.
--   returns   comm_id, coll_sn, op, algo, proto, msg_bytes, size_log2, n_ranks (communicator
--             size), n_seen (ranks with a record), ts (the latest record time), method
--             ('arrival' | 'shortest_execution'), last_rank (rank in the communicator; NULL on
--             a tie or with one rank seen), min_exec_ns, max_exec_ns, wait_ns (the longest
--             wait: max - min execution, or last - first kernel start), fabric_busbw_gbs (bus
--             bandwidth of the last rank; with a tie, of the fastest), complete (n_seen =
--             n_ranks).
-- Algorithm: the rules of the header, grouped by (comm_id, coll_sn).
CREATE OR REPLACE TEMP MACRO inspector_instances(rid, tie_ns) AS TABLE
WITH r AS (
    SELECT c.*, m.n_ranks
    FROM inspector_colls c
    JOIN (SELECT comm_id, max(n_ranks) AS n_ranks FROM inspector_comms WHERE run_id = rid
          GROUP BY comm_id) m USING (comm_id)
    WHERE c.run_id = rid
),
g AS (
    SELECT comm_id, coll_sn, any_value(op) AS op, any_value(algo) AS algo,
        any_value(proto) AS proto, max(msg_bytes) AS msg_bytes, max(size_log2) AS size_log2,
        max(n_ranks) AS n_ranks, count(DISTINCT rank) AS n_seen, max(ts) AS ts,
        count(kernel_start_ts) = count(*) AS traced,
        min(exec_ns) AS min_exec_ns, max(exec_ns) AS max_exec_ns,
        arg_min(rank, exec_ns) AS fastest_rank, max(busbw_gbs) AS fastest_busbw,
        count(*) FILTER (WHERE exec_ns <= min_exec_ns_w + tie_ns) AS n_fast,
        max(kernel_start_ts) AS last_start, min(kernel_start_ts) AS first_start,
        arg_max(rank, kernel_start_ts) AS latest_rank,
        count(*) FILTER (WHERE kernel_start_ts >= last_start_w - tie_ns) AS n_late
    FROM (
        SELECT *, min(exec_ns) OVER w AS min_exec_ns_w, max(kernel_start_ts) OVER w AS last_start_w
        FROM r WINDOW w AS (PARTITION BY comm_id, coll_sn)
    )
    GROUP BY comm_id, coll_sn
)
SELECT comm_id, coll_sn, op, algo, proto, msg_bytes, size_log2, n_ranks, n_seen, ts,
    CASE WHEN traced THEN 'arrival' ELSE 'shortest_execution' END AS method,
    CASE WHEN n_seen < 2 THEN NULL
        WHEN traced THEN CASE WHEN n_late = 1 THEN latest_rank END
        ELSE CASE WHEN n_fast = 1 THEN fastest_rank END END AS last_rank,
    min_exec_ns, max_exec_ns,
    CASE WHEN traced THEN last_start - first_start ELSE max_exec_ns - min_exec_ns END AS wait_ns,
    fastest_busbw AS fabric_busbw_gbs,
    n_seen = n_ranks AS complete
FROM g
ORDER BY comm_id, coll_sn;

-- inspector_last_minutes(rid, tie_ns): per (communicator, minute, rank in it): how often that
-- rank was the last, for the straggler timeline.
--   rid, tie_ns  as inspector_instances.
--   returns   comm_id, minute_ts, rank, n_instances (named instances of the minute), n_last.
-- Algorithm: instances with a named last rank, by the minute of their ts; every member rank
-- of the communicator gets a row (n_last 0 when it was never last that minute).
CREATE OR REPLACE TEMP MACRO inspector_last_minutes(rid, tie_ns) AS TABLE
WITH i AS (
    SELECT comm_id, ts - ts % 60000000000 AS minute_ts, last_rank
    FROM inspector_instances(rid, tie_ns) WHERE last_rank IS NOT NULL
),
n AS (
    SELECT comm_id, minute_ts, count(*) AS n_instances FROM i GROUP BY ALL
),
m AS (
    SELECT DISTINCT comm_id, rank FROM inspector_comms WHERE run_id = rid
)
SELECT n.comm_id, n.minute_ts, m.rank, n.n_instances,
    count(i.last_rank) AS n_last
FROM n JOIN m USING (comm_id)
LEFT JOIN i ON i.comm_id = n.comm_id AND i.minute_ts = n.minute_ts AND i.last_rank = m.rank
GROUP BY n.comm_id, n.minute_ts, m.rank, n.n_instances
ORDER BY n.comm_id, n.minute_ts, m.rank;
