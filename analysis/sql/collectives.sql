-- collectives: one collective call matched across the ranks of its process group, on one clock.
-- requires: clock, groups
-- Definitions (stragglers.md §3; all times int64 ns, aligned unless said otherwise). For the
-- instance k of a collective and its ranks r:
--   arrival ts_r, end te_r = ts_r + dur_r;  S = max_r ts_r (last arrival);
--   wait_r = S - ts_r;  lateness_r = ts_r - median_j ts_j;
--   transfer = median_r te_r - S (min_r dur_r when that is <= 0: clocks not causal);
--   algbw = bytes / transfer;  busbw = algbw x factor(op, n)  (cost_model.md §4).
-- Performance: per-call rows are kept narrow and numeric (call id cid, (pg, op) id gid, domain
-- id did); names are joined from small tables at the end. Sorting, materialising and joining
-- wide rows with strings is what costs at 10^6-10^7 calls.

-- _is_p2p(op, peer): a send or receive whose peer the trace names. It is matched with its
-- peer's call by p2p.sql (channel, order, size), not with the other ranks' sends by order.
CREATE OR REPLACE TEMP MACRO _is_p2p(op, peer) AS op IN ('send', 'recv') AND peer IS NOT NULL;

-- _match_groups(rid): the (process group, op) pairs of run `rid` and how each is matched.
--   returns   gid (BIGINT id, in (pg_name NULLS FIRST, op) order), pg_name, op,
--             match_key ('seq' | 'concrete_inputs' | 'order', per process group).
-- Algorithm: group the calls by (pg_name, op) (their group as grouped_calls gives it: inferred
-- for CPU traces of several groups; calls it leaves unmatched are left out); the key of a process group is 'seq' when all its
-- calls carry a Seq arg, 'concrete_inputs' when all carry the Concrete Inputs seq, else 'order'.
CREATE OR REPLACE TEMP MACRO _match_groups(rid) AS TABLE
SELECT row_number() OVER (ORDER BY pg_name NULLS FIRST, op) AS gid, pg_name, op,
    CASE
        WHEN bool_and(all_seq) OVER (PARTITION BY pg_name) THEN 'seq'
        WHEN bool_and(all_ci) OVER (PARTITION BY pg_name) THEN 'concrete_inputs'
        ELSE 'order'
    END AS match_key
FROM (
    SELECT pg_name, op,
        bool_and(seq_source IS NOT DISTINCT FROM 'Seq') AS all_seq,
        bool_and(seq_source IS NOT DISTINCT FROM 'concrete_inputs') AS all_ci
    FROM grouped_calls(rid)
    WHERE unmatched_reason IS NULL AND NOT _is_p2p(op, peer)
    GROUP BY pg_name, op
);

-- _rank_domains(rid): the clock domain of every rank of run `rid`.
--   returns   rank, host, domain (the host name, or 'rank <r>' when the host is unknown),
--             did (BIGINT id of the domain).
-- Algorithm: ranks of one host share a clock; a rank of unknown host is a domain of its own.
CREATE OR REPLACE TEMP MACRO _rank_domains(rid) AS TABLE
SELECT rank, host, domain, dense_rank() OVER (ORDER BY domain) AS did
FROM (
    SELECT rank, any_value(host) AS host,
        coalesce(any_value(host), 'rank ' || rank::VARCHAR) AS domain
    FROM (
        SELECT rank, host FROM ranks WHERE run_id = rid
        UNION ALL
        SELECT DISTINCT rank, NULL FROM collectives WHERE run_id = rid
    )
    GROUP BY rank
);

-- _match_rows(rid): every call of run `rid` with its instance, narrow.
--   returns   cid (call id), rank, gid, instance, ik, step, ts, dur, te, bytes, in_nelems,
--             out_nelems, dtype, group_size, seq (meanings as in collective_matches).
-- Algorithm: stragglers.md §2. Steps by ASOF join on launch_ts. For 'order' groups, the k-th call
-- of (pg, op) in step N on every rank is one instance (counting per step keeps a rank with
-- missing or extra steps from shifting every later ordinal); for the others the instance is the
-- seq. Instance keys are numbered on their distinct values (a small table) and joined back.
CREATE OR REPLACE TEMP MACRO _match_rows(rid) AS TABLE
WITH g AS MATERIALIZED (SELECT gid, pg_name, op, match_key FROM _match_groups(rid)),
c AS MATERIALIZED (
    SELECT row_number() OVER () AS cid, x.rank, g.gid, g.match_key, x.group_size, x.dtype,
        x.in_nelems, x.out_nelems, x.seq,
        CASE x.op
            WHEN 'allgather' THEN coalesce(x.out_bytes, x.in_bytes * x.group_size)
            WHEN 'reduce_scatter' THEN coalesce(x.in_bytes, x.out_bytes * x.group_size)
            WHEN 'recv' THEN coalesce(x.out_bytes, x.in_bytes)
            WHEN 'barrier' THEN NULL
            ELSE coalesce(x.in_bytes, x.out_bytes)
        END AS bytes,
        x.ts, x.dur, coalesce(x.launch_ts, x.ts) AS launch_ts
    FROM grouped_calls(rid) x
    JOIN g ON x.pg_name IS NOT DISTINCT FROM g.pg_name AND x.op = g.op
    WHERE x.unmatched_reason IS NULL AND NOT _is_p2p(x.op, x.peer)
),
n AS MATERIALIZED (
    SELECT x.*, s.step
    FROM (SELECT cid, rank, gid, match_key, seq, ts, launch_ts FROM c) x
    ASOF LEFT JOIN (SELECT rank, step, ts FROM steps WHERE run_id = rid) s
        ON x.rank = s.rank AND x.launch_ts >= s.ts
),
k AS MATERIALIZED (
    SELECT cid, gid, step, step AS kstep,
        row_number() OVER (PARTITION BY rank, gid, step ORDER BY ts, launch_ts) AS kord,
        NULL::BIGINT AS kseq
    FROM n WHERE match_key = 'order'
    UNION ALL
    SELECT cid, gid, step, NULL, NULL, seq FROM n WHERE match_key <> 'order'
),
ids AS MATERIALIZED (
    SELECT *, row_number() OVER (ORDER BY gid, instance) AS ik
    FROM (
        SELECT gid, kstep, kord, kseq,
            coalesce(
                kseq, row_number() OVER (PARTITION BY gid ORDER BY kstep NULLS FIRST, kord) - 1
            ) AS instance
        FROM (SELECT DISTINCT gid, kstep, kord, kseq FROM k)
    )
),
kk AS (
    SELECT k.cid, k.step, ids.instance, ids.ik
    FROM k JOIN ids
        ON k.gid = ids.gid AND k.kstep IS NOT DISTINCT FROM ids.kstep
        AND k.kord IS NOT DISTINCT FROM ids.kord AND k.kseq IS NOT DISTINCT FROM ids.kseq
)
SELECT c.cid, c.rank, c.gid, kk.instance, kk.ik, kk.step, c.ts, c.dur, c.ts + c.dur AS te,
    c.bytes, c.in_nelems, c.out_nelems, c.dtype, c.group_size, c.seq
FROM c JOIN kk ON kk.cid = c.cid;

-- collective_matches(rid): every collective call of run `rid` with the instance it belongs to.
--   rid       run_id.
--   returns   one row per collectives row: rank, host,
--             domain       clock domain: the host name, or 'rank <r>' when the host is unknown,
--             pg_name      process group (NULL: the trace names none; all such calls form one
--                          group, the world),
--             op, group_size, dtype, in_nelems, out_nelems,
--             bytes        the call's message size for bandwidth, cost_model.md §4: all-gather
--                          out_bytes (in_bytes x group_size when unknown), reduce-scatter and
--                          all-to-all in_bytes (total), all-reduce/broadcast/reduce/send/recv the
--                          buffer; barrier NULL,
--             seq          per-PG sequence number from the trace (NULL when absent),
--             match_key    'seq' | 'concrete_inputs' | 'order': how calls of this process group
--                          are matched (the best key that every call of the group carries),
--             instance     BIGINT: the seq for seq keys; for 'order' the index of the call among
--                          the group's calls of that op (0-based), counted step by step,
--             ik           BIGINT run-wide instance id: equal for the calls of one instance,
--                          (pg_name, op, instance) identifies it too,
--             step         the rank's last ProfilerStep that started at or before the call's
--                          launch (NULL: before the first step, or no steps),
--             ts, dur, te  raw (unaligned) start, duration, end in ns.
-- Algorithm: _match_rows (stragglers.md §2) with the names of _match_groups and _rank_domains.
-- Calls with equal (pg_name, op, instance) are one instance; a call whose op disagrees with
-- its peers for the same seq therefore forms its own instance (see collective_problems).
CREATE OR REPLACE TEMP MACRO collective_matches(rid) AS TABLE
SELECT m.rank, d.host, d.domain, g.pg_name, g.op, m.group_size, m.dtype, m.in_nelems,
    m.out_nelems, m.bytes, m.seq, g.match_key, m.instance, m.ik, m.step, m.ts, m.dur, m.te
FROM _match_rows(rid) m
JOIN _match_groups(rid) g ON g.gid = m.gid
JOIN _rank_domains(rid) d ON d.rank = m.rank;

-- _clock_offsets(tbl): domain offsets from a table of matched calls.
--   tbl       table name with ik, op, rank, domain (any type), in_nelems, out_nelems, dtype, te.
--   returns   domain, offset_ns (BIGINT, the reference domain at 0), n_instances, residual_ns
--             (see clock_offsets).
-- Algorithm: clock_fit over the end times of the instances that are end-synchronous (all-reduce,
-- all-gather, reduce-scatter, all-to-all, barrier), seen by >= 2 ranks, with equal sizes on all
-- ranks (min = max: one value); then re-anchored on the domain of the lowest rank and rounded.
-- The ends are made relative to the instance's earliest end here, in the aggregate that picks
-- the instances (_clock_fit). Start times are never used.
CREATE OR REPLACE TEMP MACRO _clock_offsets(tbl) AS TABLE
WITH good AS (
    SELECT ik, min(te) AS te0 FROM query_table(tbl)
    WHERE op IN ('allreduce', 'allgather', 'reduce_scatter', 'alltoall', 'barrier')
    GROUP BY ik
    HAVING count(*) >= 2
        AND min(coalesce(in_nelems, -1)) = max(coalesce(in_nelems, -1))
        AND min(coalesce(out_nelems, -1)) = max(coalesce(out_nelems, -1))
        AND min(coalesce(dtype, '')) = max(coalesce(dtype, ''))
),
t AS (
    SELECT x.ik AS grp, x.domain, x.te - good.te0 AS te
    FROM query_table(tbl) x JOIN good ON x.ik = good.ik
),
f AS MATERIALIZED (SELECT * FROM _clock_fit(t)),
d AS (SELECT domain, min(rank) AS first_rank FROM query_table(tbl) GROUP BY domain),
ref AS (
    SELECT coalesce(any_value(f.offset_ns), 0) AS ref_ns
    FROM (SELECT arg_min(domain, first_rank) AS domain FROM d) r
    LEFT JOIN f ON f.domain = r.domain
)
SELECT d.domain,
    round(coalesce(f.offset_ns, 0) - ref.ref_ns)::BIGINT AS offset_ns,
    coalesce(f.n_instances, 0) AS n_instances,
    f.residual_ns
FROM d CROSS JOIN ref LEFT JOIN f ON f.domain = d.domain;

-- _fit_rows(m, g): the columns _clock_offsets needs, from _match_rows-shaped `m` (with did) and
-- _match_groups-shaped `g`.
--   returns   ik, op, rank, domain (= did), in_nelems, out_nelems, dtype, te.
-- Algorithm: join on gid for the op name.
CREATE OR REPLACE TEMP MACRO _fit_rows(m, g) AS TABLE
SELECT x.ik, y.op, x.rank, x.did AS domain, x.in_nelems, x.out_nelems, x.dtype, x.te
FROM query_table(m) x JOIN query_table(g) y ON y.gid = x.gid;

-- clock_offsets(rid): the clock offset of every clock domain (host) of run `rid`.
--   returns   domain, host, ranks (sorted list of the domain's ranks),
--             offset_ns     BIGINT: how far the domain's clock runs ahead of the reference
--                           domain (the one holding the lowest rank, offset 0); aligned time =
--                           raw time - offset_ns,
--             n_instances   end-synchronous instances that tie the domain to the others (0: the
--                           offset could not be estimated and is 0),
--             residual_ns   DOUBLE: median |domain median end - all-rank median end| after
--                           alignment (NULL when n_instances is 0).
-- Algorithm: _clock_offsets over _match_rows, by domain id, then named. One narrow copy of the
-- calls is materialised (m; the rows _clock_offsets reads are joined from it where used).
CREATE OR REPLACE TEMP MACRO clock_offsets(rid) AS TABLE
WITH rd AS MATERIALIZED (SELECT * FROM _rank_domains(rid)),
m AS MATERIALIZED (
    SELECT x.ik, x.gid, x.rank, rd.did, x.in_nelems, x.out_nelems, x.dtype, x.te
    FROM _match_rows(rid) x JOIN rd ON rd.rank = x.rank
),
g AS MATERIALIZED (SELECT * FROM _match_groups(rid)),
fr AS NOT MATERIALIZED (SELECT * FROM _fit_rows(m, g)),
o AS (SELECT * FROM _clock_offsets(fr))
SELECT n.domain, n.host, n.ranks, o.offset_ns, o.n_instances, o.residual_ns
FROM o
JOIN (
    SELECT did, any_value(domain) AS domain, any_value(host) AS host,
        list(rank ORDER BY rank) AS ranks, min(rank) AS first_rank
    FROM rd
    WHERE rank IN (SELECT DISTINCT rank FROM m)
    GROUP BY did
) n ON n.did = o.domain
ORDER BY n.first_rank;

-- _aligned_calls(rid): the matched calls of run `rid` on the aligned clock, narrow.
--   returns   _match_rows' columns with ts, te aligned (raw_ts: the unaligned start).
-- Algorithm: subtract from each call the offset of its rank's domain (clock_offsets; domain
-- names are unique, one per domain id).
CREATE OR REPLACE TEMP MACRO _aligned_calls(rid) AS TABLE
WITH off AS MATERIALIZED (
    SELECT rd.rank, o.offset_ns
    FROM _rank_domains(rid) rd JOIN clock_offsets(rid) o ON o.domain = rd.domain
)
SELECT m.* EXCLUDE (ts, te), m.ts AS raw_ts,
    m.ts - off.offset_ns AS ts, m.te - off.offset_ns AS te
FROM _match_rows(rid) m JOIN off ON off.rank = m.rank;

-- _instance_stats(a): per-instance figures of an _aligned_calls-shaped table `a`.
--   returns   ik, gid, instance, n_ranks, group_size (max), first_ts, last_ts (S), last_rank
--             (highest rank among tied last arrivals), total_wait_ns, min_te, max_te, min_dur,
--             t0 (first arrival of the whole table), median_ts_rel, median_te_rel (DOUBLE:
--             medians of arrival and end minus t0), inst_step (most common step),
--             inst_bytes (median bytes), size_mismatch.
-- Algorithm: one aggregation by ik; medians relative to t0 so that DOUBLE stays exact;
-- total wait = n x S - sum of arrivals (both relative to t0: no int64 overflow).
CREATE OR REPLACE TEMP MACRO _instance_stats(a) AS TABLE
WITH t0 AS (SELECT min(ts) AS t0 FROM query_table(a))
SELECT x.ik, any_value(x.gid) AS gid, any_value(x.instance) AS instance, count(*) AS n_ranks,
    max(x.group_size) AS group_size, min(x.ts) AS first_ts, max(x.ts) AS last_ts,
    arg_max(x.rank, (x.ts, x.rank)) AS last_rank,
    (count(*) * (max(x.ts) - any_value(t0.t0)) - sum(x.ts - t0.t0))::BIGINT AS total_wait_ns,
    min(x.te) AS min_te, max(x.te) AS max_te, min(x.dur) AS min_dur, any_value(t0.t0) AS t0,
    median(x.ts - t0.t0) AS median_ts_rel, median(x.te - t0.t0) AS median_te_rel,
    mode(x.step) AS inst_step, quantile_disc(x.bytes, 0.5) AS inst_bytes,
    count(DISTINCT coalesce(x.in_nelems, -1)) > 1
        OR count(DISTINCT coalesce(x.out_nelems, -1)) > 1
        OR count(DISTINCT coalesce(x.dtype, '')) > 1 AS size_mismatch
FROM query_table(a) x CROSS JOIN t0
GROUP BY x.ik;

-- _instances(rid): _instance_stats of the aligned calls of run `rid`, one row per instance.
-- Algorithm: _instance_stats over _aligned_calls.
CREATE OR REPLACE TEMP MACRO _instances(rid) AS TABLE
WITH a AS MATERIALIZED (SELECT * FROM _aligned_calls(rid))
SELECT * FROM _instance_stats(a);

-- _collective_rows(rid): every matched call of run `rid` on the aligned clock, with the figures
-- of its instance.
--   returns   rank, host, pg_name, op, instance, match_key, ik, ts, te (aligned), raw_ts, dur,
--             bytes, step (the call's own), the columns of _instance_stats but ik/gid/instance,
--             and wait_ns, lateness_ns, arrival (0 = first), is_last, caused_ns, end_sync.
-- Algorithm: per rank (window over ik ordered by arrival, rank breaking ties) the wait it
-- causes: the interval between the i-th and (i+1)-th arrivals (i = 1..n-1) keeps the i ranks
-- already there waiting, and that i x gap is charged in equal parts to the n - i ranks not yet
-- there; caused_ns sums a rank's charges (a running sum including the row, minus the row's own
-- charge). So the causes add up to the waits, tied arrivals get equal charges, and the last
-- rank is charged most. The windows run on narrow rows joined back by cid.
CREATE OR REPLACE TEMP MACRO _collective_rows(rid) AS TABLE
WITH a AS MATERIALIZED (SELECT * FROM _aligned_calls(rid)),
i AS MATERIALIZED (SELECT * FROM _instances(rid)),
w AS (
    SELECT cid, ik, ts, rank, row_number() OVER arr AS pos, lead(ts) OVER arr - ts AS gap
    FROM a
    WINDOW arr AS (PARTITION BY ik ORDER BY ts, rank)
),
sh AS (
    SELECT w.cid, w.ik, w.ts, w.rank, w.pos,
        coalesce(w.gap * w.pos / (i.n_ranks - w.pos), 0) AS share
    FROM w JOIN i ON w.ik = i.ik
),
cum AS (
    SELECT cid, pos,
        sum(share) OVER (PARTITION BY ik ORDER BY ts, rank ROWS UNBOUNDED PRECEDING) - share
            AS caused
    FROM sh
)
SELECT a.rank, rd.host, g.pg_name, g.op, a.instance, g.match_key, a.ik, a.ts, a.te, a.raw_ts,
    a.dur, a.bytes, a.step, i.* EXCLUDE (ik, gid, instance),
    i.last_ts - a.ts AS wait_ns,
    round(a.ts - i.t0 - i.median_ts_rel)::BIGINT AS lateness_ns,
    cum.pos - 1 AS arrival,
    cum.pos = i.n_ranks AS is_last,
    round(cum.caused)::BIGINT AS caused_ns,
    g.op IN ('allreduce', 'allgather', 'reduce_scatter', 'alltoall', 'barrier') AS end_sync
FROM a
JOIN cum ON cum.cid = a.cid
JOIN i ON i.ik = a.ik
JOIN _match_groups(rid) g ON g.gid = a.gid
JOIN _rank_domains(rid) rd ON rd.rank = a.rank;

-- collective_ranks(rid): one row per (matched instance, rank) of run `rid`.
--   returns   pg_name, op, instance, match_key (see collective_matches), ik, rank, host,
--             ts, te       arrival (start) and end of the rank's call, ns, aligned clock,
--             dur          ns (unchanged by alignment),
--             bytes        the rank's message size (collective_matches),
--             wait_ns      S - ts: time the rank waited for the last peer (0 for the last),
--             lateness_ns  ts - median arrival of the instance (positive: later than most),
--             arrival      0-based arrival order (ties broken by rank),
--             is_last      the last arrival (the highest rank among tied last arrivals),
--             caused_ns    the share of the instance's total wait this rank caused (Algorithm
--                          of _collective_rows; sums to the total wait of the instance),
--             n_ranks      ranks seen in the instance,
--             step         the instance's step (most common step of its calls; NULL: none),
--             end_sync     the op ends together on all ranks (see collective_instances),
--             size_mismatch  the instance's calls disagree on sizes (see collective_instances),
--             raw_ts       the arrival on the rank's own (unaligned) clock,
--             group_size, complete   the instance's (see collective_instances).
-- Algorithm: a projection of _collective_rows.
CREATE OR REPLACE TEMP MACRO collective_ranks(rid) AS TABLE
SELECT pg_name, op, instance, match_key, ik, rank, host, ts, te, dur, bytes, wait_ns,
    lateness_ns, arrival, is_last, caused_ns, n_ranks, inst_step AS step, end_sync, size_mismatch,
    raw_ts, group_size, _complete(n_ranks, group_size) AS complete
FROM _collective_rows(rid);

-- _sizes_agree(size_mismatch, op): whether an instance's calls count as one exchange of agreed
-- sizes: no size mismatch, or an all-to-all (an all-to-all-v, the token exchange of a mixture of
-- experts, gives each rank its own split sizes, so its ranks' sizes differ by design).
CREATE OR REPLACE TEMP MACRO _sizes_agree(size_mismatch, op) AS
    NOT coalesce(size_mismatch, false) OR op = 'alltoall';

-- _complete(n_ranks, group_size): whether an instance was joined by every rank of its group.
CREATE OR REPLACE TEMP MACRO _complete(n_ranks, group_size) AS n_ranks = group_size;

-- collective_instances(rid): one row per matched instance of run `rid`.
--   returns   pg_name, op, instance, match_key, ik (see collective_matches),
--             n_ranks        ranks whose call joined the instance,
--             group_size     size of the process group (max over its calls; world size for
--                            traces without PG metadata),
--             complete       n_ranks = group_size (false: some ranks unmatched or untraced),
--             bytes          per-rank message size used for bandwidth (cost_model.md §4 S, median over
--                            ranks; NULL if unknown),
--             first_start_ns, last_start_ns   min and max aligned arrival (epoch ns),
--             last_rank      the last-arriving rank (highest rank among ties),
--             transfer_ns    median aligned end - last_start_ns; min dur_ns when not positive,
--             min_dur_ns     shortest call duration (alignment-free transfer estimate),
--             skew_start_ns  last_start_ns - first_start_ns,
--             skew_end_ns    max aligned end - min aligned end,
--             total_wait_ns  sum of the ranks' waits,
--             causal         every call ends at or after the last arrival (after alignment),
--             end_sync       op ends together on all ranks (all-reduce, all-gather,
--                            reduce-scatter, all-to-all, barrier): skews and waits are meaningful,
--             busbw_factor   nccl-tests factor: all-reduce 2(n-1)/n; all-gather, reduce-scatter,
--                            all-to-all (n-1)/n; broadcast, reduce, send, recv, sendrecv 1;
--                            else NULL (n = group_size, else n_ranks),
--             algbw_GBps     bytes / transfer_ns (GB = 1e9 bytes; NULL when bytes or transfer
--                            unknown or 0),
--             busbw_GBps     algbw_GBps x busbw_factor,
--             step           most common step of the calls,
--             size_mismatch  the calls disagree on in/out element counts or dtype.
-- Algorithm: _instances, named by _match_groups; the formulas of the header.
CREATE OR REPLACE TEMP MACRO collective_instances(rid) AS TABLE
WITH f AS (
    SELECT g.pg_name, g.op, g.match_key, i.*,
        CASE
            WHEN i.median_te_rel - (i.last_ts - i.t0) > 0
            THEN round(i.median_te_rel - (i.last_ts - i.t0))::BIGINT
            ELSE i.min_dur
        END AS transfer_ns,
        coalesce(i.group_size, i.n_ranks) AS n
    FROM _instances(rid) i JOIN _match_groups(rid) g ON g.gid = i.gid
),
b AS (
    SELECT *,
        CASE
            WHEN op = 'allreduce' THEN 2.0 * (n - 1) / n
            WHEN op IN ('allgather', 'reduce_scatter', 'alltoall') THEN (n - 1) / n
            WHEN op IN ('broadcast', 'reduce', 'send', 'recv', 'sendrecv') THEN 1.0
        END AS busbw_factor,
        inst_bytes / NULLIF(transfer_ns, 0) AS algbw_GBps
    FROM f
)
SELECT pg_name, op, instance, match_key, ik, n_ranks, group_size,
    _complete(n_ranks, group_size) AS complete,
    inst_bytes AS bytes, first_ts AS first_start_ns, last_ts AS last_start_ns, last_rank,
    transfer_ns, min_dur AS min_dur_ns,
    last_ts - first_ts AS skew_start_ns,
    max_te - min_te AS skew_end_ns, total_wait_ns,
    min_te >= last_ts AS causal,
    op IN ('allreduce', 'allgather', 'reduce_scatter', 'alltoall', 'barrier') AS end_sync,
    busbw_factor,
    algbw_GBps,
    algbw_GBps * busbw_factor AS busbw_GBps,
    inst_step AS step, size_mismatch
FROM b
ORDER BY first_start_ns, ik;
