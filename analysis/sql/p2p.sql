-- p2p: point-to-point sends and receives matched across ranks, on the aligned clock.
-- requires: collectives, p2p_peers, intervals
-- A send on rank a to peer b and a receive on rank b from peer a belong to one channel a -> b
-- (of one process group). Both sides see the channel's messages in the same order, so within a
-- step the k-th send of a channel is matched with its k-th receive; their sizes must agree.
-- For a matched pair, with the send's start s_ts and the receive's start r_ts and end r_te:
--   recv_wait = min(s_ts, r_te) - r_ts, at least 0: the receive's time before its send began,
--               waiting for the peer (in a pipeline, the bubble: the previous stage's forward or
--               the next stage's backward is not done yet);
--   recv_transfer = r_te - max(r_ts, s_ts), at least 0: the rest of the receive;
--   send_wait = min(r_ts, s_te) - s_ts, at least 0: a send's time before its receive was
--               posted (gloo's send waits for it; NCCL's eager sends of small messages do not).
-- Times are int64 ns, aligned with the clock offsets of collectives.sql (aligned = raw - offset).

-- p2p_calls(rid): every send and receive of run `rid` whose peer the trace names.
--   returns   rank, op ('send' | 'recv'), peer, pg_name, src, dst (the channel: sender and
--             receiver), step (the rank's last ProfilerStep starting at or before the call's
--             launch; NULL before the first), k (0-based index of the call among the rank's
--             calls of that channel and step, in start order), ts (aligned: when the program
--             issued the call, below), te (aligned end), raw_ts (the unaligned start of the
--             transfer event), dur (te - ts), in_nelems, dtype, bytes.
--   On a CPU trace the program issues a send or receive with a `c10d::send` / `c10d::recv_`
--   op and gloo records the transfer (`gloo:send` / `gloo:recv`) when it starts, inside that op
--   or after it: the data can move before that record (a receive may end before its send's
--   record begins), so a call starts at its op. GPU calls (an NCCL kernel, on a stream) start
--   at their kernel: their `c10d::` op runs on the host, ahead of the device.
-- Algorithm: the collectives rows with op send/recv and a peer (a global rank: p2p_peers.sql);
-- the issuing op is the rank's latest `c10d::send` (`c10d::recv_`) starting at or before the
-- call (ASOF join); shifted by the rank's domain offset (clock_offsets); steps by ASOF join on
-- the launch time as collectives.sql does.
CREATE OR REPLACE TEMP MACRO p2p_calls(rid) AS TABLE
WITH off AS (SELECT unnest(ranks) AS rank, offset_ns FROM clock_offsets(rid)),
x AS (
    SELECT rank, op, peer, pg_name, in_nelems, dtype, coalesce(in_bytes, out_bytes) AS bytes,
        ts AS raw_ts, ts + dur AS raw_te, coalesce(launch_ts, ts) AS launch_ts, stream
    FROM p2p_global_calls(rid)
    WHERE peer IS NOT NULL
),
ops AS (
    SELECT rank, ts AS op_ts, CASE name WHEN 'c10d::send' THEN 'send' ELSE 'recv' END AS op
    FROM activities WHERE run_id = rid AND name IN ('c10d::send', 'c10d::recv_')
),
c AS (
    SELECT x.* EXCLUDE (stream), CASE WHEN x.stream IS NULL
        THEN least(coalesce(ops.op_ts, x.raw_ts), x.raw_ts) ELSE x.raw_ts END AS issue_raw
    FROM x ASOF LEFT JOIN ops ON x.rank = ops.rank AND x.op = ops.op AND x.raw_ts >= ops.op_ts
),
s AS (
    SELECT c.* EXCLUDE (issue_raw, raw_te),
        c.issue_raw - coalesce(off.offset_ns, 0) AS ts,
        c.raw_te - coalesce(off.offset_ns, 0) AS te, st.step
    FROM c
    LEFT JOIN off ON off.rank = c.rank
    ASOF LEFT JOIN (SELECT rank, step, ts FROM steps WHERE run_id = rid) st
        ON c.rank = st.rank AND c.launch_ts >= st.ts
)
SELECT rank, op, peer, pg_name,
    CASE WHEN op = 'send' THEN rank ELSE peer END AS src,
    CASE WHEN op = 'send' THEN peer ELSE rank END AS dst,
    step,
    row_number() OVER (PARTITION BY rank, op, peer, pg_name, step ORDER BY ts, raw_ts) - 1 AS k,
    ts, te, raw_ts, te - ts AS dur, in_nelems, dtype, bytes
FROM s;

-- p2p_pairs(rid): the sends and receives of run `rid`, matched.
--   returns   src, dst, pg_name, step, k (the channel and the message's place in it),
--             matched (both sides seen; an unmatched call keeps its own side, the other NULL),
--             send_ts, send_te, send_raw_ts, recv_ts, recv_te, recv_raw_ts,
--             bytes (the receive's, else the send's), size_mismatch (element counts or dtypes
--             differ), recv_wait_ns, recv_transfer_ns, send_wait_ns (the header's formulas;
--             NULL when unmatched).
-- Algorithm: p2p_calls' sends and receives joined on (src, dst, pg_name, step, k), full outer.
CREATE OR REPLACE TEMP MACRO p2p_pairs(rid) AS TABLE
WITH c AS MATERIALIZED (SELECT * FROM p2p_calls(rid)),
s AS (SELECT * FROM c WHERE op = 'send'),
r AS (SELECT * FROM c WHERE op = 'recv')
SELECT coalesce(s.src, r.src) AS src, coalesce(s.dst, r.dst) AS dst,
    coalesce(s.pg_name, r.pg_name) AS pg_name, coalesce(s.step, r.step) AS step,
    coalesce(s.k, r.k) AS k,
    s.ts IS NOT NULL AND r.ts IS NOT NULL AS matched,
    s.ts AS send_ts, s.te AS send_te, s.raw_ts AS send_raw_ts,
    r.ts AS recv_ts, r.te AS recv_te, r.raw_ts AS recv_raw_ts,
    coalesce(r.bytes, s.bytes) AS bytes,
    coalesce(s.in_nelems IS DISTINCT FROM r.in_nelems OR s.dtype IS DISTINCT FROM r.dtype, false)
        AND s.ts IS NOT NULL AND r.ts IS NOT NULL AS size_mismatch,
    -- (greatest and least skip NULLs: an unmatched call's figures are NULL by the CASE)
    CASE WHEN s.ts IS NOT NULL AND r.ts IS NOT NULL
        THEN greatest(least(s.ts, r.te) - r.ts, 0) END AS recv_wait_ns,
    CASE WHEN s.ts IS NOT NULL AND r.ts IS NOT NULL
        THEN greatest(r.te - greatest(r.ts, s.ts), 0) END AS recv_transfer_ns,
    CASE WHEN s.ts IS NOT NULL AND r.ts IS NOT NULL
        THEN greatest(least(r.ts, s.te) - s.ts, 0) END AS send_wait_ns
FROM s FULL OUTER JOIN r
    ON s.src = r.src AND s.dst = r.dst AND s.pg_name IS NOT DISTINCT FROM r.pg_name
    AND s.step IS NOT DISTINCT FROM r.step AND s.k = r.k;

-- p2p_rank_steps(rid): per (rank, step) of run `rid`, its matched point-to-point time.
--   returns   rank, step, n_recv, recv_ns (receives' total time), recv_wait_ns (waiting for
--             the sender), recv_transfer_ns, n_send, send_ns, send_wait_ns (waiting for the
--             receiver), wait_ns (the rank's waiting: the union of its sends' and receives'
--             waiting intervals, so that the sends and receives of one batched kernel, which
--             wait at the same time, count once); only matched pairs without a size mismatch.
-- Algorithm: p2p_pairs' receive side summed by (dst, step), its send side by (src, step);
-- wait_ns: interval_merge of the waits [ts, ts + wait) per (rank, step), summed.
CREATE OR REPLACE TEMP MACRO p2p_rank_steps(rid) AS TABLE
WITH p AS MATERIALIZED (SELECT * FROM p2p_pairs(rid) WHERE matched AND NOT size_mismatch),
r AS (
    SELECT dst AS rank, step, count(*) AS n_recv, sum(recv_te - recv_ts) AS recv_ns,
        sum(recv_wait_ns) AS recv_wait_ns, sum(recv_transfer_ns) AS recv_transfer_ns
    FROM p GROUP BY ALL
),
s AS (
    SELECT src AS rank, step, count(*) AS n_send, sum(send_te - send_ts) AS send_ns,
        sum(send_wait_ns) AS send_wait_ns
    FROM p GROUP BY ALL
),
w AS (
    SELECT {'rank': dst, 'step': step} AS grp, recv_ts AS ts, recv_wait_ns AS dur FROM p
    UNION ALL
    SELECT {'rank': src, 'step': step}, send_ts, send_wait_ns FROM p
),
u AS (
    SELECT grp.rank AS rank, grp.step AS step, sum(dur) AS wait_ns
    FROM interval_merge(w) GROUP BY ALL
)
SELECT coalesce(r.rank, s.rank) AS rank, coalesce(r.step, s.step) AS step,
    coalesce(n_recv, 0) AS n_recv, coalesce(recv_ns, 0)::BIGINT AS recv_ns,
    coalesce(recv_wait_ns, 0)::BIGINT AS recv_wait_ns,
    coalesce(recv_transfer_ns, 0)::BIGINT AS recv_transfer_ns,
    coalesce(n_send, 0) AS n_send, coalesce(send_ns, 0)::BIGINT AS send_ns,
    coalesce(send_wait_ns, 0)::BIGINT AS send_wait_ns,
    coalesce(u.wait_ns, 0)::BIGINT AS wait_ns
FROM r FULL OUTER JOIN s ON r.rank = s.rank AND r.step IS NOT DISTINCT FROM s.step
LEFT JOIN u ON u.rank = coalesce(r.rank, s.rank)
    AND u.step IS NOT DISTINCT FROM coalesce(r.step, s.step)
ORDER BY rank, step;

-- p2p_replay_rows(rid): the matched pairs of run `rid` as two-member barriers for the replay
-- (replay.sql): one row per side.
--   returns   rank, ik (negative: -1, -2, ...; collective instances are positive), step, ts,
--             te, raw_ts of the side's call, recv_te (the pair's receive's end, on both rows).
-- Algorithm: p2p_pairs' matched pairs without size mismatch, numbered, each unnested to its
-- send side (src) and receive side (dst).
CREATE OR REPLACE TEMP MACRO p2p_replay_rows(rid) AS TABLE
WITH p AS (
    SELECT -row_number() OVER (ORDER BY src, dst, pg_name, step, k) AS ik, *
    FROM p2p_pairs(rid) WHERE matched AND NOT size_mismatch
)
SELECT unnest([src, dst]) AS rank, ik, step, unnest([send_ts, recv_ts]) AS ts,
    unnest([send_te, recv_te]) AS te, unnest([send_raw_ts, recv_raw_ts]) AS raw_ts, recv_te
FROM p;

-- p2p_replay_pairs(rid): what each point-to-point barrier of p2p_replay_rows is.
--   returns   ik (as p2p_replay_rows numbers it), src, dst, pg_name, step, k, transfer_ns (the
--             receive's end minus the later of the two starts, at least 0).
-- Algorithm: p2p_pairs' matched pairs without size mismatch, numbered as p2p_replay_rows.
CREATE OR REPLACE TEMP MACRO p2p_replay_pairs(rid) AS TABLE
SELECT -row_number() OVER (ORDER BY src, dst, pg_name, step, k) AS ik, src, dst, pg_name, step,
    k, greatest(recv_te - greatest(send_ts, recv_ts), 0) AS transfer_ns
FROM p2p_pairs(rid) WHERE matched AND NOT size_mismatch;

-- p2p_waits(rid): the waiting part of every matched send and receive of run `rid`, on the
-- rank's own clock (the decomposition's time base, decomposition.sql).
--   returns   rank, ts, dur (ns), pg_name, op ('send' | 'recv').
-- Algorithm: a receive waits [recv_ts, recv_ts + recv_wait_ns), a send [send_ts, send_ts +
-- send_wait_ns) (p2p_pairs, aligned), shifted back by the rank's domain offset.
CREATE OR REPLACE TEMP MACRO p2p_waits(rid) AS TABLE
WITH off AS (SELECT unnest(ranks) AS rank, offset_ns FROM clock_offsets(rid)),
p AS (SELECT * FROM p2p_pairs(rid) WHERE matched AND NOT size_mismatch),
w AS (
    SELECT dst AS rank, recv_ts AS ts, recv_wait_ns AS dur, pg_name, 'recv' AS op
    FROM p WHERE recv_wait_ns > 0
    UNION ALL
    SELECT src AS rank, send_ts AS ts, send_wait_ns AS dur, pg_name, 'send' AS op
    FROM p WHERE send_wait_ns > 0
)
SELECT w.rank, w.ts + coalesce(off.offset_ns, 0) AS ts, w.dur::BIGINT AS dur, w.pg_name, w.op
FROM w LEFT JOIN off ON off.rank = w.rank;

-- p2p_wait_intervals(rid): p2p_waits as the decomposition's wait intervals.
--   returns   rank, ts, dur (ns, the rank's own clock), kind = 'wait'.
-- Algorithm: p2p_waits without its group and op.
CREATE OR REPLACE TEMP MACRO p2p_wait_intervals(rid) AS TABLE
SELECT rank, ts, dur, 'wait' AS kind FROM p2p_waits(rid);
