-- Nsight Systems only (ingest/formats/nsys/reader.py). Canonical data from nsys exports lands in the core
-- tables of schema.sql; these tables keep what only nsys knows.

-- The GPUs an nsys export describes (TARGET_INFO_GPU), one row per device id of the file.
-- `device` is the id in ranks.device of the same file; absent from time slices.
CREATE TABLE IF NOT EXISTS nsys_gpus (
    run_id                       INTEGER NOT NULL,
    file_id                      INTEGER NOT NULL,
    device                       INTEGER NOT NULL,
    name                         VARCHAR,
    uuid                         VARCHAR,
    bus_location                 VARCHAR,
    sm_count                     INTEGER,
    total_memory_bytes           BIGINT,
    memory_bandwidth_bytes_per_s BIGINT,
    clock_rate_hz                BIGINT,
    compute_capability           VARCHAR
);
