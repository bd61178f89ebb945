-- summary: the run's headline figures, defined once for every consumer (report, model section,
-- Overview, Model, Compare, Export).
-- requires: overlap, decomposition
-- Aggregation, stated once: the run summary is the MEAN (rank, step) row, over every step window
-- of every rank (the whole trace of each rank when the run has no step annotations); ratios are
-- then computed from that mean row with the per-row formulas of overlap.sql:
--   eta = overlap / min(tau_comp, tau_comm), gamma = tau_comm / tau_comp,
--   exposed_comm_share = exposed_comm / step.
-- Means (not medians) so that the parts of the decomposition add up to the step, and the
-- shares printed anywhere are shares of that one step. The median and p90 step are given
-- beside it for distributions.

-- run_rows(rid): one row per (rank, step) of run `rid` with its overlap metrics and parts.
--   returns   scope ('steps' | 'whole trace'), rank, step (NULL for whole trace), step_ns,
--             compute_ns, comm_ns, both_ns, exposed_comm_ns, idle_ns, the six parts of
--             decomposition.sql (compute_only_ns ... idle is idle_ns).
-- Algorithm: step_overlap joined to step_decomposition; rank_overlap and rank_decomposition
-- when the run has no steps.
CREATE OR REPLACE TEMP MACRO run_rows(rid) AS TABLE
WITH s AS MATERIALIZED (
    SELECT 'steps' AS scope, o.rank, o.step, o.span_ns AS step_ns, o.compute_ns, o.comm_ns,
        o.both_ns, o.exposed_comm_ns, o.idle_ns, d.compute_only_ns, d.compute_overlapped_ns,
        d.exposed_transfer_ns, d.exposed_wait_ns, d.memory_only_ns
    FROM step_overlap(rid) o JOIN step_decomposition(rid) d USING (rank, step)
),
t AS (
    SELECT 'whole trace' AS scope, o.rank, NULL::BIGINT AS step, o.span_ns AS step_ns,
        o.compute_ns, o.comm_ns, o.both_ns, o.exposed_comm_ns, o.idle_ns, d.compute_only_ns,
        d.compute_overlapped_ns, d.exposed_transfer_ns, d.exposed_wait_ns, d.memory_only_ns
    FROM rank_overlap(rid) o JOIN rank_decomposition(rid) d USING (rank)
    WHERE NOT EXISTS (SELECT 1 FROM s) AND o.span_ns > 0
)
SELECT * FROM s
UNION ALL
SELECT * FROM t;

-- run_summary(rid): the run summary of run `rid` (one row; no row when nothing is measured).
--   returns   scope, n_rows, step_ns (mean), step_median_ns, step_p90_ns, tau_comp_ns,
--             tau_comm_ns, overlap_ns, exposed_comm_ns, idle_ns (means), eta, gamma,
--             exposed_comm_share, and the means of the six parts (compute_only_ns,
--             compute_overlapped_ns, exposed_transfer_ns, exposed_wait_ns, memory_only_ns,
--             idle_ns is above).
-- Algorithm: means over run_rows, then the header's formulas.
CREATE OR REPLACE TEMP MACRO run_summary(rid) AS TABLE
WITH m AS (
    SELECT any_value(scope) AS scope, count(*) AS n_rows,
        avg(step_ns) AS step_ns,
        quantile_cont(step_ns, 0.5) AS step_median_ns,
        quantile_cont(step_ns, 0.9) AS step_p90_ns,
        avg(compute_ns) AS tau_comp_ns, avg(comm_ns) AS tau_comm_ns, avg(both_ns) AS overlap_ns,
        avg(exposed_comm_ns) AS exposed_comm_ns, avg(idle_ns) AS idle_ns,
        avg(compute_only_ns) AS compute_only_ns,
        avg(compute_overlapped_ns) AS compute_overlapped_ns,
        avg(exposed_transfer_ns) AS exposed_transfer_ns,
        avg(exposed_wait_ns) AS exposed_wait_ns,
        avg(memory_only_ns) AS memory_only_ns
    FROM run_rows(rid)
    HAVING count(*) > 0
)
SELECT *,
    overlap_ns / NULLIF(least(tau_comp_ns, tau_comm_ns), 0) AS eta,
    tau_comm_ns / NULLIF(tau_comp_ns, 0) AS gamma,
    exposed_comm_ns / NULLIF(step_ns, 0) AS exposed_comm_share
FROM m;
