-- Parquet shards: rows of a run kept outside the database file (distributed ingest,
-- docs/scale_out.md). Each shard holds rows of one table with all the columns of that table
-- (run_id and file_id included): of one file and rank, or, merged, of several (`file_id` and
-- `rank` NULL). Analysis reads them in place under the table's own name (analysis/shards.py).
-- A run's manifest rows commit in the same transaction as its runs/files rows, so a shard that
-- is not listed here is not part of any run.
CREATE TABLE IF NOT EXISTS shards (
    run_id     INTEGER NOT NULL,
    file_id    INTEGER,
    table_name VARCHAR NOT NULL,
    rank       INTEGER,
    path       VARCHAR NOT NULL,
    n_rows     BIGINT,
    size_bytes BIGINT
);
