-- nccl_env: the NCCL settings a run's processes took from their environment.
-- requires: nccl_procs

-- nccl_env_settings(rid): one row per (name, value) NCCL reported `set by environment` in run
-- `rid`.
--   rid       run_id.
--   returns   name, value,
--             n_processes   log processes that reported it,
--             file_id, line_no   the first such line.
-- Algorithm: nccl_env grouped by (name, value), first line in file order.
CREATE OR REPLACE TEMP MACRO nccl_env_settings(rid) AS TABLE
SELECT name, value, count(DISTINCT (file_id, proc)) AS n_processes,
    arg_min(file_id, (file_id, line_no)) AS file_id,
    arg_min(line_no, (file_id, line_no)) AS line_no
FROM nccl_env
WHERE run_id = rid AND name IS NOT NULL
GROUP BY name, value
ORDER BY name, value;
