-- fabric_baseline: a run's collectives in classes of one op and one message size, the figures
-- set against the nccl-tests curve of the same fabric (analysis/fabric/baseline.py).
-- requires: collective_summary

-- fabric_classes(rid): one row per (op, message size, group size) of run `rid`'s matched
-- collectives whose bandwidth can be trusted.
--   rid       run_id.
--   returns   op, size_bytes (the instances' bytes, as nccl-tests counts a size: the per-rank
--             buffer of an all-reduce, the whole gathered or scattered buffer of an all-gather
--             or reduce-scatter), n_ranks (the group size, else the ranks that joined),
--             n_calls           instances of the class with a trusted bandwidth,
--             transfer_ns_median  their median transfer time (end − last arrival; DOUBLE ns,
--                               the mean of the middle two for an even count),
--             transfer_ns_total   their summed transfer time (ns): what the class costs the run,
--             busbw_GBps_median   their median bus bandwidth (GB/s).
-- Algorithm: collective_instances_judged of the run, instances with trusted_bw, a size and a
-- bus bandwidth, grouped by (op, bytes, group size); largest summed transfer first.
CREATE OR REPLACE TEMP MACRO fabric_classes(rid) AS TABLE
SELECT op, bytes::BIGINT AS size_bytes, coalesce(group_size, n_ranks)::INTEGER AS n_ranks,
    count(*) AS n_calls,
    median(transfer_ns::DOUBLE) AS transfer_ns_median,
    sum(transfer_ns)::BIGINT AS transfer_ns_total,
    median(busbw_GBps) AS busbw_GBps_median
FROM collective_instances_judged(rid)
WHERE trusted_bw AND bytes > 0 AND busbw_GBps > 0
GROUP BY op, bytes, coalesce(group_size, n_ranks)
ORDER BY transfer_ns_total DESC, op, size_bytes;
