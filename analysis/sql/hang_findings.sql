-- hang_findings: which ranks broke a process group's collectives, from Flight Recorder dumps.
-- requires: hang

-- hang_compare_ops(): the ops whose members pass identical shapes (all_to_all, gather and
-- scatter legitimately differ between ranks, so their sizes are not compared).
--   returns   op   normalised op name (see ingest/collective_names.py).
-- Algorithm: a fixed list.
CREATE OR REPLACE TEMP MACRO hang_compare_ops() AS TABLE
SELECT unnest(['allreduce', 'allgather', 'reduce_scatter', 'broadcast', 'reduce', 'barrier'])
    AS op;

-- hang_mismatches(rid): every seq of every group at which the ranks that entered it disagree.
--   rid       run_id.
--   returns   pg_name, pg_desc, seq,
--             kind            'op' (profiling_name) | 'dtype' (input -> output dtypes) |
--                             'size' (input -> output shapes, ops of hang_compare_ops only),
--             op_name         the majority's op name,
--             expected        the value most ranks have, its ranks in other_ranks,
--             culprit_ranks   the ranks with another value (sorted),
--             culprit_values  their values (distinct, sorted),
--             ambiguous       true when another value has as many ranks as the majority.
-- Algorithm: per (group, seq, kind) count ranks per value; the majority is the value with most
-- ranks (ties: the value of the lowest rank). dtype and size are compared only where the op
-- agrees on every rank, so one wrong call gives one finding.
CREATE OR REPLACE TEMP MACRO hang_mismatches(rid) AS TABLE
WITH e AS (
    SELECT * FROM hang_entries(rid)
),
op_ok AS (
    SELECT pg_name, seq FROM e GROUP BY pg_name, seq
    HAVING count(DISTINCT profiling_name) = 1
),
v AS (
    SELECT pg_name, pg_desc, seq, rank, 'op' AS kind, op_name, profiling_name AS value FROM e
    UNION ALL
    SELECT e.pg_name, e.pg_desc, e.seq, e.rank, 'dtype', e.op_name,
        array_to_string(e.input_dtypes, ', ')
        || CASE WHEN e.output_dtypes IS DISTINCT FROM e.input_dtypes
            THEN ' -> ' || coalesce(array_to_string(e.output_dtypes, ', '), '?') ELSE '' END
    FROM e JOIN op_ok USING (pg_name, seq)
    UNION ALL
    SELECT e.pg_name, e.pg_desc, e.seq, e.rank, 'size', e.op_name,
        e.input_sizes::VARCHAR || ' -> ' || e.output_sizes::VARCHAR
    FROM e JOIN op_ok USING (pg_name, seq)
    WHERE e.op IN (SELECT op FROM hang_compare_ops())
),
c AS (
    SELECT pg_name, seq, kind, value, count(*) AS n, min(rank) AS first_rank,
        list(rank ORDER BY rank) AS ranks, any_value(op_name) AS op_name,
        any_value(pg_desc) AS pg_desc
    FROM v GROUP BY pg_name, seq, kind, value
),
r AS (
    SELECT *, row_number() OVER (PARTITION BY pg_name, seq, kind
            ORDER BY n DESC, first_rank) AS pos,
        count(*) OVER (PARTITION BY pg_name, seq, kind) AS n_values,
        max(n) OVER (PARTITION BY pg_name, seq, kind) AS top
    FROM c
)
SELECT m.pg_name, m.pg_desc, m.seq, m.kind, m.op_name, m.value AS expected,
    m.ranks AS other_ranks,
    list_sort(flatten(list(x.ranks))) AS culprit_ranks,
    list_sort(list(x.value)) AS culprit_values,
    bool_or(x.n = m.n) AS ambiguous
FROM r m JOIN r x ON x.pg_name = m.pg_name AND x.seq = m.seq AND x.kind = m.kind
    AND x.pos > 1
WHERE m.pos = 1 AND m.n_values > 1
GROUP BY m.pg_name, m.pg_desc, m.seq, m.kind, m.op_name, m.value, m.ranks
ORDER BY m.pg_name, m.seq, list_position(['op', 'dtype', 'size'], m.kind);

-- hang_findings(rid): the evidence of a hang per process group, earliest first.
--   rid       run_id.
--   returns   pg_name, pg_desc, seq,
--             kind           'missing' (culprits never entered seq: they stopped at the group's
--                            last_common_seq while others entered it) | 'op' | 'dtype' |
--                            'size' (see hang_mismatches) | 'stuck' (every dumped member
--                            entered seq, the culprits never completed it; others did or,
--                            when none did, other_ranks is empty) | 'late' (every dumped member
--                            entered seq, the last of them more than the entries' timeout after
--                            the first: the others' watchdogs fired while they waited for it;
--                            expected holds how much later, ms, culprit_values the timeout, ms),
--             op_name        the op at seq (majority),
--             culprit_ranks, other_ranks (sorted INTEGER[]),
--             expected, culprit_values   for mismatches (NULL otherwise),
--             ambiguous      mismatches with no majority,
--             priority       1 missing, 2 op, 3 dtype, 4 size, 5 stuck, 6 late: the order
--                            within a seq.
-- Algorithm: missing at last_common_seq + 1 when some member got further (hang_groups,
-- hang_rank_progress); mismatches from hang_mismatches; stuck at the lowest seq entered by
-- every dumped member with state tracked where one of them did not complete it; late, in a
-- group without any of those, at the lowest seq every dumped member entered whose creation
-- times spread beyond its timeout.
CREATE OR REPLACE TEMP MACRO hang_findings(rid) AS TABLE
WITH g AS (
    SELECT * FROM hang_groups(rid)
),
p AS (
    SELECT * FROM hang_rank_progress(rid)
),
e AS (
    SELECT * FROM hang_entries(rid)
),
missing AS (
    SELECT g.pg_name, g.pg_desc, g.last_common_seq + 1 AS seq, 'missing' AS kind,
        (SELECT mode(op_name) FROM e WHERE e.pg_name = g.pg_name
            AND e.seq = g.last_common_seq + 1) AS op_name,
        list_sort(list(p.rank) FILTER (WHERE coalesce(p.last_seq, 0) <= g.last_common_seq))
            AS culprit_ranks,
        list_sort(list(p.rank) FILTER (WHERE p.last_seq > g.last_common_seq)) AS other_ranks,
        NULL::VARCHAR AS expected, NULL::VARCHAR[] AS culprit_values,
        false AS ambiguous, 1 AS priority
    FROM g JOIN p USING (pg_name)
    WHERE g.max_seq > g.last_common_seq
    GROUP BY g.pg_name, g.pg_desc, g.last_common_seq
),
mism AS (
    SELECT pg_name, pg_desc, seq, kind, op_name, culprit_ranks, other_ranks, expected,
        culprit_values, ambiguous, list_position(['op', 'dtype', 'size'], kind) + 1
    FROM hang_mismatches(rid)
),
st AS (
    SELECT e.pg_name, e.seq, count(DISTINCT e.rank) AS n, mode(e.op_name) AS op_name,
        list(e.rank ORDER BY e.rank) FILTER (WHERE e.state <> 'completed') AS open_ranks,
        list(e.rank ORDER BY e.rank) FILTER (WHERE e.state = 'completed') AS done_ranks
    FROM e JOIN g ON g.pg_name = e.pg_name AND g.state_tracked
    WHERE list_contains(g.dumped, e.rank)
    GROUP BY e.pg_name, e.seq
),
stuck AS (
    SELECT st.pg_name, g.pg_desc, st.seq, 'stuck', st.op_name, st.open_ranks,
        coalesce(st.done_ranks, []), NULL, NULL, false, 5
    FROM st JOIN g USING (pg_name)
    WHERE st.n = len(g.dumped) AND st.open_ranks IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY st.pg_name ORDER BY st.seq) = 1
),
la AS (
    SELECT e.pg_name, e.seq, mode(e.op_name) AS op_name, count(DISTINCT e.rank) AS n,
        arg_max(e.rank, e.time_created_ns) AS last_rank, list(e.rank ORDER BY e.rank) AS ranks,
        max(e.time_created_ns) - min(e.time_created_ns) AS spread_ns,
        min(e.timeout_ms) AS timeout_ms
    FROM e JOIN g ON g.pg_name = e.pg_name
    WHERE list_contains(g.dumped, e.rank) AND e.time_created_ns > 0
    GROUP BY e.pg_name, e.seq
),
late AS (
    SELECT la.pg_name, g.pg_desc, la.seq, 'late', la.op_name, [la.last_rank],
        list_filter(la.ranks, lambda x: x <> la.last_rank),
        (la.spread_ns // 1000000)::VARCHAR, [la.timeout_ms::VARCHAR], false, 6
    FROM la JOIN g USING (pg_name)
    WHERE la.n = len(g.dumped) AND la.n > 1 AND la.timeout_ms > 0
        AND la.spread_ns > la.timeout_ms * 1000000
        -- the explanation of a group with no other finding (a mismatched call may come late)
        AND la.pg_name NOT IN (SELECT pg_name FROM missing UNION ALL SELECT pg_name FROM mism
                               UNION ALL SELECT pg_name FROM stuck)
    QUALIFY row_number() OVER (PARTITION BY la.pg_name ORDER BY la.seq) = 1
)
SELECT * FROM (
    SELECT * FROM missing UNION ALL SELECT * FROM mism UNION ALL SELECT * FROM stuck
    UNION ALL SELECT * FROM late
)
ORDER BY pg_name, seq, priority;
