-- PyTorch Flight Recorder dumps (format flight_recorder; parser ingest/formats/flight_recorder.py,
-- guide docs/hangs.md). One dump per rank, JSON or pickle; every table starts with
-- (run_id, file_id) and names the rank whose dump the row comes from. Times are int64 ns since
-- the Unix epoch; NULL when the dump did not record them (gloo records no start/end times).

-- One row per dump.
-- rank              the rank that wrote the dump (dumps do not say: see rank_source).
-- rank_source       'option' (--rank) or 'file_name' (the digits that end the file name).
-- form              'json' | 'pickle'.
-- version           the dump format version ('2.10').
-- comm_lib_version  NCCL version of the rank's communicators ('2.21.5'), NULL for gloo.
-- n_entries         entries in the ring buffer.
CREATE TABLE IF NOT EXISTS fr_dumps (
    run_id           INTEGER NOT NULL,
    file_id          INTEGER NOT NULL,
    rank             INTEGER,
    rank_source      VARCHAR,
    form             VARCHAR,
    version          VARCHAR,
    comm_lib_version VARCHAR,
    n_entries        BIGINT
);

-- One row per process group a dump's pg_config lists.
-- pg_name   the group's name (the key of pg_config: '0', '1', ... for groups made in order;
--           '' where PyTorch registered the group before naming it, as gloo does in 2.13).
-- pg_desc   the group's description ('default_pg', 'undefined', or the user's).
-- ranks     its members, global ranks.
CREATE TABLE IF NOT EXISTS fr_groups (
    run_id  INTEGER NOT NULL,
    file_id INTEGER NOT NULL,
    rank    INTEGER,
    pg_name VARCHAR,
    pg_desc VARCHAR,
    ranks   INTEGER[]
);

-- One row per process group of a dump's pg_status: the watchdog's last collective seq ids.
-- pg_id           the group's uid as the dump keys it ('0').
-- last_enqueued   last collective_seq_id enqueued; last_started / last_completed: last seen
--                 started / completed by the watchdog (-1: none).
CREATE TABLE IF NOT EXISTS fr_pg_status (
    run_id         INTEGER NOT NULL,
    file_id        INTEGER NOT NULL,
    rank           INTEGER,
    pg_id          VARCHAR,
    last_enqueued  BIGINT,
    last_started   BIGINT,
    last_completed BIGINT
);

-- One row per entry of a dump's ring buffer (one collective or p2p call on that rank).
-- record_id          the entry's index in the rank's recorder (grows with every call).
-- pg_id              ProcessGroup uid on that rank.
-- pg_name, pg_desc   the process group (entry's process_group pair), as in fr_groups.
-- collective_seq_id  per-group number of collectives (1-based, the same on every member for the
--                    same call); p2p_seq_id: the same for point-to-point calls; op_id counts
--                    single ops inside coalesced groups.
-- is_p2p             send/recv (matched by p2p_seq_id, not collective_seq_id).
-- profiling_name     'nccl:all_reduce', 'gloo:all_gather', ...; op: normalised ('allgather').
-- input_sizes        tensor shapes, output_sizes likewise; in_nelems / out_nelems: elements
--                    over all tensors; input_dtypes / output_dtypes: 'Float', 'BFloat16', ...
-- state              'scheduled' | 'started' | 'completed' (gloo leaves every entry scheduled).
-- time_created_ns    when the call was enqueued; time_started_ns / time_completed_ns: when the
--                    watchdog saw it start / complete (NULL: not seen).
-- timeout_ms         the group's timeout; retired: the entry's work object was released.
-- thread_name        the thread that enqueued it.
CREATE TABLE IF NOT EXISTS fr_entries (
    run_id            INTEGER NOT NULL,
    file_id           INTEGER NOT NULL,
    rank              INTEGER,
    record_id         BIGINT,
    pg_id             BIGINT,
    pg_name           VARCHAR,
    pg_desc           VARCHAR,
    collective_seq_id BIGINT,
    p2p_seq_id        BIGINT,
    op_id             BIGINT,
    is_p2p            BOOLEAN,
    profiling_name    VARCHAR,
    op                VARCHAR,
    input_sizes       BIGINT[][],
    output_sizes      BIGINT[][],
    in_nelems         BIGINT,
    out_nelems        BIGINT,
    input_dtypes      VARCHAR[],
    output_dtypes     VARCHAR[],
    state             VARCHAR,
    time_created_ns   BIGINT,
    time_started_ns   BIGINT,
    time_completed_ns BIGINT,
    timeout_ms        BIGINT,
    retired           BOOLEAN,
    thread_name       VARCHAR
);
