-- nccl_problems: warnings, errors and watchdog timeouts in the NCCL logs of a run.
-- requires: nccl_procs

-- nccl_problem_counts(rid): how many warnings, errors and timeouts run `rid` logged, and the
-- first of each.
--   rid       run_id.
--   returns   category      warning (NCCL WARN lines) | error (error returns: one per chain
--                           of unwind frames, plus PyTorch / nccl-tests NCCL errors) |
--                           abort (error returns that unwind a communicator's abort, kind
--                           abort_unwind: teardown at exit or after a failure elsewhere,
--                           one per chain; not errors of their own) |
--                           handled (error returns a thread went on from, kind handled_unwind:
--                           no WARN before the chain, an INFO of the thread's own after it;
--                           one per chain; not errors) |
--                           timeout (PyTorch watchdog collective timeouts, once per rank and seq
--                           however many lines quote it: the watchdog's own line and its
--                           `watchdog thread terminated` line; a crash's `what():` quoting one
--                           counts when no timeout line of that rank and seq does),
--             count,
--             first_file_id, first_line   the first one (file order),
--             first_rank    its global rank (NULL: unknown),
--             first_kind    its kind (ib_completion, unwind, timeout ...),
--             first_text    its message.
--   Always five rows; count 0 and NULLs when a category is absent.
-- Algorithm: counts over nccl_warnings and nccl_timeouts; ranks via nccl_proc_ranks (or
-- the watchdog line's own rank).
CREATE OR REPLACE TEMP MACRO nccl_problem_counts(rid) AS TABLE
WITH r AS (
    SELECT file_id, proc, rank FROM nccl_proc_ranks(rid)
),
w AS (
    SELECT CASE
            WHEN w.level = 'WARN' THEN 'warning'
            WHEN w.kind = 'abort_unwind' THEN 'abort'
            WHEN w.kind = 'handled_unwind' THEN 'handled'
            ELSE 'error'
        END AS category,
        CASE WHEN w.kind IN ('unwind', 'abort_unwind', 'handled_unwind') THEN 'chain ' || w.chain
            ELSE 'line ' || w.line_no END AS item,
        w.file_id, w.line_no, r.rank, w.kind,
        CASE WHEN w.src_file IS NOT NULL
            AND w.kind NOT IN ('unwind', 'abort_unwind', 'handled_unwind')
            THEN printf('%s:%s %s', w.src_file, coalesce(w.src_line::VARCHAR, '?'), w.message)
            ELSE w.message END AS text
    FROM nccl_warnings w
    LEFT JOIN r ON r.file_id = w.file_id AND r.proc = w.proc
    WHERE w.run_id = rid
),
t AS (
    SELECT 'timeout' AS category,
        CASE WHEN rank IS NOT NULL AND seq IS NOT NULL
            THEN printf('rank %d seq %d', rank, seq)
            ELSE 'line ' || line_no END AS item,
        file_id, line_no, rank, kind, message AS text
    FROM nccl_timeouts x
    WHERE run_id = rid AND (kind = 'timeout' OR (kind = 'crash' AND seq IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM nccl_timeouts y WHERE y.run_id = rid
            AND y.kind = 'timeout' AND y.seq = x.seq AND y.rank IS NOT DISTINCT FROM x.rank)))
),
x AS (
    SELECT * FROM w UNION ALL SELECT * FROM t
),
cats AS (
    SELECT unnest(['warning', 'error', 'timeout', 'abort', 'handled']) AS category
)
SELECT c.category,
    count(DISTINCT CASE WHEN x.item LIKE 'rank %' THEN x.item ELSE x.file_id || ' ' || x.item END)
        AS count,
    arg_min(x.file_id, (x.file_id, x.line_no)) AS first_file_id,
    arg_min(x.line_no, (x.file_id, x.line_no)) AS first_line,
    arg_min(x.rank, (x.file_id, x.line_no)) AS first_rank,
    arg_min(x.kind, (x.file_id, x.line_no)) AS first_kind,
    arg_min(x.text, (x.file_id, x.line_no)) AS first_text
FROM cats c LEFT JOIN x USING (category)
GROUP BY c.category
ORDER BY list_position(['warning', 'error', 'timeout', 'abort', 'handled'], c.category);

-- nccl_crash_rows(rid): the crash, oom and last_error rows of run `rid` (nccl_timeouts) with
-- their global rank.
--   rid       run_id.
--   returns   file_id, line_no, kind (crash | oom | last_error; oom: a process or thread that
--                       died of running out of GPU memory, a crash of its own kind), seq,
--             message,
--             rank      the row's own rank; for a launcher tag's number (rank_source
--                       launcher_tag), the rank that the same file's NCCL processes with that
--                       tag hold when they all hold one and the same (nccl_proc_ranks), else
--                       NULL: `srun --label` numbers tasks, and one task per node (torchrun
--                       under srun) makes the tag a node's number, not a rank. A tag number
--                       that PyTorch's `[rankN]:` headers under the same tag all repeat
--                       (rank_source tag_header, set by the parser) is that rank.
-- Algorithm: a left join of the rows to the tags whose processes agree on one rank.
CREATE OR REPLACE TEMP MACRO nccl_crash_rows(rid) AS TABLE
WITH tags AS (
    SELECT p.file_id, p.tag_rank, min(r.rank) AS rank
    FROM nccl_processes p JOIN nccl_proc_ranks(rid) r USING (file_id, proc)
    WHERE p.run_id = rid AND p.tag_rank IS NOT NULL
    GROUP BY ALL
    HAVING count(DISTINCT r.rank) = 1 AND count(r.rank) = count(*)
)
SELECT x.file_id, x.line_no, x.kind, x.seq, x.message,
    CASE WHEN x.rank_source = 'launcher_tag' THEN g.rank ELSE x.rank END AS rank
FROM nccl_timeouts x
LEFT JOIN tags g ON x.rank_source = 'launcher_tag' AND g.file_id = x.file_id
    AND g.tag_rank = x.rank
WHERE x.run_id = rid AND x.kind IN ('crash', 'oom', 'last_error');

-- nccl_timeout_ranks(rid): for every collective a watchdog timed out on in run `rid`, the
-- state of every rank of the job.
--   rid       run_id.
--   returns   pg, seq       process group and PyTorch SeqNum of the timed-out collective,
--             op_type       its OpType,
--             rank,
--             status        not_enqueued (last enqueued < seq: the rank never issued the
--                           collective — the likely culprit) | waiting (issued it, never
--                           completed it: a victim) | completed | crashed (no progress or
--                           timeout of its own, but it died: a `what():`, `terminate called`,
--                           a fatal Python exception under its `[rankN]:` prefix, or running
--                           out of GPU memory — a likely culprit too) | no_log (nothing known),
--             last_enqueued, last_completed   the rank's latest progress report for the pg,
--             crash         the first crash line of a crashed rank (file order: what it died
--                           of; the later ones, a timeout waiting on a thread that died, are
--                           consequences) (NULL otherwise),
--             crash_kind    that line's kind (crash | oom),
--             crash_file_id, crash_line   where it is,
--             later_crash   the rank's last crash line when it has several (NULL: one),
--             crash_before_timeout   the crash line comes before the first line of the same
--                           file that reports this timeout (NULL: no such line in its file, or
--                           not crashed).
-- Algorithm: nccl_logs.md §13 desync heuristic. Per (pg, seq) of a timeout line, each rank
-- 0 .. world-1 (only the ranks some row names when the world is too large to list, by
-- nccl_listed_world, or when the world times the timed-out collectives passes 2^22 rows) takes its latest progress line (last enqueued / completed) for that pg; a
-- rank that timed out on that seq itself issued it. Ranks compare on global rank. A timeout
-- line that names no pg (`[Rank 2] Watchdog caught ...`) takes the pg that the rank's other
-- lines about the same seq name (the `failure detected by watchdog` line that follows it).
-- A rank's crash lines (crash and oom rows) are ordered by (file, line).
CREATE OR REPLACE TEMP MACRO nccl_timeout_ranks(rid) AS TABLE
WITH named AS (
    SELECT rank, seq, min(pg) AS pg
    FROM nccl_timeouts
    WHERE run_id = rid AND kind IN ('timeout', 'progress', 'crash') AND pg IS NOT NULL
    GROUP BY rank, seq
),
t AS (
    SELECT coalesce(x.pg, n.pg) AS pg, x.seq, min(x.op_type) AS op_type,
        list(DISTINCT x.rank) AS timed_out
    FROM nccl_timeouts x
    LEFT JOIN named n ON x.pg IS NULL AND n.rank = x.rank AND n.seq = x.seq
    WHERE x.run_id = rid AND x.kind IN ('timeout', 'crash') AND x.seq IS NOT NULL
    GROUP BY ALL
),
progress AS (
    SELECT pg, rank, arg_max(last_enqueued, (file_id, line_no)) AS last_enqueued,
        arg_max(last_completed, (file_id, line_no)) AS last_completed
    FROM nccl_timeouts
    WHERE run_id = rid AND kind = 'progress' AND rank IS NOT NULL
    GROUP BY pg, rank
),
crashes AS (
    SELECT rank, arg_min(message, (file_id, line_no)) AS crash,
        arg_min(kind, (file_id, line_no)) AS crash_kind,
        arg_min(file_id, (file_id, line_no)) AS crash_file_id,
        arg_min(line_no, (file_id, line_no)) AS crash_line,
        CASE WHEN count(*) > 1 THEN arg_max(message, (file_id, line_no)) END AS later_crash
    FROM nccl_crash_rows(rid)
    WHERE kind IN ('crash', 'oom') AND rank IS NOT NULL
    GROUP BY rank
),
reported AS (  -- where each file first reports a timeout of each seq
    SELECT file_id, seq, min(line_no) AS line_no
    FROM nccl_timeouts
    WHERE run_id = rid AND kind IN ('timeout', 'crash') AND seq IS NOT NULL
    GROUP BY ALL
),
named_ranks AS (  -- the ranks some row names
    SELECT rank FROM progress
    UNION SELECT rank FROM crashes
    UNION SELECT unnest(timed_out) FROM t
    UNION SELECT rank FROM nccl_timeouts WHERE run_id = rid AND rank IS NOT NULL
        AND rank_source IS DISTINCT FROM 'launcher_tag'
),
ranks AS (
    SELECT unnest(range(CASE
        WHEN (SELECT listed_size FROM nccl_listed_world(rid))
            * greatest((SELECT count(*) FROM t), 1) <= 4194304
        THEN (SELECT listed_size FROM nccl_listed_world(rid)) ELSE 0 END))::INTEGER AS rank
    UNION SELECT rank::INTEGER FROM named_ranks WHERE rank IS NOT NULL
)
SELECT t.pg, t.seq, t.op_type, r.rank,
    CASE
        WHEN p.last_completed >= t.seq THEN 'completed'
        WHEN list_contains(t.timed_out, r.rank) OR p.last_enqueued >= t.seq THEN 'waiting'
        WHEN p.last_enqueued < t.seq THEN 'not_enqueued'
        WHEN k.rank IS NOT NULL THEN 'crashed'
        ELSE 'no_log'
    END AS status,
    p.last_enqueued, p.last_completed,
    CASE WHEN status = 'crashed' THEN k.crash END AS crash,
    CASE WHEN status = 'crashed' THEN k.crash_kind END AS crash_kind,
    CASE WHEN status = 'crashed' THEN k.crash_file_id END AS crash_file_id,
    CASE WHEN status = 'crashed' THEN k.crash_line END AS crash_line,
    CASE WHEN status = 'crashed' THEN k.later_crash END AS later_crash,
    CASE WHEN status = 'crashed' THEN k.crash_line < f.line_no END AS crash_before_timeout
FROM t CROSS JOIN ranks r
LEFT JOIN progress p ON p.rank = r.rank AND p.pg IS NOT DISTINCT FROM t.pg
LEFT JOIN crashes k ON k.rank = r.rank
LEFT JOIN reported f ON f.file_id = k.crash_file_id AND f.seq = t.seq
ORDER BY t.pg, t.seq, r.rank;

-- nccl_crashes(rid): the ranks of run `rid` that died of an error of their own, each with
-- what it died of (a `what():` quoting a watchdog timeout is the watchdog killing a rank that
-- waited: nccl_timeout_ranks tells those apart).
--   rid       run_id.
--   returns   rank          global rank (nccl_crash_rows; NULL: the crashes of no known rank,
--                           one row for all of them),
--             n_crash_lines its crash lines (crash and oom rows),
--             crash         the first (file order): what the rank died of; the later ones
--                           (a timeout waiting on the thread that ran out of memory) follow
--                           from it,
--             crash_kind    its kind (crash | oom),
--             later_crash   the last crash line when there are several (NULL: one),
--             last_error    the first NCCL last error quoted under the rank's crash (NULL:
--                           none quoted),
--             first_file_id, first_line   where the first crash line is.
--   Ordered by rank, NULL last.
-- Algorithm: crash and oom rows without a seq, and last_error rows, grouped by rank; a rank
-- with a last error but no such crash line is left out.
CREATE OR REPLACE TEMP MACRO nccl_crashes(rid) AS TABLE
SELECT rank,
    count(*) FILTER (WHERE kind <> 'last_error') AS n_crash_lines,
    arg_min(message, (file_id, line_no)) FILTER (WHERE kind <> 'last_error') AS crash,
    arg_min(kind, (file_id, line_no)) FILTER (WHERE kind <> 'last_error') AS crash_kind,
    CASE WHEN n_crash_lines > 1
        THEN arg_max(message, (file_id, line_no)) FILTER (WHERE kind <> 'last_error')
    END AS later_crash,
    arg_min(message, (file_id, line_no)) FILTER (WHERE kind = 'last_error') AS last_error,
    arg_min(file_id, (file_id, line_no)) FILTER (WHERE kind <> 'last_error') AS first_file_id,
    arg_min(line_no, (file_id, line_no)) FILTER (WHERE kind <> 'last_error') AS first_line
FROM nccl_crash_rows(rid)
WHERE kind = 'last_error' OR seq IS NULL
GROUP BY rank
HAVING n_crash_lines > 0
ORDER BY rank NULLS LAST;

-- nccl_timeout_traced(rid): whether the traces of run `rid` reach a collective that NCCL's
-- watchdog timed out on. A traced hung collective lasts until the timeout (ten minutes by
-- default), a healthy one milliseconds to seconds, so the longest traced communication
-- activity tells the two apart without comparing the logs' clock with the traces'.
--   rid       run_id.
--   returns   one row: timeout_ms        the shortest timeout a watchdog line states (NULL:
--                                        none states one),
--                      longest_comm_ns   the longest communication activity of the traces
--                                        (NULL: no traces),
--                      in_traces         longest_comm_ns is at least half of timeout_ms;
--                                        NULL when either is NULL.
-- Algorithm: one aggregate of each table.
CREATE OR REPLACE TEMP MACRO nccl_timeout_traced(rid) AS TABLE
WITH t AS (
    SELECT min(timeout_ms) AS timeout_ms FROM nccl_timeouts
    WHERE run_id = rid AND kind IN ('timeout', 'crash') AND timeout_ms > 0
),
a AS (
    SELECT max(dur) AS longest_comm_ns FROM activities WHERE run_id = rid AND kind = 'comm'
)
SELECT t.timeout_ms, a.longest_comm_ns,
    CASE WHEN t.timeout_ms IS NULL OR a.longest_comm_ns IS NULL THEN NULL
        ELSE a.longest_comm_ns >= t.timeout_ms * 500000 END AS in_traces
FROM t CROSS JOIN a;

-- nccl_interrupts(rid): every time a launcher stopped the job of run `rid` from outside.
--   rid       run_id.
--   returns   file_id, line_no, message (the launcher's line: the user's Ctrl-C through
--             mpiexec or srun, a signal mpirun forwarded, Slurm cancelling the job or step,
--             torchrun's agent receiving a death signal), in file order.
-- Algorithm: the interrupt rows of nccl_timeouts.
CREATE OR REPLACE TEMP MACRO nccl_interrupts(rid) AS TABLE
SELECT file_id, line_no, message
FROM nccl_timeouts
WHERE run_id = rid AND kind = 'interrupt'
ORDER BY file_id, line_no;
