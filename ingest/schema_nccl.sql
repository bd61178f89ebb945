-- NCCL_DEBUG logs (format nccl_log; parser ingest/nccl_log, guide docs/nccl_logs.md).
--
-- Every table starts with (run_id, file_id). Processes are numbered per file: `proc` is the
-- 0-based order in which a (host, pid) first appears in that file, so (file_id, proc) names
-- a process and every other table refers to it that way. `line_no` is the 1-based physical
-- line of the file a row comes from (file order = the order NCCL wrote, per process).
-- NCCL lines carry no usable time (only WARN lines of NCCL >= 2.26 do): join them to traces
-- by (host, pid), communicator and order, never by time. Enum values follow nccl_logs.md.

-- One row per log file: how many lines it had and what became of them.
-- lines_total       physical lines.
-- lines_nccl        lines that are NCCL's: core-prefixed lines, bare version lines, PyTorch
--                   ProcessGroupNCCL lines, and damaged lines (an NCCL level token with no
--                   parseable prefix). Everything else is foreign text, skipped.
-- lines_recognised  NCCL lines of a known family (stored in a table below, or well-known
--                   informational lines that carry nothing commwall uses).
-- lines_unknown     NCCL lines of no known family = lines_nccl - lines_recognised; each is
--                   kept verbatim in nccl_unknown.
-- lines_damaged     the part of lines_unknown not read: an NCCL level token but no
--                   prefix, a line over 65,536 characters, or a run of 21+ digits.
-- lines_torch       the part of lines_nccl that are PyTorch c10d lines.
-- n_processes       distinct (host, pid) seen.
-- versions          distinct NCCL versions printed anywhere in the file ('2.18.3'), also
--                   those no process could be credited with.
-- shape_version     the lowest NCCL version consistent with the line shapes seen
--                   (nccl_logs.md §17; '2.18' = 2.18.0), NULL when no shape tells.
CREATE TABLE IF NOT EXISTS nccl_files (
    run_id           INTEGER NOT NULL,
    file_id          INTEGER NOT NULL,
    lines_total      BIGINT,
    lines_nccl       BIGINT,
    lines_recognised BIGINT,
    lines_unknown    BIGINT,
    lines_damaged    BIGINT,
    lines_torch      BIGINT,
    n_processes      INTEGER,
    versions         VARCHAR[],
    shape_version    VARCHAR
);

-- One row per process (host, pid) of a file.
-- proc            process number within the file (see above).
-- host            host name as NCCL prints it (cut at the first '.').
-- pid             OS process id.
-- launcher_tag    the launcher's tag in front of the process's lines ('[rank3]:', '3:',
--                 '[1,3]<stdout>:', '[default0]:'), first one seen; NULL when none.
-- tag_rank        the global rank the tag names ([rankN]:, srun 'N:', OpenMPI '[j,N]',
--                 '[N]'); NULL for other tags (torchrun '[default0]:' is a local rank).
-- devices         CUDA devices ([dev] field) the process logged from, in order seen.
-- nccl_version    NCCL version ('2.18.3'): from its own INFO version line, else from a bare
--                 'NCCL version' line with the same launcher tag, or the only process of
--                 the file. NULL when unknown (NCCL <= 2.21 prints it on comm rank 0 only).
-- version_suffix  text between the version and '+cuda' (e.g. 'a0'), NULL when none.
-- cuda_version    CUDA the NCCL build targets ('12.2').
-- cuda_driver     `cudaDriverVersion` (12040 = CUDA 12.4 driver API), NCCL >= 2.13.4.
-- git_version     'branch sha' of NCCL >= 2.29 `NCCL git version`.
-- first_line      line_no of the process's first line.
-- n_lines         lines of this process (recognised or not).
CREATE TABLE IF NOT EXISTS nccl_processes (
    run_id         INTEGER NOT NULL,
    file_id        INTEGER NOT NULL,
    proc           INTEGER NOT NULL,
    host           VARCHAR,
    pid            BIGINT,
    launcher_tag   VARCHAR,
    tag_rank       INTEGER,
    devices        INTEGER[],
    nccl_version   VARCHAR,
    version_suffix VARCHAR,
    cuda_version   VARCHAR,
    cuda_driver    INTEGER,
    git_version    VARCHAR,
    first_line     BIGINT,
    n_lines        BIGINT
);

-- One row per communicator a process created (a reused comm pointer after Destroy/Abort
-- gives a new row). Columns not printed by the NCCL version in use are NULL.
-- proc, comm        the process and its ncclComm_t address ('0x55aa00000000').
-- line_no           first line naming the communicator.
-- comm_id           hash of the ncclUniqueId ('0x5f3c2a1b9d8e7f60', 2.16+): identical on every
--                   rank of the communicator, the cross-process key.
-- rank, nranks      this process's rank in the communicator, and its size.
-- cuda_dev, nvml_dev  CUDA ordinal and NVML index of the GPU.
-- bus_id            PCI bus id as NCCL prints it ('1b000' = 0000:1b:00.0).
-- api               the API that created it (ncclCommInitRank, ncclCommSplit ..., 2.21+).
-- parent            parent communicator of a split.
-- status            last lifecycle event seen: Init START | Init COMPLETE | Destroy COMPLETE
--                   | Abort COMPLETE.
-- n_nodes, local_ranks, local_rank, mnnvl  from the `nNodes` line (2.20.3+); mnnvl = multi-
--                   node NVLink.
-- init_seconds      total of the `Init timings` line (2.22+), seconds.
-- nvls_support      NVLS multicast available on the device (2.17.1+).
-- nvls_heads        NVLS heads (2.18.1+); NULL when NVLS is not used.
-- coll_channels, collnet_channels, nvls_channels, p2p_channels  the channel counts line.
-- connected         'rings', 'trees', 'NVLS tree', 'collnet + chain' as NCCL reported them.
-- ring_pxn, ring_gdr  0/1 from `Connected all rings, use ring PXN x GDR y` (2.24+).
CREATE TABLE IF NOT EXISTS nccl_communicators (
    run_id           INTEGER NOT NULL,
    file_id          INTEGER NOT NULL,
    proc             INTEGER NOT NULL,
    comm             VARCHAR NOT NULL,
    line_no          BIGINT,
    comm_id          VARCHAR,
    rank             INTEGER,
    nranks           INTEGER,
    cuda_dev         INTEGER,
    nvml_dev         INTEGER,
    bus_id           VARCHAR,
    api              VARCHAR,
    parent           VARCHAR,
    status           VARCHAR,
    n_nodes          INTEGER,
    local_ranks      INTEGER,
    local_rank       INTEGER,
    mnnvl            BOOLEAN,
    init_seconds     DOUBLE,
    nvls_support     BOOLEAN,
    nvls_heads       INTEGER,
    coll_channels    INTEGER,
    collnet_channels INTEGER,
    nvls_channels    INTEGER,
    p2p_channels     INTEGER,
    connected        VARCHAR[],
    ring_pxn         INTEGER,
    ring_gdr         INTEGER
);

-- Ring orders and tree positions per channel. Rings are printed by comm rank 0 only, trees
-- by every rank for itself. `comm` is the communicator the line was attributed to (lines
-- carry none; see docs/nccl_logs.md), NULL when none could be.
-- kind          ring | tree.
-- channel       channel number.
-- n_channels    ring channels (the MM of 'Channel NN/MM'), ring rows only.
-- ring          ranks in ring order (NCCL <= 2.22 prints only the first 20 ranks).
-- truncated     the ring line ended in '...' (2.23+ caps lines at 128 characters).
-- tree_rank     the rank the tree row describes (the line's own rank).
-- tree_up       its parent in the channel's tree, -1 for the root.
-- tree_down     its children (empty for a leaf).
CREATE TABLE IF NOT EXISTS nccl_channels (
    run_id     INTEGER NOT NULL,
    file_id    INTEGER NOT NULL,
    proc       INTEGER NOT NULL,
    comm       VARCHAR,
    line_no    BIGINT,
    kind       VARCHAR NOT NULL,
    channel    INTEGER,
    n_channels INTEGER,
    ring       INTEGER[],
    truncated  BOOLEAN,
    tree_rank  INTEGER,
    tree_up    INTEGER,
    tree_down  INTEGER[]
);

-- One row per per-peer connection line (`Channel 00/0 : 1[1] -> 2[2] via P2P/IPC`) and
-- CollNet connection line. src/dst are ranks in `comm`.
-- channel, conn   channel and connection index (the /c of 2.12+, NULL before).
-- src, dst        ranks; dst is NULL for CollNet lines (src = the rank).
-- src_dev, dst_dev  the bracket after each rank: busId hex (<= 2.18.1) or nvmlDev (2.18.3+).
-- direction       send | receive | NULL (unidirectional P2P/SHM lines print none).
-- peer            the other rank: src on receive lines, else dst.
-- via             the transport text as printed ('NET/IB/0/GDRDMA').
-- transport       normalised: P2P/IPC, P2P/CUMEM, P2P/direct, P2P/indirect, P2P/MNNVL,
--                 P2P/common device, SHM, NET/<network> (NET/IB, NET/Socket, NET/AWS
--                 Libfabric ...), COLLNET/<name>.
-- net, net_dev    network name and NIC index of NET/COLLNET lines.
-- proxy_rank      PXN relay rank, NET/<net>/<dev>(<rank>) (2.12+).
-- gdr             GPU Direct RDMA on this connection (/GDRDMA); NULL for P2P/SHM.
-- shared          shared buffers (/Shared).
CREATE TABLE IF NOT EXISTS nccl_connections (
    run_id     INTEGER NOT NULL,
    file_id    INTEGER NOT NULL,
    proc       INTEGER NOT NULL,
    comm       VARCHAR,
    line_no    BIGINT,
    channel    INTEGER,
    conn       INTEGER,
    src        INTEGER,
    dst        INTEGER,
    src_dev    VARCHAR,
    dst_dev    VARCHAR,
    direction  VARCHAR,
    peer       INTEGER,
    via        VARCHAR,
    transport  VARCHAR,
    net        VARCHAR,
    net_dev    INTEGER,
    proxy_rank INTEGER,
    gdr        BOOLEAN,
    shared     BOOLEAN
);

-- Network facts a process logged, one row per fact (per device for device lists).
-- kind       bootstrap (interface used for bootstrap) | ib (an IB/RoCE device NCCL uses) |
--            no_ib (`NET/IB : No device found`) | socket (a socket interface NCCL uses) |
--            socket_threads | network (`Using network X`: the inter-node transport chosen)
--            | plugin (a net/tuner/profiler plugin line) | ofi (an aws-ofi-nccl line) |
--            gdr (`GPU Direct RDMA Enabled|Disabled for ...`) | ib_mtu (a queue pair's
--            `NCCL Dev N IbDev N Port N qpn N mtu N`).
-- idx        device index ([0] of the list); NIC count for ofi; threads for socket_threads;
--            the verbs MTU enum (1-5 = 256-4096 bytes) for ib_mtu rows (a queue pair's path
--            MTU, once per process and value; device 'IbDev N', port the IB port).
-- device     device or interface (mlx5_0, eth0); the network for `network`; the plugin
--            name or kind for plugin; the provider for ofi.
-- port       IB port, or the <port> of an interface.
-- link       IB | RoCE for ib rows.
-- address    IP address of an interface; 'oobif:ip' of the OOB interface for ib rows.
-- enabled    gdr rows: Enabled = true.
-- detail     the message, or 'relaxed ordering' for ib rows with [RO].
CREATE TABLE IF NOT EXISTS nccl_network (
    run_id  INTEGER NOT NULL,
    file_id INTEGER NOT NULL,
    proc    INTEGER NOT NULL,
    line_no BIGINT,
    kind    VARCHAR NOT NULL,
    idx     INTEGER,
    device  VARCHAR,
    port    INTEGER,
    link    VARCHAR,
    address VARCHAR,
    enabled BOOLEAN,
    detail  VARCHAR
);

-- TUNING subsystem lines (comm rank 0): per-operation choices and the a-priori table.
-- kind            choice (`AllReduce: 1048576 Bytes -> Algo RING proto SIMPLE ...`, 2.20+) |
--                 table (one cell of the latency/bandwidth table, 2.5+).
-- func            collective (AllReduce ...); NULL on 2.20–2.22 choice lines.
-- bytes           message size of a choice, bytes.
-- algo, proto     names (TREE RING COLLNET_DIRECT COLLNET_CHAIN NVLS NVLS_TREE PAT / LL LL128
--                 SIMPLE; numeric ids of 2.20–2.23 are translated).
-- time_us         NCCL's predicted time of a choice, µs (2.20–2.23).
-- channel_lo, channel_hi  channel range of a choice (2.24.3+).
-- latency_us, bw_gbps     a table cell: base latency µs and algorithm bandwidth GB/s.
-- max_threads     the table's Max NThreads for that algo/proto.
CREATE TABLE IF NOT EXISTS nccl_tuning (
    run_id      INTEGER NOT NULL,
    file_id     INTEGER NOT NULL,
    proc        INTEGER NOT NULL,
    comm        VARCHAR,
    line_no     BIGINT,
    kind        VARCHAR NOT NULL,
    func        VARCHAR,
    bytes       BIGINT,
    algo        VARCHAR,
    proto       VARCHAR,
    time_us     DOUBLE,
    channel_lo  INTEGER,
    channel_hi  INTEGER,
    latency_us  DOUBLE,
    bw_gbps     DOUBLE,
    max_threads INTEGER
);

-- Environment variables NCCL echoed (`NCCL_IB_DISABLE set by environment to 1`).
CREATE TABLE IF NOT EXISTS nccl_env (
    run_id  INTEGER NOT NULL,
    file_id INTEGER NOT NULL,
    proc    INTEGER NOT NULL,
    line_no BIGINT,
    name    VARCHAR,
    value   VARCHAR
);

-- One row per collective call logged by NCCL_DEBUG_SUBSYS=COLL (every rank, every call).
-- dev        the [dev] of the line.
-- comm       communicator address (with proc: the nccl_communicators row).
-- op_count   NCCL's per-communicator operation counter (printed in hex), not PyTorch's
--            SeqNum.
-- op         normalised op (allreduce, allgather, reduce_scatter, broadcast, reduce, send,
--            recv, alltoall, gather, scatter; unknown).
-- nccl_op    the name as printed (AllReduce ...); NULL on NCCL 2.3.
-- count      elements (AllGather: per-rank send count; ReduceScatter: per-rank receive
--            count).
-- datatype   ncclDataType_t id; dtype its name (int8 ... bfloat16, float8e4m3, float8e5m2).
-- bytes      count × sizeof(datatype): the per-rank message in bytes; NULL for unknown ids.
-- redop      ncclRedOp_t (0 sum, 1 prod, 2 max, 3 min, 4 avg, >= 5 user-defined).
-- root       root rank (Broadcast, Reduce) or peer rank (Send, Recv); 0 otherwise.
-- nranks     communicator size.
-- stream     CUDA stream address.
CREATE TABLE IF NOT EXISTS nccl_colls (
    run_id   INTEGER NOT NULL,
    file_id  INTEGER NOT NULL,
    proc     INTEGER NOT NULL,
    line_no  BIGINT,
    dev      INTEGER,
    comm     VARCHAR,
    op_count BIGINT,
    op       VARCHAR,
    nccl_op  VARCHAR,
    count    BIGINT,
    datatype INTEGER,
    dtype    VARCHAR,
    bytes    BIGINT,
    redop    INTEGER,
    root     INTEGER,
    nranks   INTEGER,
    stream   VARCHAR
);

-- Warnings and errors. proc is NULL for lines with no NCCL prefix (PyTorch, nccl-tests).
-- ts         NCCL >= 2.26 WARN timestamp as epoch ns (the host's wall clock read as UTC).
-- level      WARN (an NCCL WARN line) | ERROR (an error return or a fatal error message).
-- kind       WARN: ib_completion, socket_closed, cuda_failure, alloc_failure,
--            proxy_failure, qp_failure, ring_loop, collnet_unsupported, timeout, other;
--            ERROR: unwind (one frame `file:line -> code` of an error return),
--            abort_unwind (a frame of a chain a thread logs right after
--            `socketProgressOpt: abort called`: the communicator's teardown, not a failure),
--            handled_unwind (a frame of a chain with no WARN of its thread right before it and
--            an INFO line of the thread's own right after: a return its caller went on from),
--            torch_nccl_error (PyTorch `NCCL error in:`), test_failure (nccl-tests).
-- src_file, src_line  NCCL source location (relative to src/), or the error's location.
-- code       ncclResult_t of an unwind frame (2 system, 3 internal, 5 invalid usage, 6
--            remote error ...).
-- thread     the thread an unwind names (Proxy Thread, Async thread ...).
-- chain      error-return chain: consecutive unwind frames of one thread share it; count
--            DISTINCT chain for the number of errors.
-- tid        OS thread id.
-- message    the message text.
CREATE TABLE IF NOT EXISTS nccl_warnings (
    run_id   INTEGER NOT NULL,
    file_id  INTEGER NOT NULL,
    proc     INTEGER,
    line_no  BIGINT,
    ts       BIGINT,
    level    VARCHAR NOT NULL,
    kind     VARCHAR,
    src_file VARCHAR,
    src_line INTEGER,
    code     INTEGER,
    thread   VARCHAR,
    chain    BIGINT,
    tid      BIGINT,
    message  VARCHAR
);

-- PyTorch ProcessGroupNCCL watchdog and flight-recorder lines.
-- kind            timeout (`Watchdog caught collective operation timeout`) | progress (last
--                 enqueued / completed work of the rank) | heartbeat (watchdog stuck) | dump
--                 (flight-recorder dump notice) | crash (`terminate called ...`, `what():`,
--                 a fatal Python exception under `[rankN]:`; a `what():` quoting an NCCL
--                 error is also a row of nccl_warnings) | oom (a process or thread that died
--                 of running out of GPU memory: `torch.OutOfMemoryError: CUDA out of memory`
--                 and its older shapes) | last_error (NCCL's last error that PyTorch quotes on
--                 the line after `Last error:`; line_no is that line's) | interrupt (a
--                 launcher stopping the job from outside: Ctrl-C through mpiexec or srun, a
--                 forwarded signal, Slurm's cancellation, torchrun's death signal; no rank).
-- rank            global rank: the `[rankN]:` header, else the PG rank of the default PG,
--                 else the number a launcher tag in front of the line names (`7:` of srun
--                 --label; the analysis maps it through the tag's processes).
-- rank_source     header | default_pg | launcher_tag | tag_header (a launcher tag whose
--                 `[rankN]:` lines all name that same rank N).
-- pg, pg_desc, pg_rank  process group id, its description/GUID, and the rank in it.
-- seq             PyTorch's per-PG sequence number (SeqNum, = flight recorder
--                 collective_seq_id), not NCCL's opCount.
-- op_type         OpType (ALLREDUCE, _ALLGATHER_BASE ...).
-- numel_in, numel_out  elements in/out (absent in old PyTorch).
-- timeout_ms      the configured timeout; ran_ms how long the work ran (heartbeat: the stall).
-- last_enqueued, last_completed  the rank's last enqueued / completed SeqNum.
-- time_text       the c10 header time ('1104 10:15:42.123456', month day without year).
-- message         the message text.
CREATE TABLE IF NOT EXISTS nccl_timeouts (
    run_id         INTEGER NOT NULL,
    file_id        INTEGER NOT NULL,
    line_no        BIGINT,
    kind           VARCHAR NOT NULL,
    rank           INTEGER,
    rank_source    VARCHAR,
    pg             VARCHAR,
    pg_desc        VARCHAR,
    pg_rank        INTEGER,
    seq            BIGINT,
    op_type        VARCHAR,
    numel_in       BIGINT,
    numel_out      BIGINT,
    timeout_ms     BIGINT,
    ran_ms         BIGINT,
    last_enqueued  BIGINT,
    last_completed BIGINT,
    time_text      VARCHAR,
    message        VARCHAR
);

-- NCCL lines of no known family, kept verbatim (first 4096 characters).
-- kind   unknown (prefixed, unknown message) | damaged (level token, no prefix) | torch (a
--        PyTorch NCCL line of no known family) | too_long (over 65,536 characters, not read) |
--        out_of_range (a run of 21+ digits, or a value no column holds; not read).
CREATE TABLE IF NOT EXISTS nccl_unknown (
    run_id  INTEGER NOT NULL,
    file_id INTEGER NOT NULL,
    proc    INTEGER,
    line_no BIGINT,
    kind    VARCHAR NOT NULL,
    text    VARCHAR
);

-- nccl-tests result tables printed into the log (all_reduce_perf and its siblings): one row per
-- message size of each table, read even where NCCL's lines interleave with the table's.
-- table_no        the table's number in the file (1, 2, ...).
-- line_no         the line the row starts on.
-- test            the test's name without `_perf` (all_reduce, all_gather, ...), from its banner
--                 or command line; NULL when the log does not say.
-- n_ranks, gpu    ranks listed under `# Using devices` before the table, and the first one's GPU.
-- n_nodes         distinct hosts named after `on` in those device lines (NULL: no device line).
-- size_bytes, count, dtype, redop, root   the row's head, as printed (redop and root NULL in
--                 tables without those columns).
-- check_kind      what the last column of each half holds: `wrong` (a count of wrong values)
--                 or `error` (older versions: the largest error, a float).
-- oop_*, ip_*     out-of-place and in-place: time (µs), algorithm and bus bandwidth (GB/s,
--                 10^9 bytes/s), and the check column; NULL when not printed (`N/A`) or lost.
-- wrong_values    the table's `Out of bounds values` count; avg_busbw its `Avg bus bandwidth`.
CREATE TABLE IF NOT EXISTS nccl_test_results (
    run_id        INTEGER NOT NULL,
    file_id       INTEGER NOT NULL,
    table_no      INTEGER NOT NULL,
    line_no       BIGINT,
    test          VARCHAR,
    n_ranks       INTEGER,
    gpu           VARCHAR,
    size_bytes    BIGINT,
    count         BIGINT,
    dtype         VARCHAR,
    redop         VARCHAR,
    root          INTEGER,
    check_kind    VARCHAR,
    oop_time_us   DOUBLE,
    oop_algbw_gbs DOUBLE,
    oop_busbw_gbs DOUBLE,
    oop_wrong     DOUBLE,
    ip_time_us    DOUBLE,
    ip_algbw_gbs  DOUBLE,
    ip_busbw_gbs  DOUBLE,
    ip_wrong      DOUBLE,
    wrong_values  BIGINT,
    avg_busbw     DOUBLE,
    n_nodes       INTEGER
);
-- Stores made before the column `n_nodes` get it here.
ALTER TABLE nccl_test_results ADD COLUMN IF NOT EXISTS n_nodes INTEGER;
