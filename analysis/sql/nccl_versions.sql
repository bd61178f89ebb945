-- nccl_versions: which NCCL versions the logs of a run show, and on which ranks.
-- requires: nccl_procs

-- nccl_versions(rid): one row per distinct NCCL version printed in the logs of run `rid`.
--   rid       run_id.
--   returns   version       '2.18.3',
--             ranks         ranks credited with it (sorted; empty when only a process
--                           without a known rank, or no process, printed it),
--             n_processes   log processes credited with it,
--             n_files       log files that print it.
-- Algorithm: versions listed per file (nccl_files.versions, which also holds bare version
-- lines no process could be credited with) left-joined with the processes credited with
-- each (nccl_proc_ranks).
CREATE OR REPLACE TEMP MACRO nccl_versions(rid) AS TABLE
WITH f AS (
    SELECT DISTINCT file_id, unnest(versions) AS version
    FROM nccl_files WHERE run_id = rid
),
p AS (
    SELECT nccl_version AS version, list(DISTINCT rank ORDER BY rank)
            FILTER (WHERE rank IS NOT NULL) AS ranks,
        count(*) AS n_processes
    FROM nccl_proc_ranks(rid) WHERE nccl_version IS NOT NULL
    GROUP BY nccl_version
)
SELECT f.version, coalesce(p.ranks, []) AS ranks, coalesce(p.n_processes, 0) AS n_processes,
    count(DISTINCT f.file_id) AS n_files
FROM f LEFT JOIN p USING (version)
GROUP BY f.version, p.ranks, p.n_processes
ORDER BY string_split(f.version, '.')::INTEGER[];
