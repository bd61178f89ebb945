-- kernel_algorithms: what NCCL kernel names claim about algorithm and protocol (a hint only:
-- NCCL's real per-call choice is in its TUNING log lines).

-- collective_algorithms(rid): collective calls of run `rid` per (op, algorithm, protocol).
--   rid       run_id.
--   returns   op, algo (RING, TREE, ... as ingested; NULL when the name says nothing),
--             protocol (LL, LL128, SIMPLE from names like ncclKernel_AllReduce_RING_LL_Sum_f32;
--             NULL otherwise), calls (count over all ranks), ranks (distinct ranks).
-- Algorithm: regexp on the kernel name for the protocol token; group by.
CREATE OR REPLACE TEMP MACRO collective_algorithms(rid) AS TABLE
SELECT op, algo,
    nullif(regexp_extract(name, '_(LL128|LL|SIMPLE)(_|\(|$)', 1), '') AS protocol,
    count(*) AS calls,
    count(DISTINCT rank) AS ranks
FROM collectives
WHERE run_id = rid
GROUP BY ALL
ORDER BY op, calls DESC;

-- nccl_algorithm_choices(rid): the algorithm and protocol NCCL itself chose, per collective,
-- from the TUNING choice lines of run `rid`'s NCCL logs (NCCL 2.20+).
--   rid       run_id.
--   returns   func (AllReduce ...; NULL on 2.20–2.22 lines, which do not say), algo, proto,
--             choices (lines), min_bytes, max_bytes (message sizes they were made for).
-- Algorithm: the kind = 'choice' rows of nccl_tuning grouped by (func, algo, proto).
CREATE OR REPLACE TEMP MACRO nccl_algorithm_choices(rid) AS TABLE
SELECT func, algo, proto, count(*) AS choices, min(bytes) AS min_bytes, max(bytes) AS max_bytes
FROM nccl_tuning
WHERE run_id = rid AND kind = 'choice'
GROUP BY ALL
ORDER BY func NULLS LAST, min_bytes;
