-- nccl_tests: the nccl-tests result tables found in a run's logs, one row per table.

-- nccl_test_tables(rid): every nccl-tests table of run `rid` (all_reduce_perf and its siblings),
-- with what its rows say about the fabric.
--   rid       run_id.
--   returns   file_id, table_no, line_no (its first row),
--             test         the test's name as printed without `_perf` (NULL: not in the log),
--             op           the collective: the test's name normalised (allreduce, allgather,
--                          reduce_scatter, alltoall, broadcast, reduce, sendrecv, ...); for a
--                          table without a name (old nccl-tests print none), from its columns
--                          and the ratio of its bus to its algorithm bandwidth (median over its
--                          rows with an algorithm bandwidth of at least 0.1 GB/s; n ≥ 3 ranks,
--                          within 0.02): 2(n−1)/n with a reduction → allreduce; (n−1)/n with
--                          a reduction → reduce_scatter; 1 with a root → reduce (with a
--                          reduction) or broadcast; else the file's name when it names one
--                          op (all_reduce, all_gather, reduce_scatter, alltoall, broadcast,
--                          reduce, sendrecv: an all-gather and an all-to-all have the same
--                          columns and ratio); NULL when nothing tells,
--             op_basis     'name' | 'bandwidth ratio' | 'file name' | NULL,
--             bw_ratio     median bus ÷ algorithm bandwidth over those rows (NULL: none),
--             n_ranks, gpu, dtype, redop,
--             sizes        rows with a figure; min_bytes (above 0: nccl-tests starts some
--                          tables at 0 bytes, calls that move nothing), max_bytes their sizes,
--             peak_busbw_gbs   the highest bus bandwidth (GB/s, out-of-place or in-place),
--             peak_bytes       the smallest message size reaching it,
--             largest_busbw_gbs  the bus bandwidth at the largest size (the better of the two),
--             smallest_time_us   the time at min_bytes (the better of the two, µs):
--                          what one call costs when the bandwidth does not matter,
--             avg_busbw    the table's own `Avg bus bandwidth`,
--             wrong_values the table's `Out of bounds values` (NULL: not printed),
--             wrong_rows   rows whose #wrong count is above 0 (tables that count them).
-- Algorithm: nccl_test_results grouped by (file_id, table_no); a row's bus bandwidth is the
-- larger of its out-of-place and in-place figures.
CREATE OR REPLACE TEMP MACRO nccl_test_tables(rid) AS TABLE
WITH r AS (
    SELECT *, greatest(oop_busbw_gbs, ip_busbw_gbs) AS busbw,
        CASE WHEN oop_algbw_gbs >= 0.1 THEN oop_busbw_gbs / oop_algbw_gbs END AS ratio
    FROM nccl_test_results WHERE run_id = rid
),
t AS (
    SELECT file_id, table_no, min(line_no) AS line_no, any_value(test) AS test,
        max(n_ranks) AS n_ranks, any_value(gpu) AS gpu, any_value(dtype) AS dtype,
        any_value(redop) AS redop, count(busbw) AS sizes,
        min(size_bytes) FILTER (WHERE busbw IS NOT NULL AND size_bytes > 0) AS min_bytes,
        max(size_bytes) FILTER (WHERE busbw IS NOT NULL) AS max_bytes,
        max(busbw) AS peak_busbw_gbs,
        arg_min(size_bytes, (-busbw, size_bytes)) FILTER (WHERE busbw IS NOT NULL) AS peak_bytes,
        arg_max(busbw, size_bytes) FILTER (WHERE busbw IS NOT NULL) AS largest_busbw_gbs,
        arg_min(least(oop_time_us, ip_time_us), size_bytes)
            FILTER (WHERE busbw IS NOT NULL AND size_bytes > 0) AS smallest_time_us,
        max(avg_busbw) AS avg_busbw, max(wrong_values) AS wrong_values,
        count(*) FILTER (WHERE check_kind = 'wrong'
                         AND (oop_wrong > 0 OR ip_wrong > 0)) AS wrong_rows,
        median(ratio) AS bw_ratio, bool_or(root IS NOT NULL) AS has_root
    FROM r GROUP BY file_id, table_no
),
named AS (
    SELECT t.*,
        CASE
            WHEN n_ranks < 3 OR bw_ratio IS NULL THEN NULL
            WHEN redop IS NOT NULL AND redop <> 'none'
                AND abs(bw_ratio - 2.0 * (n_ranks - 1) / n_ranks) <= 0.02 THEN 'allreduce'
            WHEN redop IS NOT NULL AND redop <> 'none' AND NOT has_root
                AND abs(bw_ratio - (n_ranks - 1.0) / n_ranks) <= 0.02 THEN 'reduce_scatter'
            WHEN has_root AND abs(bw_ratio - 1.0) <= 0.02
                THEN CASE WHEN redop IS NOT NULL AND redop <> 'none' THEN 'reduce'
                          ELSE 'broadcast' END
        END AS by_ratio,
        CASE
            WHEN regexp_matches(name, 'all_?reduce') THEN 'allreduce'
            WHEN regexp_matches(name, 'all_?gather') THEN 'allgather'
            WHEN regexp_matches(name, 'reduce_?scatter') THEN 'reduce_scatter'
            WHEN regexp_matches(name, 'all_?to_?all') THEN 'alltoall'
            WHEN regexp_matches(name, 'broadcast|bcast') THEN 'broadcast'
            WHEN regexp_matches(name, 'send_?recv') THEN 'sendrecv'
            WHEN regexp_matches(name, 'reduce') THEN 'reduce'
        END AS by_name
    FROM t
    LEFT JOIN (SELECT file_id, lower(regexp_extract(path, '[^/]*$')) AS name FROM files) f
        USING (file_id)
)
SELECT file_id, table_no, line_no, test,
    CASE
        WHEN test IS NOT NULL THEN CASE test WHEN 'all_reduce' THEN 'allreduce'
            WHEN 'all_gather' THEN 'allgather' ELSE test END
        ELSE coalesce(by_ratio, by_name)
    END AS op,
    CASE
        WHEN test IS NOT NULL THEN 'name'
        WHEN by_ratio IS NOT NULL THEN 'bandwidth ratio'
        WHEN by_name IS NOT NULL THEN 'file name'
    END AS op_basis,
    bw_ratio, n_ranks, gpu, dtype, redop, sizes, min_bytes, max_bytes, peak_busbw_gbs,
    peak_bytes, largest_busbw_gbs, smallest_time_us, avg_busbw, wrong_values, wrong_rows
FROM named
ORDER BY file_id, table_no;

-- nccl_test_points(rid): the figures of every nccl-tests table of run `rid` that a model
-- calibrates on, one row per (table, row with a positive size and a time).
--   rid       run_id.
--   returns   file_id, table_no, line_no, size_bytes,
--             time_us      the out-of-place time (µs; the in-place one where the out-of-place
--                          is missing): the figure nccl-tests' bandwidths are computed from,
--             algbw_gbs, busbw_gbs  the same run's bandwidths (GB/s),
--             ip_time_us, ip_busbw_gbs  the in-place figures.
-- Algorithm: nccl_test_results of the run, rows of size 0 (calls that move nothing) and rows
-- without a time left out.
CREATE OR REPLACE TEMP MACRO nccl_test_points(rid) AS TABLE
SELECT file_id, table_no, line_no, size_bytes,
    coalesce(oop_time_us, ip_time_us) AS time_us,
    CASE WHEN oop_time_us IS NOT NULL THEN oop_algbw_gbs ELSE ip_algbw_gbs END AS algbw_gbs,
    CASE WHEN oop_time_us IS NOT NULL THEN oop_busbw_gbs ELSE ip_busbw_gbs END AS busbw_gbs,
    ip_time_us, ip_busbw_gbs
FROM nccl_test_results
WHERE run_id = rid AND size_bytes > 0 AND coalesce(oop_time_us, ip_time_us) > 0
ORDER BY file_id, table_no, size_bytes, line_no;

-- nccl_test_fabrics(rid): each nccl-tests table of run `rid` (nccl_test_tables) with the
-- fabric it ran on as far as the store tells.
--   rid       run_id.
--   returns   file_id, table_no, line_no, op, op_basis, gpu, sizes, path (the file's),
--             n_ranks      the ranks of its device lines; without them, from its bus ÷
--                          algorithm bandwidth ratio r where the op fixes the factor:
--                          all-reduce 2(n−1)/n → n = 2/(2−r), reduce-scatter, all-gather,
--                          all-to-all (n−1)/n → n = 1/(1−r) (r rounded to the nearest rank
--                          count; NULL when r is missing or ≥ the factor's limit),
--             ranks_basis  'device lines' | 'bandwidth ratio' | NULL,
--             n_nodes      the nodes NCCL's communicator lines in the same file report
--                          (`nNodes`; NULL when the file has none).
-- Algorithm: nccl_test_tables joined to the file's path and to the largest nNodes of the
-- file's communicators.
CREATE OR REPLACE TEMP MACRO nccl_test_fabrics(rid) AS TABLE
WITH t AS (SELECT * FROM nccl_test_tables(rid)),
nodes AS (
    SELECT file_id, max(n_nodes) AS n_nodes FROM nccl_communicators
    WHERE run_id = rid AND n_nodes > 0 GROUP BY file_id
)
SELECT t.file_id, t.table_no, t.line_no, t.op, t.op_basis, t.gpu, t.sizes, f.path,
    coalesce(t.n_ranks, CASE
        WHEN t.op = 'allreduce' AND t.bw_ratio BETWEEN 1.0 AND 1.995
            THEN round(2.0 / (2.0 - t.bw_ratio))::INTEGER
        WHEN t.op IN ('reduce_scatter', 'allgather', 'alltoall') AND t.bw_ratio BETWEEN 0.5 AND 0.995
            THEN round(1.0 / (1.0 - t.bw_ratio))::INTEGER
    END) AS n_ranks,
    CASE WHEN t.n_ranks IS NOT NULL THEN 'device lines'
         WHEN t.op IN ('allreduce', 'reduce_scatter', 'allgather', 'alltoall')
              AND t.bw_ratio BETWEEN 0.5 AND 1.995 THEN 'bandwidth ratio' END AS ranks_basis,
    nodes.n_nodes
FROM t
LEFT JOIN files f USING (file_id)
LEFT JOIN nodes USING (file_id)
ORDER BY t.file_id, t.table_no;
