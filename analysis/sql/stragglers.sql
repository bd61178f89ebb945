-- stragglers: which ranks arrive late at collectives, what it costs the others, and why.
-- requires: collectives, operator_compute, policy
-- Definitions (ns unless noted), over the instances of collective_ranks that are end-synchronous,
-- seen by >= 2 ranks and whose sizes agree (_sizes_agree, collectives.sql), per rank r in a
-- scope (the run, or one step):
--   late_fraction = instances where r arrived last / instances of r,
--   lateness      = median over r's instances of (arrival - the instance's median arrival),
--   excess        = lateness - median over ranks of lateness,
--   score         = robust z of lateness among the scope's ranks: 0.6745 x excess / MAD,
--   wait caused   = sum of r's caused_ns (the waits of the others charged to r),
--   cost_share    = wait caused / (ranks x window): the share of all ranks' time lost
--                   waiting for r (window = median step window, summed over steps),
--   compute       = operator compute time (operator_compute), median over steps for the run,
--   compute_score = robust z of compute among the scope's ranks.
-- Who is named (policy constants in analysis/policy.sql) follows from the wait each rank causes,
-- not from its lateness alone (a rank that is last at a few long waits matters more than one
-- that is a little late everywhere, and a z-score over a handful of ranks is unstable):
--   share         = the rank's share of the waiting of one unit (a step when the scope has
--                   >= 3 steps with waiting, else one collective instance),
--   mean_share    = mean over the scope's units of share,
--   consistency_t = one-sided t statistic of share against the fair share 1/n over the units:
--                   (mean_share - 1/n) / (sd(share) / sqrt(units)); +inf when every unit agrees.
-- A rank is FLAGGED when (1) it causes more than its fair share of the waiting consistently:
-- consistency_t >= straggler_min_t() over >= straggler_min_units() units, (2) it matters:
-- cost_share >= straggler_min_cost_share(), and (3) it is late by a measurable amount: excess >=
-- straggler_min_excess_ns() (timestamps and clock residuals are µs), or its delay (below) is
-- that much more than the median rank's. The delay counts because a rank's lateness can hide
-- in the median over its collectives: gloo runs a rank's calls on worker threads, and when the
-- others' workers sit in its first buckets waiting for it, its later buckets start on every
-- rank at once (a rank stalled 40 ms before every forward pass has a median excess of 0-10 µs
-- and a delay of 43 ms). With 2 ranks the test still
-- works (share is 1/2 by chance); with 10^4 ranks a fair share is tiny and the test is the same.
-- In one step's scope (1) may also be met by causing more than half of the step's waiting
-- (summed over its instances) at a cost of at least step_straggler_cost_share() of the ranks'
-- time in the step: a step's units are its few instances, and one instance of noise (a loss
-- all-reduce the ranks leave together) keeps t low however late the rank is in the others.
-- A flagged rank's KIND is 'compute' when it did more operator work than the median rank by at
-- least half of its delay (delay = how much later than the first rank it arrives at its latest
-- collective of a step; median over steps for the run. The "median rank" is the median over all
-- ranks, or the other rank when there are two): it
-- arrives late because it had more work. Otherwise 'other': late without extra operator work
-- (host stall, input pipeline, sleep, launch delay, or waiting in another group); 'unknown'
-- when there is no compute to compare (no steps, or no operator or kernel activity).
-- The robust z of lateness (score) and of compute (compute_score) are kept as descriptive
-- figures; they no longer decide the flag.

-- _straggler_scores(tbl): scores, flags and kinds for per-rank figures of several scopes.
--   tbl       table name with level, step (scope = (level, step)), rank, lateness_ns,
--             caused_ns, window_ns, compute_ns, delay_ns, n_units, mean_share, sd_share, and
--             any other columns (passed through).
--   returns   tbl's columns but sd_share, plus n_ranks (ranks in the scope), excess_ns, score,
--             cost_share, consistency_t, compute_excess_ns, compute_ratio, compute_score,
--             flagged, kind (see the header).
-- Algorithm: medians and MADs by window over the scope; "the median rank" is the other rank
-- when the scope has two; the rules of the header.
CREATE OR REPLACE TEMP MACRO _straggler_scores(tbl) AS TABLE
WITH m AS (
    SELECT *,
        median(lateness_ns) OVER s AS med_late,
        median(delay_ns) OVER s AS med_delay,
        median(compute_ns) OVER s AS med_comp_all,
        sum(compute_ns) OVER s AS sum_comp,
        sum(caused_ns) OVER s AS scope_caused,
        count(*) OVER s AS n_ranks
    FROM query_table(tbl)
    WINDOW s AS (PARTITION BY level, step)
),
o AS (
    SELECT *,
        CASE WHEN n_ranks = 2 THEN sum_comp - compute_ns ELSE med_comp_all END AS med_comp
    FROM m
),
d AS (
    SELECT *,
        median(abs(lateness_ns - med_late)) OVER s AS mad_late,
        median(abs(compute_ns - med_comp_all)) OVER s AS mad_comp
    FROM o
    WINDOW s AS (PARTITION BY level, step)
),
z AS (
    SELECT * EXCLUDE (med_late, mad_late, mad_comp, med_comp_all, sum_comp, sd_share,
            scope_caused),
        caused_ns / NULLIF(scope_caused, 0) AS wait_share,
        lateness_ns - med_late AS excess_ns,
        0.6745 * (lateness_ns - med_late) / NULLIF(mad_late, 0) AS score,
        caused_ns / NULLIF(n_ranks * window_ns, 0) AS cost_share,
        (mean_share - 1.0 / n_ranks) * sqrt(n_units) / greatest(sd_share, 0.001)
            AS consistency_t,
        compute_ns - med_comp AS compute_excess_ns,
        compute_ns / NULLIF(med_comp, 0) AS compute_ratio,
        0.6745 * (compute_ns - med_comp_all) / NULLIF(mad_comp, 0) AS compute_score
    FROM d
),
f AS (
    SELECT *,
        coalesce(
            (
                (n_units >= straggler_min_units()
                 AND consistency_t >= straggler_min_t()
                 AND cost_share >= straggler_min_cost_share())
                OR (level = 'step'
                    AND wait_share > 0.5
                    AND cost_share >= step_straggler_cost_share())
            )
            AND (excess_ns >= straggler_min_excess_ns()
                 OR delay_ns - med_delay >= straggler_min_excess_ns()),
            false
        ) AS flagged
    FROM z
)
SELECT * EXCLUDE (med_comp, med_delay, wait_share),
    CASE
        WHEN NOT flagged THEN NULL
        WHEN compute_ns IS NULL OR coalesce(med_comp, 0) = 0 THEN 'unknown'
        WHEN compute_excess_ns > 0
            AND compute_excess_ns >= straggler_compute_fraction() * greatest(delay_ns, 0)
            THEN 'compute'
        ELSE 'other'
    END AS kind
FROM f;

-- _straggler_units(r): each rank's share of the waiting of every unit, for both levels.
--   r         table name of usable collective_ranks rows (step, ik, rank, caused_ns).
--   returns   level, step, rank, n_units, mean_share, sd_share: over the units of the scope
--             with any waiting; units are the instances of a step (level 'step'), and the
--             steps of the run (level 'run') when >= straggler_min_units() steps have waiting,
--             else the run's instances.
-- Algorithm: caused per (unit, rank) / caused per unit; mean and sample sd per rank, summed in
-- unit order (so that the figures do not change in the last digit from one run to the next
-- with the order in which threads combine their partial sums): the shares of a rank are
-- gathered once into a list ordered by unit, and avg and stddev_samp run over that list (one
-- sort instead of one per ordered aggregate). The step level (one unit per instance, the bulk
-- of the rows) and the run level are shared out apart, each over its own units.
CREATE OR REPLACE TEMP MACRO _straggler_units(r) AS TABLE
WITH by_inst AS MATERIALIZED (
    SELECT step, ik AS unit, rank, sum(caused_ns) AS c FROM query_table(r) GROUP BY ALL
),
by_step AS MATERIALIZED (
    SELECT step, rank, sum(c) AS c FROM by_inst GROUP BY ALL
),
step_units AS (
    SELECT count(DISTINCT step) AS k FROM by_step WHERE c > 0
),
inst_total AS (
    SELECT step, unit, sum(c) AS total FROM by_inst GROUP BY ALL
),
step_level AS (
    SELECT b.step, b.rank, count(*) AS n_units,
        list(b.c / t.total ORDER BY b.unit) AS shares
    FROM by_inst b
    JOIN inst_total t ON t.unit IS NOT DISTINCT FROM b.unit AND t.step IS NOT DISTINCT FROM b.step
    WHERE t.total > 0
    GROUP BY b.step, b.rank
),
run_units AS (
    SELECT coalesce(step, -1) AS unit, rank, c FROM by_step
    WHERE (SELECT k FROM step_units) >= straggler_min_units()
    UNION ALL
    SELECT unit, rank, c FROM by_inst
    WHERE (SELECT k FROM step_units) < straggler_min_units()
),
run_level AS (
    SELECT rank, count(*) AS n_units, list(share ORDER BY unit) AS shares
    FROM (
        SELECT unit, rank, c / sum(c) OVER (PARTITION BY unit) AS share
        FROM run_units
        QUALIFY sum(c) OVER (PARTITION BY unit) > 0
    )
    GROUP BY rank
),
l AS (
    SELECT 'step' AS level, step, rank, n_units, shares FROM step_level
    UNION ALL
    SELECT 'run', NULL::BIGINT, rank, n_units, shares FROM run_level
)
SELECT level, step, rank, n_units, list_avg(shares) AS mean_share,
    coalesce(list_stddev_samp(shares), 0) AS sd_share
FROM l;

-- _straggler_levels(rid): per-rank straggler figures of run `rid`, for the whole run
-- (level 'run', step NULL) and for every step (level 'step').
--   returns   level, step, rank, host, n_instances, n_last, late_fraction, lateness_ns,
--             wait_ns (total wait the rank suffered), caused_ns (total wait it caused),
--             delay_ns (its largest arrival after the first rank in a step; median over steps
--             for the run), window_ns, compute_ns, n_units, mean_share, then the columns of
--             _straggler_scores.
-- Algorithm: aggregate the usable collective_ranks rows (only the columns used: the strings
-- stay in the cached table) per (step, rank) and per rank; a rank's delay in an instance is
-- the instance's largest wait minus its own (an aggregate per instance joined back); host per
-- rank; window per step = median step window over ranks (the span of the step's instances
-- when the step is NULL); run window = sum of step windows; compute and step windows from
-- operator_compute; shares from _straggler_units.
CREATE OR REPLACE TEMP MACRO _straggler_levels(rid) AS TABLE
WITH r AS MATERIALIZED (
    SELECT step, ik, rank, ts, te, wait_ns, lateness_ns, is_last, caused_ns
    FROM collective_ranks(rid)
    WHERE n_ranks >= 2 AND end_sync AND _sizes_agree(size_mismatch, op)
),
hosts AS (
    SELECT rank, any_value(host) AS host
    FROM collective_ranks(rid)
    WHERE n_ranks >= 2 AND end_sync AND _sizes_agree(size_mismatch, op)
    GROUP BY rank
),
inst AS (SELECT ik, max(wait_ns) AS max_wait FROM r GROUP BY ik),
comp AS MATERIALIZED (SELECT rank, step, compute_ns, window_ns FROM operator_compute(rid)),
win AS (
    SELECT step, round(median(window_ns))::BIGINT AS step_ns FROM comp GROUP BY step
),
sw AS MATERIALIZED (
    SELECT s.step, coalesce(w.step_ns, s.span_ns) AS window_ns
    FROM (SELECT step, max(te) - min(ts) AS span_ns FROM r GROUP BY step) s
    LEFT JOIN win w ON s.step = w.step
),
units AS MATERIALIZED (SELECT * FROM _straggler_units(r)),
per_step AS MATERIALIZED (
    SELECT 'step' AS level, r.step, r.rank,
        count(*) AS n_instances, count(*) FILTER (WHERE r.is_last) AS n_last,
        median(r.lateness_ns) AS lateness_ns,
        sum(r.wait_ns)::BIGINT AS wait_ns, sum(r.caused_ns)::BIGINT AS caused_ns,
        max(i.max_wait - r.wait_ns) AS delay_ns
    FROM r JOIN inst i ON i.ik IS NOT DISTINCT FROM r.ik
    GROUP BY r.step, r.rank
),
per_run AS (
    SELECT 'run' AS level, NULL::BIGINT AS step, rank,
        count(*) AS n_instances, count(*) FILTER (WHERE is_last) AS n_last,
        median(lateness_ns) AS lateness_ns,
        sum(wait_ns)::BIGINT AS wait_ns, sum(caused_ns)::BIGINT AS caused_ns
    FROM r
    GROUP BY rank
),
rows AS (
    SELECT p.level, p.step, p.rank, h.host, p.* EXCLUDE (level, step, rank), sw.window_ns,
        c.compute_ns
    FROM per_step p
    JOIN hosts h ON h.rank = p.rank
    LEFT JOIN sw ON p.step IS NOT DISTINCT FROM sw.step
    LEFT JOIN comp c ON c.rank = p.rank AND c.step = p.step
    UNION ALL
    SELECT p.level, p.step, p.rank, h.host, p.* EXCLUDE (level, step, rank), d.delay_ns,
        (SELECT sum(window_ns)::BIGINT FROM sw) AS window_ns, c.compute_ns
    FROM per_run p
    JOIN hosts h ON h.rank = p.rank
    JOIN (SELECT rank, median(delay_ns) AS delay_ns FROM per_step GROUP BY rank) d
        ON d.rank = p.rank
    LEFT JOIN (SELECT rank, median(compute_ns) AS compute_ns FROM comp GROUP BY rank) c
        ON c.rank = p.rank
),
t AS (
    SELECT x.*, x.n_last / x.n_instances AS late_fraction,
        coalesce(u.n_units, 0) AS n_units, coalesce(u.mean_share, 0) AS mean_share,
        coalesce(u.sd_share, 0) AS sd_share
    FROM rows x
    LEFT JOIN units u
        ON u.level = x.level AND u.step IS NOT DISTINCT FROM x.step AND u.rank = x.rank
)
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
--             n_ranks       ranks in the step, flagged, kind (rules in the header),
--             mean_share    the rank's mean share of the waiting over the units (instances),
--             n_units       units with waiting, consistency_t (header),
--             delay_ns      how much later than the first rank the rank arrives at its
--                           latest collective of the step (the header's delay).
-- Algorithm: the 'step' level of _straggler_levels.
CREATE OR REPLACE TEMP MACRO straggler_steps(rid) AS TABLE
SELECT step, rank, host, n_instances, n_last, late_fraction, lateness_ns, excess_ns, score,
    wait_ns, caused_ns, window_ns, cost_share, compute_ns, compute_excess_ns, compute_ratio,
    compute_score, n_ranks, flagged, kind, mean_share, n_units, consistency_t, delay_ns
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
    s.steps_flagged, l.flagged, l.kind, l.mean_share, l.n_units, l.consistency_t, l.delay_ns
FROM l JOIN s ON s.rank = l.rank
WHERE l.level = 'run'
ORDER BY l.rank;

-- step_start_delays(rid): how late each rank of run `rid` enters its profiled steps.
--   returns   rank, n_steps (its steps that at least one other rank also has),
--             start_delay_ns DOUBLE: median over those steps of how much later than the first
--                            rank it starts the step (the host annotation ProfilerStep#N, on
--                            the aligned clock: the same reference as the header's delay).
--   A run whose steps no two ranks share returns no rows.
-- Algorithm: steps.ts minus the offset of the rank's clock domain (clock_offsets; 0 for a rank
-- no collective ties to the others), relative to the step's earliest start, median per rank.
-- A rank whose start delay is most of its delay at the collectives is late before its step
-- begins (the previous step's host work, data loading, anything between the profiler's step
-- marks), not inside it; a replay that starts each rank where its step began leaves that out.
CREATE OR REPLACE TEMP MACRO step_start_delays(rid) AS TABLE
WITH off AS (
    SELECT rd.rank, o.offset_ns
    FROM _rank_domains(rid) rd JOIN clock_offsets(rid) o ON o.domain = rd.domain
),
s AS (
    SELECT st.rank, st.step, st.ts - coalesce(off.offset_ns, 0) AS ts
    FROM steps st LEFT JOIN off ON off.rank = st.rank
    WHERE st.run_id = rid
),
first AS (
    SELECT step, min(ts) AS first_ts FROM s GROUP BY step HAVING count(DISTINCT rank) >= 2
)
SELECT s.rank, count(*) AS n_steps, median(s.ts - f.first_ts)::DOUBLE AS start_delay_ns
FROM s JOIN first f ON f.step = s.step
GROUP BY s.rank
ORDER BY s.rank;
