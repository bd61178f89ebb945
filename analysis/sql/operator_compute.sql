-- operator_compute: the time a rank spent inside tensor operators in each step.
-- requires: intervals, steps
-- On CPU traces a host op can enclose time that is no computation: autograd's
-- `evaluate_function: ...` wraps the gradient hooks, so a sleep or a blocking call in a hook
-- counts as "compute" in the union of all compute activities (overlap.sql's tau_comp).
-- Operator time keeps only the work of ATen operators (`aten::*`, children included) and, on
-- GPU traces, of compute kernels: extra matmuls count, a sleep between them does not.

-- _is_operator(kind, cat, name): whether an activity is operator work: a compute kernel or an
-- `aten::*` operator (never NULL).
CREATE OR REPLACE TEMP MACRO _is_operator(kind, cat, name) AS
kind = 'compute' AND coalesce(cat = 'kernel' OR name LIKE 'aten::%', false);

-- _operator_ops(rid): the operator activities of run `rid` (compute kernels and `aten::*` ops).
--   returns   rank, ts, dur (dur > 0).
-- Algorithm: filter the activities with _is_operator.
CREATE OR REPLACE TEMP MACRO _operator_ops(rid) AS TABLE
SELECT rank, ts, dur FROM activities
WHERE run_id = rid AND dur > 0 AND _is_operator(kind, cat, name);

-- _operator_compute_from(cover, rid): operator_compute's rows from operator time per window.
--   cover     table name with rank, step, compute_ns (windows without operators may be absent).
--   returns   operator_compute's columns, one row per step window of the run.
-- Algorithm: step_windows left-joined to `cover` (0 when absent).
CREATE OR REPLACE TEMP MACRO _operator_compute_from(cover, rid) AS TABLE
SELECT w.rank, w.step, coalesce(c.compute_ns, 0) AS compute_ns, w.dur AS window_ns
FROM step_windows(rid) w
LEFT JOIN query_table(cover) c ON c.rank = w.rank AND c.step = w.step
ORDER BY w.rank, w.step;

-- operator_compute(rid): operator compute time per (rank, step) of run `rid`.
--   rid       run_id.
--   returns   rank, step, compute_ns (BIGINT ns: length of the union of the rank's compute
--             kernels and `aten::*` operator activities, clipped to the step window of
--             steps.sql), window_ns (the step window's length). Every step window is present
--             (compute_ns 0 when it holds none).
-- Algorithm: _operator_ops clipped to step_windows, their union per (rank, step) measured with
-- timeline_cover (_operator_compute_from). (A run's analysis session computes the same figure
-- in one sweep: analysis/steps/sweep.py.)
CREATE OR REPLACE TEMP MACRO operator_compute(rid) AS TABLE
WITH ops AS (SELECT rank, ts, dur, 'compute' AS kind FROM _operator_ops(rid)),
clipped AS (
    SELECT {'rank': rank, 'step': step} AS grp, ts, dur, kind FROM step_clip(ops, rid)
),
cover AS (
    SELECT grp.rank AS rank, grp.step AS step, compute_ns FROM timeline_cover(clipped)
)
SELECT * FROM _operator_compute_from(cover, rid);
