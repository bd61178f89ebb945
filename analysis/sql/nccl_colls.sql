-- nccl_colls: collective sizes from NCCL_DEBUG_SUBSYS=COLL lines.
-- requires: nccl_procs, steps

-- nccl_coll_sizes(rid): per collective op, the calls the logs of run `rid` recorded.
--   rid       run_id.
--   returns   op            allreduce, allgather, reduce_scatter, broadcast, reduce, send,
--                           recv ...,
--             calls         COLL lines (one per rank per call),
--             n_ranks       distinct global ranks that logged it (unmapped processes count
--                           as one each),
--             total_bytes   sum of per-rank message bytes (count × sizeof(datatype)),
--             min_bytes, median_bytes, max_bytes   per call,
--             dtypes        datatypes seen.
-- Algorithm: aggregation of nccl_colls by op, ranks from nccl_proc_ranks.
CREATE OR REPLACE TEMP MACRO nccl_coll_sizes(rid) AS TABLE
SELECT c.op, count(*) AS calls,
    count(DISTINCT coalesce(r.rank::VARCHAR, c.file_id || ':' || c.proc)) AS n_ranks,
    sum(c.bytes)::BIGINT AS total_bytes, min(c.bytes) AS min_bytes,
    median(c.bytes) AS median_bytes, max(c.bytes) AS max_bytes,
    list(DISTINCT c.dtype ORDER BY c.dtype) FILTER (WHERE c.dtype IS NOT NULL) AS dtypes
FROM nccl_colls c
LEFT JOIN nccl_proc_ranks(rid) r ON r.file_id = c.file_id AND r.proc = c.proc
WHERE c.run_id = rid
GROUP BY c.op
ORDER BY total_bytes DESC NULLS LAST, c.op;

-- nccl_coll_steps(rid): COLL lines of run `rid` placed in the training steps of its traces.
--   rid       run_id.
--   returns   rank, step,
--             calls         COLL lines of that rank placed in the step,
--             bytes         their per-rank message bytes.
--   Only ranks whose COLL sequence could be aligned with their trace appear.
-- Algorithm: COLL lines carry no time, so they are aligned by order (nccl_logs.md §8). Per
-- rank, the trace's collectives launched inside step windows (steps.sql step_windows; p2p
-- and alltoall excluded, ordered by launch time) form a sequence T; the rank's COLL lines of
-- the same ops, in file order, form C. The alignment offset k is the first position where
-- every C[k+i] has T[i]'s op and, when both sides know it, its per-rank bytes (trace input
-- bytes; output bytes for reduce_scatter); line k+i then belongs to the step of T[i].
CREATE OR REPLACE TEMP MACRO nccl_coll_steps(rid) AS TABLE
WITH w AS (
    SELECT rank, step, cpu_ts, cpu_dur FROM step_windows(rid)
),
t AS (
    SELECT x.rank, w.step, x.op,
        CASE WHEN x.op = 'reduce_scatter' THEN x.out_bytes ELSE x.in_bytes END AS bytes,
        row_number() OVER (PARTITION BY x.rank ORDER BY coalesce(x.launch_ts, x.ts), x.ts) - 1
            AS i
    FROM collectives x
    JOIN w ON w.rank = x.rank AND coalesce(x.launch_ts, x.ts) >= w.cpu_ts
        AND coalesce(x.launch_ts, x.ts) < w.cpu_ts + w.cpu_dur
    WHERE x.run_id = rid
        AND x.op IN ('allreduce', 'allgather', 'reduce_scatter', 'broadcast', 'reduce')
),
n AS (
    SELECT rank, count(*) AS n FROM t GROUP BY rank
),
c AS (
    SELECT r.rank, c.op, c.bytes,
        row_number() OVER (PARTITION BY r.rank ORDER BY c.file_id, c.line_no) - 1 AS j
    FROM nccl_colls c
    JOIN nccl_proc_ranks(rid) r ON r.file_id = c.file_id AND r.proc = c.proc
    WHERE c.run_id = rid AND r.rank IN (SELECT rank FROM n)
        AND c.op IN ('allreduce', 'allgather', 'reduce_scatter', 'broadcast', 'reduce')
),
cand AS (
    SELECT c.rank, c.j AS k
    FROM c JOIN t ON t.rank = c.rank AND t.i = 0 AND t.op = c.op
        AND (t.bytes IS NULL OR c.bytes IS NULL OR t.bytes = c.bytes)
),
scored AS (
    SELECT cand.rank, cand.k, count(*) AS hits
    FROM cand
    JOIN t ON t.rank = cand.rank
    JOIN c ON c.rank = cand.rank AND c.j = cand.k + t.i AND c.op = t.op
        AND (t.bytes IS NULL OR c.bytes IS NULL OR t.bytes = c.bytes)
    GROUP BY cand.rank, cand.k
),
best AS (
    SELECT s.rank, min(s.k) AS k
    FROM scored s JOIN n ON n.rank = s.rank AND s.hits = n.n
    GROUP BY s.rank
)
SELECT t.rank, t.step, count(*) AS calls, sum(c.bytes)::BIGINT AS bytes
FROM best b
JOIN t ON t.rank = b.rank
JOIN c ON c.rank = b.rank AND c.j = b.k + t.i
GROUP BY t.rank, t.step
ORDER BY t.rank, t.step;

-- nccl_line_counts(rid): the lines of the NCCL logs of run `rid` (one row).
--   rid       run_id.
--   returns   files, total, nccl, recognised, unknown, damaged, torch   (see nccl_files;
--             zeros when the run has no NCCL log).
-- Algorithm: sums over nccl_files.
CREATE OR REPLACE TEMP MACRO nccl_line_counts(rid) AS TABLE
SELECT count(*) AS files, coalesce(sum(lines_total), 0)::BIGINT AS total,
    coalesce(sum(lines_nccl), 0)::BIGINT AS nccl,
    coalesce(sum(lines_recognised), 0)::BIGINT AS recognised,
    coalesce(sum(lines_unknown), 0)::BIGINT AS unknown,
    coalesce(sum(lines_damaged), 0)::BIGINT AS damaged,
    coalesce(sum(lines_torch), 0)::BIGINT AS torch
FROM nccl_files WHERE run_id = rid;

-- nccl_unknown_families(rid): the NCCL lines of run `rid` commwall did not understand,
-- grouped by family, most frequent first.
--   rid       run_id.
--   returns   family        the message's first two words with numbers as N and hex values
--                           as 0x… ('Created N', 'NET/IB : Made'), for kind unknown; the kind
--                           itself for the others,
--             kind          unknown (an NCCL line of no known family) | damaged (an NCCL
--                           level token without a prefix) | torch (a PyTorch NCCL line of no
--                           known kind) | too_long (over 65,536 characters, not read) |
--                           out_of_range (a number of 21+ digits, not read),
--             count         lines,
--             example       the first such line (cut at 300 characters),
--             first_file_id, first_line   where it is.
-- Algorithm: nccl_unknown grouped by family.
CREATE OR REPLACE TEMP MACRO nccl_unknown_families(rid) AS TABLE
WITH u AS (
    SELECT file_id, line_no, kind, text,
        CASE WHEN kind = 'unknown' THEN regexp_replace(regexp_replace(array_to_string(
            string_split(trim(regexp_extract(text, 'NCCL (?:INFO|TRACE) (.*)$', 1)), ' ')[1:2],
            ' '), '0x[0-9a-fA-F]+', '0x…', 'g'), '[0-9]+', 'N', 'g')
        ELSE kind END AS family
    FROM nccl_unknown WHERE run_id = rid
)
SELECT family, kind, count(*) AS count,
    left(arg_min(text, (file_id, line_no)), 300) AS example,
    min(file_id) AS first_file_id, arg_min(line_no, (file_id, line_no)) AS first_line
FROM u
GROUP BY family, kind
ORDER BY count DESC, family;
