-- collective_summary: run-level summaries of matched collectives: per op, clock quality, problems.
-- requires: collectives

-- _traced_ranks(rid): how many ranks run `rid` traced.
CREATE OR REPLACE TEMP MACRO _traced_ranks(rid) AS
(SELECT count(DISTINCT rank) FROM ranks WHERE run_id = rid);

-- _has_transfer(rid, n_ranks, complete, group_size): whether an instance's time is a transfer:
-- seen by >= 2 ranks, and not missing a rank that the run traced. A traced rank without the
-- call never made it (a hang: the others sat in it until the timeout, and no data moved); an
-- instance short only of ranks the run did not trace (a job traced on 2 of its 128 ranks) is
-- as good as the traces allow.
CREATE OR REPLACE TEMP MACRO _has_transfer(rid, n_ranks, complete, group_size) AS
n_ranks >= 2 AND (coalesce(complete, true) OR group_size > _traced_ranks(rid));

-- _trusted_bw(rid, n_ranks, complete, group_size, causal, size_mismatch): whether an
-- instance's bandwidth means anything: its time is a transfer (_has_transfer), every call
-- ends after the last arrival (a call that ends before a peer arrived was paired with the
-- wrong call, or the clocks are off), and the calls agree on sizes (disagreeing ones pair
-- different messages: their bytes are no message's size).
CREATE OR REPLACE TEMP MACRO _trusted_bw(rid, n_ranks, complete, group_size, causal,
    size_mismatch) AS
_has_transfer(rid, n_ranks, complete, group_size) AND coalesce(causal, false)
    AND NOT coalesce(size_mismatch, false);

-- collective_instances_judged(rid): collective_instances(rid) and the rules above applied to
-- each instance.
--   returns   collective_instances' columns, and has_transfer (_has_transfer: its time is a
--             transfer, so it may be drawn as one), trusted_bw (_trusted_bw: its bandwidth
--             means something). A hung instance, which a traced rank never
--             joined, has neither: its time is the wait until the watchdog's timeout, not a
--             transfer of its bytes.
-- Algorithm: the two macros applied to each row of collective_instances.
CREATE OR REPLACE TEMP MACRO collective_instances_judged(rid) AS TABLE
SELECT *, _has_transfer(rid, n_ranks, complete, group_size) AS has_transfer,
    _trusted_bw(rid, n_ranks, complete, group_size, causal, size_mismatch) AS trusted_bw
FROM collective_instances(rid);

-- collective_ops(rid): one row per collective op of run `rid`.
--   returns   op,
--             count              matched instances,
--             n_ranks            median ranks per instance,
--             bytes_total        sum of instance bytes (cost_model.md §4 S; NULL sizes skipped),
--             bytes_median       median instance bytes (instances whose calls agree on sizes),
--             transfer_ns_median median transfer_ns of the instances that are transfers
--                                (_has_transfer; DOUBLE ns),
--             algbw_GBps_median, busbw_GBps_median   medians over the instances whose
--                                bandwidth can be trusted (_trusted_bw),
--             busbw_GBps_max     the best of those,
--             n_bandwidth        how many those are,
--             skew_start_ns_median, skew_start_ns_max   arrival spread (ns),
--             skew_end_ns_median  end spread after alignment (ns),
--             total_wait_ns      sum of all ranks' waits,
--             incomplete         instances not seen on every rank of their group,
--             size_mismatch      instances whose calls disagree on sizes.
--   Instances seen by one rank only count in `count` and `incomplete` but not in the medians.
-- Algorithm: aggregation of collective_instances by op.
CREATE OR REPLACE TEMP MACRO collective_ops(rid) AS TABLE
SELECT op,
    count(*) AS count,
    median(n_ranks) AS n_ranks,
    sum(bytes)::BIGINT AS bytes_total,
    median(bytes) FILTER (WHERE NOT coalesce(size_mismatch, false)) AS bytes_median,
    median(transfer_ns) FILTER (WHERE _has_transfer(rid, n_ranks, complete, group_size))
        AS transfer_ns_median,
    median(algbw_GBps) FILTER (WHERE _trusted_bw(rid, n_ranks, complete, group_size, causal,
        size_mismatch)) AS algbw_GBps_median,
    median(busbw_GBps) FILTER (WHERE _trusted_bw(rid, n_ranks, complete, group_size, causal,
        size_mismatch)) AS busbw_GBps_median,
    max(busbw_GBps) FILTER (WHERE _trusted_bw(rid, n_ranks, complete, group_size, causal,
        size_mismatch)) AS busbw_GBps_max,
    count(busbw_GBps) FILTER (WHERE _trusted_bw(rid, n_ranks, complete, group_size, causal,
        size_mismatch)) AS n_bandwidth,
    median(skew_start_ns) FILTER (WHERE n_ranks >= 2) AS skew_start_ns_median,
    max(skew_start_ns) FILTER (WHERE n_ranks >= 2) AS skew_start_ns_max,
    median(skew_end_ns) FILTER (WHERE n_ranks >= 2) AS skew_end_ns_median,
    sum(total_wait_ns)::BIGINT AS total_wait_ns,
    count(*) FILTER (WHERE NOT coalesce(complete, false)) AS incomplete,
    count(*) FILTER (WHERE size_mismatch) AS size_mismatch
FROM collective_instances(rid)
GROUP BY op
ORDER BY total_wait_ns DESC NULLS LAST, op;

-- clock_check(rid): how well the clocks of run `rid` could be aligned (one row).
--   returns   n_domains           clock domains (hosts; ranks of unknown host count alone),
--             n_fit_instances     largest number of instances tying a domain to the others,
--             max_abs_offset_ns   largest |offset| applied,
--             max_residual_ns     largest domain residual (DOUBLE ns; NULL: nothing fitted),
--             n_checked           end-synchronous instances seen by >= 2 ranks,
--             skew_end_ns_median, skew_end_ns_p95   end spread of those after alignment (ns),
--             n_violations        of those, instances where a rank ended before the last rank
--                                 started (impossible for a synchronising op: the clocks or
--                                 the matching are wrong),
--             violation_rate      n_violations / n_checked (NULL when nothing was checked).
-- Algorithm: aggregates of clock_offsets and collective_instances.
CREATE OR REPLACE TEMP MACRO clock_check(rid) AS TABLE
WITH o AS (
    SELECT count(*) AS n_domains, max(n_instances) AS n_fit_instances,
        max(abs(offset_ns)) AS max_abs_offset_ns, max(residual_ns) AS max_residual_ns
    FROM clock_offsets(rid)
),
i AS (
    SELECT count(*) AS n_checked,
        median(skew_end_ns) AS skew_end_ns_median,
        quantile_cont(skew_end_ns, 0.95) AS skew_end_ns_p95,
        count(*) FILTER (WHERE NOT causal) AS n_violations
    FROM collective_instances(rid)
    WHERE end_sync AND n_ranks >= 2
)
SELECT o.*, i.*, i.n_violations / NULLIF(i.n_checked, 0) AS violation_rate
FROM o, i;

-- collective_problems(rid): instances of run `rid` that could not be matched cleanly.
--   returns   pg_name, op, instance, ik, n_ranks, group_size,
--             problem  'op_mismatch'   ranks ran different ops under one (pg, seq): the seq
--                                      key is broken (one row per op seen),
--                      'size_mismatch' the calls disagree on element counts or dtype (misaligned
--                                      profiling windows under 'order' matching, or an
--                                      all-to-all-v),
--                      'incomplete'    fewer ranks than the group size: a rank's call is missing
--                                      (not traced, different number of steps, or unmatched),
--             ranks    sorted list of the ranks present.
-- Algorithm: per instance of collective_matches; an instance can have several problems.
CREATE OR REPLACE TEMP MACRO collective_problems(rid) AS TABLE
WITH m AS (SELECT * FROM collective_matches(rid)),
i AS MATERIALIZED (
    SELECT any_value(pg_name) AS pg_name, any_value(op) AS op, any_value(instance) AS instance,
        ik, count(*) AS n_ranks, max(group_size) AS group_size,
        list(rank ORDER BY rank) AS ranks, any_value(match_key) AS match_key,
        count(DISTINCT coalesce(in_nelems, -1)) > 1
            OR count(DISTINCT coalesce(out_nelems, -1)) > 1
            OR count(DISTINCT coalesce(dtype, '')) > 1 AS size_mismatch
    FROM m
    GROUP BY ik
),
ops_per_seq AS (
    SELECT pg_name, instance FROM i
    WHERE match_key <> 'order'
    GROUP BY pg_name, instance
    HAVING count(*) > 1
)
SELECT pg_name, op, instance, ik, n_ranks, group_size, 'op_mismatch' AS problem, ranks
FROM i SEMI JOIN ops_per_seq o
    ON i.pg_name IS NOT DISTINCT FROM o.pg_name AND i.instance = o.instance
WHERE i.match_key <> 'order'
UNION ALL
SELECT pg_name, op, instance, ik, n_ranks, group_size, 'size_mismatch', ranks
FROM i WHERE size_mismatch
UNION ALL
SELECT pg_name, op, instance, ik, n_ranks, group_size, 'incomplete', ranks
FROM i WHERE n_ranks < group_size
ORDER BY problem, pg_name NULLS FIRST, op, instance;
