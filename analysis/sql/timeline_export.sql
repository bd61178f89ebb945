-- timeline_export: a run's activities and matched collectives on the aligned clock, for the
-- merged Perfetto / Chrome-trace timeline (analysis/report/perfetto.py writes the JSON).
-- requires: collectives, timeline

-- aligned_activities(rid): every activity of run `rid` on the aligned clock.
--   rid       run_id.
--   returns   rank, ts (aligned, ns), dur (ns), kind, cat, name, tid, stream, correlation,
--             external_id.
-- Algorithm: activities minus their rank's offset (rank_clock of timeline.sql; 0 when unknown).
CREATE OR REPLACE TEMP MACRO aligned_activities(rid) AS TABLE
SELECT a.rank, a.ts - coalesce(c.offset_ns, 0) AS ts, a.dur, a.kind, a.cat, a.name, a.tid,
    a.stream, a.correlation, a.external_id
FROM activities a
LEFT JOIN (SELECT * FROM rank_clock(rid)) c ON c.rank = a.rank
WHERE a.run_id = rid
ORDER BY a.rank, ts;

-- collective_waits(rid): per matched instance and rank of run `rid`, the call split into the
-- wait for the last arrival and the transfer after it (aligned clock, ns).
--   rid       run_id.
--   returns   ik (instance key), op, pg_name, instance, rank, ts (arrival), last_ts (S: the
--             last rank's arrival), te (end), wait_ns (S - ts), last_rank, is_last, n_ranks.
--   Only instances seen by two ranks or more; te < S (clocks not causal) keeps te.
-- Algorithm: collective_ranks; S = ts + wait_ns; last_rank = the instance's is_last row.
CREATE OR REPLACE TEMP MACRO collective_waits(rid) AS TABLE
WITH r AS MATERIALIZED (SELECT * FROM collective_ranks(rid) WHERE n_ranks >= 2)
SELECT r.ik, r.op, r.pg_name, r.instance, r.rank, r.ts, r.ts + r.wait_ns AS last_ts, r.te,
    r.wait_ns, l.rank AS last_rank, r.is_last, r.n_ranks
FROM r
LEFT JOIN (SELECT ik, any_value(rank) AS rank FROM r WHERE is_last GROUP BY ik) l
    ON l.ik = r.ik
ORDER BY r.ik, r.rank;
