-- diff: the per-run figures that `commwall diff` sets side by side (the comparison itself, the
-- noise test and the deltas, is in analysis/compare/diff.py).
-- requires: overlap, collective_summary, kernel_algorithms

-- step_times(rid): one row per training step of run `rid`: the job's step time.
--   rid       run_id.
--   returns   step,
--             n_ranks         ranks that have the step,
--             step_ns         the slowest rank's step window (DOUBLE ns): a synchronous job
--                             advances at the pace of its slowest rank,
--             step_ns_median  the median rank's step window (DOUBLE ns).
-- Algorithm: step_overlap(rid) grouped by step; max and median of span_ns.
CREATE OR REPLACE TEMP MACRO step_times(rid) AS TABLE
SELECT step,
    count(*) AS n_ranks,
    max(span_ns)::DOUBLE AS step_ns,
    median(span_ns)::DOUBLE AS step_ns_median
FROM step_overlap(rid)
GROUP BY step
ORDER BY step;

-- collective_sizes(rid): matched collective instances of run `rid` per (op, message size).
--   rid       run_id.
--   returns   op, bytes (the instance's message size, cost_model.md §4 S; NULL when unknown),
--             count               instances,
--             transfer_ns_median  median transfer time (end - last arrival, DOUBLE ns),
--             busbw_GBps_median   median bus bandwidth (GB = 1e9 B; NULL without a size).
--   Only instances whose time is a transfer (_has_transfer: no partner, or a traced rank that
--   never made the call, as in a hang, is no transfer); their transfer time only where the
--   calls agree on sizes (disagreeing ones pair different messages), bandwidth only where
--   the report trusts it (_trusted_bw).
-- Algorithm: those instances of collective_instances(rid), grouped by (op, bytes).
CREATE OR REPLACE TEMP MACRO collective_sizes(rid) AS TABLE
SELECT op, bytes,
    count(*) AS count,
    (median(transfer_ns) FILTER (WHERE NOT coalesce(size_mismatch, false)))::DOUBLE
        AS transfer_ns_median,
    median(busbw_GBps) FILTER (WHERE _trusted_bw(rid, n_ranks, complete, group_size, causal,
        size_mismatch)) AS busbw_GBps_median
FROM collective_instances(rid)
WHERE _has_transfer(rid, n_ranks, complete, group_size)
GROUP BY op, bytes
ORDER BY op, bytes NULLS LAST;

-- nccl_facts(rid): what NCCL chose and was told in run `rid`, one (fact, value) row each, so
-- that two runs can be joined on `fact`.
--   rid       run_id.
--   returns   fact   'kernel algo/proto <op>' (from kernel names, a hint),
--                    'tuning algo/proto <func>' (NCCL's own TUNING choices),
--                    'env <NAME>' (environment variables NCCL echoed),
--             value  the distinct values, sorted and joined with ', '.
-- Algorithm: collective_algorithms, nccl_algorithm_choices and nccl_env, each aggregated to
-- one string per fact.
CREATE OR REPLACE TEMP MACRO nccl_facts(rid) AS TABLE
SELECT fact, string_agg(DISTINCT value, ', ' ORDER BY value) AS value
FROM (
    SELECT 'kernel algo/proto ' || op AS fact,
        coalesce(algo, '?') || '/' || coalesce(protocol, '?') AS value
    FROM collective_algorithms(rid)
    WHERE algo IS NOT NULL OR protocol IS NOT NULL
    UNION ALL
    SELECT 'tuning algo/proto ' || coalesce(func, 'any'), algo || '/' || proto
    FROM nccl_algorithm_choices(rid)
    UNION ALL
    SELECT 'env ' || name, value FROM nccl_env WHERE run_id = rid AND name IS NOT NULL
)
GROUP BY fact
ORDER BY fact;
