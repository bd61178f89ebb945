-- operator_compute: the time a rank spent inside tensor operators in each step.
-- requires: intervals, steps
-- On CPU traces a host op can enclose time that is no computation: autograd's
-- `evaluate_function: ...` wraps the gradient hooks, so a sleep or a blocking call in a hook
-- counts as "compute" in the union of all compute activities (overlap.sql's tau_comp).
-- Operator time keeps only the work of ATen operators (`aten::*`, children included) and, on
-- GPU traces, of compute kernels: extra matmuls count, a sleep between them does not.

-- operator_compute(rid): operator compute time per (rank, step) of run `rid`.
--   rid       run_id.
--   returns   rank, step, compute_ns (BIGINT ns: length of the union of the rank's compute
--             kernels and `aten::*` operator activities, clipped to the step window of
--             steps.sql), window_ns (the step window's length). Every step window is present
--             (compute_ns 0 when it holds none).
-- Algorithm: filter compute activities (cat 'kernel' or name 'aten::%'), clip them to
-- step_windows, measure their union per (rank, step) with timeline_cover.
CREATE OR REPLACE TEMP MACRO operator_compute(rid) AS TABLE
WITH ops AS (
    SELECT rank, ts, dur FROM activities
    WHERE run_id = rid AND kind = 'compute' AND dur > 0
        AND (cat = 'kernel' OR name LIKE 'aten::%')
),
win AS MATERIALIZED (SELECT rank, step, ts, dur FROM step_windows(rid)),
clipped AS (
    SELECT {'rank': w.rank, 'step': w.step} AS grp,
        greatest(o.ts, w.ts) AS ts,
        least(o.ts + o.dur, w.ts + w.dur) - greatest(o.ts, w.ts) AS dur,
        'compute' AS kind
    FROM ops o JOIN win w ON o.rank = w.rank AND o.ts < w.ts + w.dur AND o.ts + o.dur > w.ts
),
cover AS (SELECT * FROM timeline_cover(clipped))
SELECT w.rank, w.step, coalesce(c.compute_ns, 0) AS compute_ns, w.dur AS window_ns
FROM win w
LEFT JOIN cover c ON c.grp = {'rank': w.rank, 'step': w.step}
ORDER BY w.rank, w.step;
