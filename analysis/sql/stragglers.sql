-- stragglers: which ranks arrive late at collectives, what it costs the others, and why.
-- requires: collectives, operator_compute
-- Definitions (ns unless noted), over the instances of collective_ranks that are end-synchronous,
-- seen by >= 2 ranks and without size mismatch, per rank r in a scope (the run, or one step):
--   late_fraction = instances where r arrived last / instances of r,
--   lateness      = median over r's instances of (arrival - the instance's median arrival),
--   excess        = lateness - median over ranks of lateness,
--   score         = robust z of lateness among the scope's ranks: 0.6745 x excess / MAD,
--   wait caused   = sum of r's caused_ns (the waits of the others charged to r),
--   cost_share    = wait caused / (ranks x window): the share of all ranks' time lost
--                   waiting for r (window = median step window, summed over steps),
--   compute       = operator compute time (operator_compute), median over steps for the run,
--   compute_score = robust z of compute among the scope's ranks.
-- A rank is FLAGGED when (1) it is an outlier: score > 3.5 (with <= 2 ranks, or MAD = 0, any
-- positive excess), (2) it is late by a measurable amount: excess >= 10 µs (timestamp
-- resolution and clock residuals are µs), and (3) it matters: cost_share >= 5 %.
-- The median makes the test persistent by construction: a rank late in under half of its
-- instances has a normal lateness. A flagged rank's KIND is 'compute' when its compute is an
-- outlier too (same outlier rule on compute_score) and its compute excess per step is at least
-- half its lateness excess: it arrives late because it had more work. Otherwise 'other': late
-- without extra operator work (host stall, input pipeline, sleep, launch delay, or waiting in
-- another group); 'unknown' when there is no compute to compare (no steps, or no operator or
-- kernel activity on the median rank).

-- _straggler_scores(tbl): scores, flags and kinds for per-rank figures of several scopes.
--   tbl       table name with level, step (scope = (level, step)), rank, lateness_ns,
--             caused_ns, window_ns, compute_ns, and any other columns (passed through).
--   returns   tbl's columns plus n_ranks (ranks in the scope), excess_ns, score, cost_share,
--             compute_excess_ns, compute_ratio, compute_score, flagged, kind (see the header).
-- Algorithm: medians and MADs by window over the scope; the rules of the header.
CREATE OR REPLACE TEMP MACRO _straggler_scores(tbl) AS TABLE
WITH m AS (
    SELECT *,
        median(lateness_ns) OVER s AS med_late,
        median(compute_ns) OVER s AS med_comp,
        count(*) OVER s AS n_ranks
    FROM query_table(tbl)
    WINDOW s AS (PARTITION BY level, step)
),
d AS (
    SELECT *,
        median(abs(lateness_ns - med_late)) OVER s AS mad_late,
        median(abs(compute_ns - med_comp)) OVER s AS mad_comp
    FROM m
    WINDOW s AS (PARTITION BY level, step)
),
z AS (
    SELECT * EXCLUDE (med_late, mad_late, mad_comp),
        lateness_ns - med_late AS excess_ns,
        0.6745 * (lateness_ns - med_late) / NULLIF(mad_late, 0) AS score,
        caused_ns / NULLIF(n_ranks * window_ns, 0) AS cost_share,
        compute_ns - med_comp AS compute_excess_ns,
        compute_ns / NULLIF(med_comp, 0) AS compute_ratio,
        0.6745 * (compute_ns - med_comp) / NULLIF(mad_comp, 0) AS compute_score,
        CASE
            WHEN n_ranks <= 2 OR mad_late = 0 THEN lateness_ns - med_late > 0
            ELSE 0.6745 * (lateness_ns - med_late) / mad_late > 3.5
        END AS late_outlier,
        CASE
            WHEN n_ranks <= 2 OR mad_comp = 0 THEN compute_ns - med_comp > 0
            ELSE 0.6745 * (compute_ns - med_comp) / mad_comp > 3.5
        END AS compute_outlier
    FROM d
),
f AS (
    SELECT *,
        coalesce(late_outlier AND excess_ns >= 10000 AND cost_share >= 0.05, false) AS flagged
    FROM z
)
SELECT * EXCLUDE (late_outlier, compute_outlier, med_comp),
    CASE
        WHEN NOT flagged THEN NULL
        WHEN compute_ns IS NULL OR coalesce(med_comp, 0) = 0 THEN 'unknown'
        WHEN compute_outlier AND compute_excess_ns >= 0.5 * excess_ns THEN 'compute'
        ELSE 'other'
    END AS kind
FROM f;

-- _straggler_levels(rid): per-rank straggler figures of run `rid`, for the whole run
-- (level 'run', step NULL) and for every step (level 'step').
--   returns   level, step, rank, host, n_instances, n_last, late_fraction, lateness_ns,
--             wait_ns (total wait the rank suffered), caused_ns (total wait it caused),
--             window_ns, compute_ns, then the columns of _straggler_scores.
-- Algorithm: aggregate the usable collective_ranks rows per (step, rank) and per rank; window
-- per step = median step window over ranks (the span of the step's instances when the step is
-- NULL); run window = sum of step windows; compute and step windows from operator_compute.
CREATE OR REPLACE TEMP MACRO _straggler_levels(rid) AS TABLE
WITH r AS MATERIALIZED (
    SELECT * FROM collective_ranks(rid) WHERE n_ranks >= 2 AND end_sync AND NOT size_mismatch
),
comp AS MATERIALIZED (SELECT rank, step, compute_ns, window_ns FROM operator_compute(rid)),
win AS (
    SELECT step, round(median(window_ns))::BIGINT AS step_ns FROM comp GROUP BY step
),
sw AS MATERIALIZED (
    SELECT s.step, coalesce(w.step_ns, s.span_ns) AS window_ns
    FROM (SELECT step, max(te) - min(ts) AS span_ns FROM r GROUP BY step) s
    LEFT JOIN win w ON s.step = w.step
),
per_step AS (
    SELECT 'step' AS level, r.step, r.rank, any_value(r.host) AS host,
        count(*) AS n_instances, count(*) FILTER (WHERE r.is_last) AS n_last,
        median(r.lateness_ns) AS lateness_ns,
        sum(r.wait_ns)::BIGINT AS wait_ns, sum(r.caused_ns)::BIGINT AS caused_ns
    FROM r
    GROUP BY r.step, r.rank
),
per_run AS (
    SELECT 'run' AS level, NULL::BIGINT AS step, rank, any_value(host) AS host,
        count(*) AS n_instances, count(*) FILTER (WHERE is_last) AS n_last,
        median(lateness_ns) AS lateness_ns,
        sum(wait_ns)::BIGINT AS wait_ns, sum(caused_ns)::BIGINT AS caused_ns
    FROM r
    GROUP BY rank
),
rows AS (
    SELECT p.*, sw.window_ns, c.compute_ns
    FROM per_step p
    LEFT JOIN sw ON p.step IS NOT DISTINCT FROM sw.step
    LEFT JOIN comp c ON c.rank = p.rank AND c.step = p.step
    UNION ALL
    SELECT p.*, (SELECT sum(window_ns)::BIGINT FROM sw) AS window_ns, c.compute_ns
    FROM per_run p
    LEFT JOIN (SELECT rank, median(compute_ns) AS compute_ns FROM comp GROUP BY rank) c
        ON c.rank = p.rank
),
t AS (SELECT *, n_last / n_instances AS late_fraction FROM rows)
SELECT * FROM _straggler_scores(t);

-- straggler_steps(rid): straggler figures per (step, rank) of run `rid`.
--   returns   step (NULL: instances before the first step), rank, host,
--             n_instances   usable instances of the rank in the step,
--             n_last        of those, how many it arrived last at,
--             late_fraction n_last / n_instances,
--             lateness_ns   median (arrival - instance median arrival) (DOUBLE ns),
--             excess_ns     lateness_ns - median over the step's ranks,
--             score         robust z of lateness among the step's ranks (NULL: MAD 0),
--             wait_ns       total time the rank waited for others,
--             caused_ns     total waiting of others charged to the rank,
--             window_ns     the step's length (median step window over ranks),
--             cost_share    caused_ns / (n_ranks x window_ns),
--             compute_ns    operator compute of the rank in the step (NULL: none measured),
--             compute_excess_ns, compute_ratio (compute / median), compute_score (robust z),
--             n_ranks       ranks in the step, flagged, kind (rules in the header).
-- Algorithm: the 'step' level of _straggler_levels.
CREATE OR REPLACE TEMP MACRO straggler_steps(rid) AS TABLE
SELECT step, rank, host, n_instances, n_last, late_fraction, lateness_ns, excess_ns, score,
    wait_ns, caused_ns, window_ns, cost_share, compute_ns, compute_excess_ns, compute_ratio,
    compute_score, n_ranks, flagged, kind
FROM _straggler_levels(rid)
WHERE level = 'step'
ORDER BY step, rank;

-- straggler_ranks(rid): straggler figures per rank over the whole run `rid`.
--   returns   the columns of straggler_steps without step (compute_ns: median over steps;
--             window_ns: sum of step windows), plus n_steps (steps with usable instances)
--             and steps_flagged (steps in which the rank was flagged on that step's figures).
--   A run with a single rank, or without usable instances, returns no rows.
-- Algorithm: the 'run' level of _straggler_levels, joined to a count of its 'step' level.
CREATE OR REPLACE TEMP MACRO straggler_ranks(rid) AS TABLE
WITH l AS MATERIALIZED (SELECT * FROM _straggler_levels(rid)),
s AS (
    SELECT rank, count(*) AS n_steps, count(*) FILTER (WHERE flagged) AS steps_flagged
    FROM l WHERE level = 'step'
    GROUP BY rank
)
SELECT l.rank, l.host, l.n_instances, l.n_last, l.late_fraction, l.lateness_ns, l.excess_ns,
    l.score, l.wait_ns, l.caused_ns, l.window_ns, l.cost_share, l.compute_ns,
    l.compute_excess_ns, l.compute_ratio, l.compute_score, l.n_ranks, s.n_steps,
    s.steps_flagged, l.flagged, l.kind
FROM l JOIN s ON s.rank = l.rank
WHERE l.level = 'run'
ORDER BY l.rank;
