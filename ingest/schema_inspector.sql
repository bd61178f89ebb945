-- NCCL Inspector output (format nccl_inspector; parser ingest/formats/inspector/, guide
-- docs/inspector.md): the NCCL profiler plugin's per-operation JSON (v4.0-v4.3, one file per
-- process) and its Prometheus textfiles. Every table starts with (run_id, file_id). `comm_id`
-- is the communicator's hash as the plugin prints it ('0x7f8c496ae9f661'); `rank` is the rank
-- inside that communicator (header.rank), not the job's global rank: a process is
-- (hostname, pid). Times are int64 ns since the Unix epoch. A record's time `ts` is the stop of
-- its last kernel channel with NCCL_INSPECTOR_DUMP_VERBOSE=1, else the time of the dump that
-- wrote it (at most one dump interval after the operation ended).

-- One row per (file, communicator, rank, process): what one process recorded of a communicator.
-- comm_name        header.comm_name (NCCL's commName; 'unknown' or NULL when not set).
-- n_ranks, nnodes  the communicator's size in ranks and nodes (header).
-- hostname, pid    the process (metadata).
-- version          metadata.inspector_output_format_version ('v4.3').
-- first_ts, last_ts  times of its first and last record (or dump marker).
-- n_coll, n_p2p, n_proxy  records read; traced: whether its records carry event_trace_ts.
CREATE TABLE IF NOT EXISTS inspector_comms (
    run_id    INTEGER NOT NULL,
    file_id   INTEGER NOT NULL,
    comm_id   VARCHAR NOT NULL,
    comm_name VARCHAR,
    rank      INTEGER NOT NULL,
    n_ranks   INTEGER,
    nnodes    INTEGER,
    hostname  VARCHAR,
    pid       BIGINT,
    version   VARCHAR,
    first_ts  BIGINT,
    last_ts   BIGINT,
    n_coll    BIGINT,
    n_p2p     BIGINT,
    n_proxy   BIGINT,
    traced    BOOLEAN
);

-- One row per completed collective on one rank (coll_perf), kept unless the ingest was asked
-- for aggregates only.
-- coll_sn      the communicator's collective sequence number: the same instance on every rank.
-- op           normalised (allreduce, allgather, reduce_scatter, ...); coll: as written.
-- algo, proto  coll_algo / coll_proto ('RING', 'SIMPLE'; 'unknown' before v4.3).
-- msg_bytes    coll_msg_size_bytes; size_log2: floor(log2(msg_bytes)), the size class.
-- exec_ns      coll_exec_time_us × 1000: GPU-timed execution, waiting inside the kernel included.
-- algobw_gbs, busbw_gbs  as the plugin computed them from msg_bytes and exec time (GB/s).
-- timing_source  coll_timing_source ('kernel_gpu', 'kernel_cpu', 'collective_cpu').
-- ts           see the header of this file.
-- kernel_start_ts  with verbose output: the earliest kernel_start_ts of its channels (ns).
-- coll_start_ts    with verbose output: coll_start_ts (the host enqueued it, ns).
CREATE TABLE IF NOT EXISTS inspector_colls (
    run_id          INTEGER NOT NULL,
    file_id         INTEGER NOT NULL,
    comm_id         VARCHAR NOT NULL,
    rank            INTEGER NOT NULL,
    pid             BIGINT,
    coll_sn         BIGINT NOT NULL,
    op              VARCHAR,
    coll            VARCHAR,
    algo            VARCHAR,
    proto           VARCHAR,
    msg_bytes       BIGINT,
    size_log2       INTEGER,
    exec_ns         BIGINT,
    algobw_gbs      DOUBLE,
    busbw_gbs       DOUBLE,
    timing_source   VARCHAR,
    ts              BIGINT,
    kernel_start_ts BIGINT,
    coll_start_ts   BIGINT
);

-- One row per completed point-to-point operation on one rank (p2p_perf), kept like
-- inspector_colls. p2p_sn: the communicator's p2p sequence number; op: 'send' | 'recv' (p2p:
-- as written); peer: the peer's rank in the communicator; other columns as inspector_colls.
CREATE TABLE IF NOT EXISTS inspector_p2p (
    run_id          INTEGER NOT NULL,
    file_id         INTEGER NOT NULL,
    comm_id         VARCHAR NOT NULL,
    rank            INTEGER NOT NULL,
    pid             BIGINT,
    p2p_sn          BIGINT NOT NULL,
    op              VARCHAR,
    p2p             VARCHAR,
    peer            INTEGER,
    msg_bytes       BIGINT,
    exec_ns         BIGINT,
    busbw_gbs       DOUBLE,
    ts              BIGINT,
    kernel_start_ts BIGINT
);

-- Always kept: per (file, communicator, rank, kind, op, size class, algorithm, protocol,
-- minute) the records of that minute. kind: 'coll' | 'p2p'; minute_ts: the minute's start (ns,
-- UTC) of the records' `ts`. n: records; bytes: their msg_bytes summed; exec_ns_sum / min / max:
-- their execution times; busbw_sum / busbw_max: their bus bandwidths (GB/s) summed and largest.
CREATE TABLE IF NOT EXISTS inspector_minutes (
    run_id      INTEGER NOT NULL,
    file_id     INTEGER NOT NULL,
    comm_id     VARCHAR NOT NULL,
    rank        INTEGER NOT NULL,
    pid         BIGINT,
    kind        VARCHAR NOT NULL,
    op          VARCHAR,
    size_log2   INTEGER,
    algo        VARCHAR,
    proto       VARCHAR,
    minute_ts   BIGINT NOT NULL,
    n           BIGINT,
    bytes       BIGINT,
    exec_ns_sum BIGINT,
    exec_ns_min BIGINT,
    exec_ns_max BIGINT,
    busbw_sum   DOUBLE,
    busbw_max   DOUBLE
);

-- Per (file, communicator, rank, process, minute): the dump_stats markers of that minute (v4.1
-- on; v4.0 writes none, so its losses are unknown). n_dumps: markers; coll_records,
-- p2p_records, proxy_records: records the markers announced; coll_dropped, p2p_dropped,
-- proxy_dropped, proxy_ops_dropped: their *_dropped_since_last_dump summed (records the ring
-- buffer overwrote before they could be written); coll_dropped_total, p2p_dropped_total,
-- proxy_dropped_total: the largest cumulative *_dropped_total seen.
CREATE TABLE IF NOT EXISTS inspector_dumps (
    run_id              INTEGER NOT NULL,
    file_id             INTEGER NOT NULL,
    comm_id             VARCHAR NOT NULL,
    rank                INTEGER NOT NULL,
    pid                 BIGINT,
    minute_ts           BIGINT NOT NULL,
    n_dumps             BIGINT,
    coll_records        BIGINT,
    p2p_records         BIGINT,
    proxy_records       BIGINT,
    coll_dropped        BIGINT,
    p2p_dropped         BIGINT,
    proxy_dropped       BIGINT,
    proxy_ops_dropped   BIGINT,
    coll_dropped_total  BIGINT,
    p2p_dropped_total   BIGINT,
    proxy_dropped_total BIGINT
);

-- Proxy records (proxy_trace, NCCL_INSPECTOR_ENABLE_PROXY=1) per (file, communicator, rank,
-- record type, peer, direction, minute): n records, trans_bytes (trans_size_bytes summed: bytes
-- observed, not necessarily all transferred) and dur_ns (their first to last event_trace_ts,
-- CPU proxy-thread time, summed). Kept as counts: proxy timing is CPU time, not GPU time.
CREATE TABLE IF NOT EXISTS inspector_proxy (
    run_id      INTEGER NOT NULL,
    file_id     INTEGER NOT NULL,
    comm_id     VARCHAR NOT NULL,
    rank        INTEGER NOT NULL,
    record_type VARCHAR,
    peer        INTEGER,
    direction   VARCHAR,
    minute_ts   BIGINT NOT NULL,
    n           BIGINT,
    trans_bytes BIGINT,
    dur_ns      BIGINT
);

-- One row per sample of a Prometheus textfile (NCCL_INSPECTOR_PROM_DUMP=1): metric, value and
-- its labels. kind: 'coll' | 'p2p' | 'device'; op: the collective or p2p_operation label as
-- written; message_size: the bucket label ('4-5GB'); size_lo_bytes: its lower bound in bytes;
-- algo_proto: 'Ring_ll'; node, gpu, comm_name, n_nodes, nranks, version, slurm_job_id: labels.
CREATE TABLE IF NOT EXISTS inspector_prom (
    run_id        INTEGER NOT NULL,
    file_id       INTEGER NOT NULL,
    metric        VARCHAR NOT NULL,
    value         DOUBLE,
    kind          VARCHAR,
    node          VARCHAR,
    gpu           VARCHAR,
    comm_name     VARCHAR,
    n_nodes       INTEGER,
    nranks        INTEGER,
    op            VARCHAR,
    message_size  VARCHAR,
    size_lo_bytes BIGINT,
    algo_proto    VARCHAR,
    version       VARCHAR,
    slurm_job_id  VARCHAR
);

-- Batches skipped by an ingest with --keep-going (never with it off: a bad batch stops the
-- ingest). line: where the bad batch starts; bad_line: the line found wrong; lines: lines
-- skipped; problem: what was wrong, in words.
CREATE TABLE IF NOT EXISTS inspector_skipped (
    run_id   INTEGER NOT NULL,
    file_id  INTEGER NOT NULL,
    line     BIGINT,
    bad_line BIGINT,
    lines    BIGINT,
    problem  VARCHAR
);
