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
