-- clock: per clock-domain offsets from events that end at the same instant on every rank.
-- Generic: knows nothing of traces. A clock domain is a set of ranks sharing one clock (a host).
-- Callers pass the end times of end-synchronous collectives (stragglers.md §4); start times
-- carry the straggler signal and must never be passed here.

-- _clock_round(rows, dom, prev): one round of the median-of-medians offset estimate.
--   rows      table name with grp, domain, te (DOUBLE or BIGINT ns relative to the event).
--   dom       table name with grp, domain, te_dom: the median end of each (event, domain), for
--             the events that span >= 2 domains.
--   prev      table name with domain, theta: the offsets of the previous round (missing: 0).
--   returns   domain, theta (DOUBLE ns), n (events spanning this domain and another).
-- Algorithm: the consensus end of each event is the median over all its rows of te - prev
-- theta of the row's domain; theta = the median over events of (te_dom - consensus). The
-- previous theta cancels out of te_dom - theta_prev - (consensus), so it is not added back.
CREATE OR REPLACE TEMP MACRO _clock_round(rows, dom, prev) AS TABLE
WITH a AS (
    SELECT r.grp, median(r.te - coalesce(p.theta, 0)) AS te_all
    FROM query_table(rows) r LEFT JOIN query_table(prev) p ON r.domain = p.domain
    GROUP BY r.grp
)
SELECT d.domain, median(d.te_dom - a.te_all) AS theta, count(*) AS n
FROM query_table(dom) d JOIN a ON d.grp = a.grp
GROUP BY d.domain;

-- _clock_fit(rel): clock_fit over end times already made relative to their event's earliest end.
--   rel       table name with grp, domain, te BIGINT: the row's end minus the earliest end of
--             its grp (>= 0 and small, so that the DOUBLE medians stay exact).
--   returns   as clock_fit.
-- Algorithm: the median end of every (event, domain) is taken once, as median() would: from
-- the middle one or two rows of the (event, domain) sorted by end (n = non-NULL ends; rows
-- (n + 1) // 2 and n // 2 + 1), interpolated as DuckDB's median interpolates, lo x 0.5 + hi x
-- 0.5 in DOUBLE (equal to median() to the bit over the whole BIGINT range). A sort spills to
-- disk gracefully; a median aggregate over ~10^6 small groups does not, and cost 20 times more
-- at 8 x 10^6 rows under a 2 GB memory limit. theta_h = median over events of (median end of
-- h's rows - median end of all rows, each row corrected by the previous round's theta of its
-- domain); three rounds in all (the second and third absorb the bias that one domain's own
-- rows put in the overall median). The residual is the same statistic, in absolute value,
-- after the third round. Cost: linear in rows (one sort, four medians over few large groups).
CREATE OR REPLACE TEMP MACRO _clock_fit(rel) AS TABLE
WITH t AS MATERIALIZED (SELECT grp, domain, te FROM query_table(rel)),
s AS (
    SELECT grp, domain, te, row_number() OVER (w ORDER BY te) AS k, count(te) OVER w AS n
    FROM t
    WINDOW w AS (PARTITION BY grp, domain)
),
m AS (
    SELECT grp, domain, min(te)::DOUBLE AS lo, max(te)::DOUBLE AS hi
    FROM s
    WHERE k = (n + 1) // 2 OR k = n // 2 + 1
    GROUP BY grp, domain
),
d AS MATERIALIZED (
    SELECT grp, domain, lo * 0.5 + hi * 0.5 AS te_dom
    FROM (SELECT *, count(*) OVER (PARTITION BY grp) AS n_dom FROM m)
    WHERE n_dom >= 2
),
r0 AS (SELECT NULL::VARCHAR AS domain, NULL::DOUBLE AS theta WHERE false),
r1 AS MATERIALIZED (SELECT * FROM _clock_round(t, d, r0)),
r2 AS MATERIALIZED (SELECT * FROM _clock_round(t, d, r1)),
r3 AS MATERIALIZED (SELECT * FROM _clock_round(t, d, r2)),
res AS (
    SELECT d.domain, median(abs(d.te_dom - coalesce(r3.theta, 0) - a.te_all)) AS residual_ns
    FROM d
    LEFT JOIN r3 ON r3.domain = d.domain
    JOIN (
        SELECT t.grp, median(t.te - coalesce(r3.theta, 0)) AS te_all
        FROM t LEFT JOIN r3 ON t.domain = r3.domain
        GROUP BY t.grp
    ) a ON a.grp = d.grp
    GROUP BY d.domain
),
doms AS (SELECT DISTINCT domain FROM t)
SELECT doms.domain, coalesce(r3.theta, 0) AS offset_ns, coalesce(r3.n, 0) AS n_instances,
    res.residual_ns
FROM doms
LEFT JOIN r3 ON r3.domain = doms.domain
LEFT JOIN res ON res.domain = doms.domain;

-- clock_fit(tbl): the clock offset of every domain, from end times of end-synchronous events.
--   tbl       table name with grp (instance key: rows with equal grp are one event seen by
--             several ranks), domain (clock domain of the row's rank: a name or an id), te
--             BIGINT (the row's end time, ns, on its domain's clock).
--   returns   domain,
--             offset_ns     DOUBLE: the domain's clock minus the consensus clock, in ns; subtract
--                           it from the domain's times to align them. Relative to the consensus
--                           of all domains: callers re-anchor to a reference domain, then round
--                           (rounding first could put differences 1 ns off).
--             n_instances   events spanning this domain and at least one other (0: not
--                           estimable, offset_ns 0),
--             residual_ns   DOUBLE: after alignment, the median over those events of
--                           |domain median end - median end of all rows|; NULL when n_instances 0.
--   One domain alone gets offset 0 and n_instances 0.
-- Algorithm: stragglers.md §4. Times are first made relative to each event's earliest end (exact
-- BIGINT arithmetic, small DOUBLE medians), then _clock_fit.
CREATE OR REPLACE TEMP MACRO clock_fit(tbl) AS TABLE
WITH e AS (SELECT grp, min(te) AS te0 FROM query_table(tbl) GROUP BY grp),
t AS (SELECT x.grp, x.domain, x.te - e.te0 AS te FROM query_table(tbl) x JOIN e ON e.grp = x.grp)
SELECT * FROM _clock_fit(t);
