-- Runs captured with `commwall capture` (ingest/capture_manifest.py, guide docs/capture.md).
-- Filled from the run directory's manifest.json and the checks made when it is ingested, not
-- from a parsed file: no file_id. One row per run, replaced when the directory is ingested
-- again.
-- command      the job's command line as run (JSON list of strings).
-- hosts        the host(s) `commwall capture` ran on.
-- start_ns     when the job started; end_ns: when it ended (NULL: the capture did not finish).
-- exit_status  the job's exit status (128 + N: ended by signal N).
-- findings     what is missing or inconsistent ('traces from 6 of 8 ranks', 'ranks profiled
--              different steps (...)', 'no NCCL log for host h3', 'Flight Recorder was off');
--              empty when nothing is.
-- summary      one line: 'complete: ...' or 'incomplete: ' and the findings joined by '; '.
-- manifest     the manifest as read (JSON).
CREATE TABLE IF NOT EXISTS capture_runs (
    run_id      INTEGER NOT NULL,
    command     VARCHAR,
    hosts       VARCHAR[],
    start_ns    BIGINT,
    end_ns      BIGINT,
    exit_status INTEGER,
    findings    VARCHAR[],
    summary     VARCHAR,
    manifest    VARCHAR
);
