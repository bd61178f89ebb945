-- commwall store schema, version 1.
--
-- One DuckDB file holds many runs. Every table carries `run_id`, and every table filled from a
-- file carries `file_id`; deleting a run deletes its rows everywhere. Times are int64 nanoseconds since the Unix epoch (`ts`), durations int64 ns
-- (`dur`); an interval is [ts, ts + dur). Relations are documented, not enforced (DuckDB foreign
-- keys slow bulk inserts and block deletes).

-- Key/value facts about the store itself (`schema_version`).
CREATE TABLE IF NOT EXISTS meta (
    key   VARCHAR PRIMARY KEY,
    value VARCHAR
);

-- One row per run: a named set of files from one training job.
CREATE TABLE IF NOT EXISTS runs (
    run_id     INTEGER PRIMARY KEY,
    name       VARCHAR NOT NULL UNIQUE,
    notes      VARCHAR,
    created_at TIMESTAMP
);

-- One row per ingested file. `format` is kineto | nsys | nccl_log. `sha256` makes re-ingest of
-- the same content into the same run a no-op. `detail` is a JSON object of parser facts
-- (time base, counts of skipped events, warnings).
CREATE TABLE IF NOT EXISTS files (
    file_id     INTEGER PRIMARY KEY,
    run_id      INTEGER NOT NULL,
    path        VARCHAR,
    sha256      VARCHAR NOT NULL,
    size_bytes  BIGINT,
    format      VARCHAR NOT NULL,
    n_rows      BIGINT,
    detail      VARCHAR,
    ingested_at TIMESTAMP
);

-- One row per (run, rank): where the rank ran. `time_base` says how timestamps were made
-- absolute: base_ns (baseTimeNanoseconds + relative µs), epoch_us (absolute µs), session
-- (nsys session start + offset) or unknown (no epoch; cross-rank comparisons invalid).
CREATE TABLE IF NOT EXISTS ranks (
    run_id       INTEGER NOT NULL,
    rank         INTEGER NOT NULL,
    file_id      INTEGER,
    host         VARCHAR,
    pid          BIGINT,
    device       INTEGER,
    gpu_name     VARCHAR,
    world_size   INTEGER,
    backend      VARCHAR,
    time_base    VARCHAR,
    nccl_version VARCHAR,
    rank_source  VARCHAR
);

-- Process groups a rank knows (Kineto `distributedInfo.pg_config`). `ranks` is a JSON list.
CREATE TABLE IF NOT EXISTS process_groups (
    run_id  INTEGER NOT NULL,
    file_id INTEGER NOT NULL,
    rank    INTEGER NOT NULL,
    pg_name VARCHAR,
    pg_desc VARCHAR,
    pg_size INTEGER,
    ranks   VARCHAR
);

-- Every complete event of a rank. `kind` is the classification (ingest/classify.py):
-- compute | comm | memory lie on the rank's timeline and enter the interval metrics;
-- other (runtime calls, annotations, enqueue ops, sync markers) does not.
-- `launch_ts` is when the host issued the work: for a GPU activity the start of the CPU
-- runtime call that launched it (same CUPTI correlation id), for a CPU activity its own `ts`.
CREATE TABLE IF NOT EXISTS activities (
    run_id      INTEGER NOT NULL,
    rank        INTEGER NOT NULL,
    file_id     INTEGER NOT NULL,
    ts          BIGINT NOT NULL,
    dur         BIGINT NOT NULL,
    kind        VARCHAR NOT NULL,
    cat         VARCHAR,
    name        VARCHAR,
    pid         BIGINT,
    tid         BIGINT,
    stream      BIGINT,
    correlation BIGINT,
    external_id BIGINT,
    launch_ts   BIGINT
);

-- Training steps as the host annotated them (`ProfilerStep#N`, or an NVTX range): the CPU
-- window [ts, ts + dur) of step N on a rank.
CREATE TABLE IF NOT EXISTS steps (
    run_id  INTEGER NOT NULL,
    file_id INTEGER NOT NULL,
    rank    INTEGER NOT NULL,
    step    BIGINT NOT NULL,
    ts      BIGINT NOT NULL,
    dur     BIGINT NOT NULL
);

-- One row per collective call on a rank: the communication activity (NCCL kernel, gloo op)
-- with what is known of its arguments. `op` is normalised (allreduce, allgather,
-- reduce_scatter, alltoall, broadcast, reduce, sendrecv, send, recv, barrier, unknown);
-- `seq` is the per-process-group sequence number and `seq_source` where it came from
-- (Seq | concrete_inputs | NULL when absent: match by order). Bytes are per rank:
-- in_bytes = in_nelems × sizeof(dtype), out_bytes likewise. `algo` is what the kernel name
-- claims (RING/TREE/...), only a hint (stragglers.md §7).
CREATE TABLE IF NOT EXISTS collectives (
    run_id     INTEGER NOT NULL,
    rank       INTEGER NOT NULL,
    file_id    INTEGER NOT NULL,
    ts         BIGINT NOT NULL,
    dur        BIGINT NOT NULL,
    launch_ts  BIGINT,
    op         VARCHAR NOT NULL,
    name       VARCHAR,
    pg_name    VARCHAR,
    pg_desc    VARCHAR,
    group_size INTEGER,
    seq        BIGINT,
    seq_source VARCHAR,
    dtype      VARCHAR,
    in_nelems  BIGINT,
    out_nelems BIGINT,
    in_bytes   BIGINT,
    out_bytes  BIGINT,
    algo       VARCHAR,
    stream     BIGINT,
    peer       INTEGER
);
-- `peer`: for a send or receive, the other rank (the trace's `Dst Rank` / `Src Rank`, global;
-- on gloo the `dst`/`src` of the `c10d::send` / `c10d::recv_` op that issued it, the rank in
-- the call's process group); NULL for collectives and where the trace does not say.
-- Stores made before the column get it here.
ALTER TABLE collectives ADD COLUMN IF NOT EXISTS peer INTEGER;
-- `pg_ranks`: the global ranks of the call's process group, a JSON list (`Process Group Ranks`
-- of `record_param_comms` or the NCCL kernel); NULL where the trace does not say.
-- `in_splits`, `out_splits`: an all-to-all's split sizes, a JSON list of first-dimension rows
-- per rank of the group, in group order (`In split size` / `Out split size`; on gloo the
-- `input_split_sizes` / `output_split_sizes` of the `c10d::alltoall_base_` that issued it);
-- NULL for an even split and where the trace does not say. Stores made before the columns get
-- them here.
ALTER TABLE collectives ADD COLUMN IF NOT EXISTS pg_ranks VARCHAR;
ALTER TABLE collectives ADD COLUMN IF NOT EXISTS in_splits VARCHAR;
ALTER TABLE collectives ADD COLUMN IF NOT EXISTS out_splits VARCHAR;

-- Identifier sources (sequences are not rolled back, so concurrent ingests never collide).
CREATE SEQUENCE IF NOT EXISTS run_id_seq START 1;
CREATE SEQUENCE IF NOT EXISTS file_id_seq START 1;
