"""Metrics over the commwall store. Reads only the database schema; knows nothing of parsers.

Grouped by concept: `steps` (step windows, overlap, the decomposition), `collectives`
(instances across ranks, clocks, stragglers), `replay` (what-if replay of the measured run),
`model` (the predicted α-β / NCCL model and its what-ifs), `nccl` (NCCL logs), `hangs`
(Flight Recorder), `compare` (runs against each other), `report` (the report, its caches and
documents). Beside them: `api` (the one Python API), `db` (opening a store with the SQL of
`sql/` loaded), `dispatch` and `shards` (where a cached table lives), `policy` (every
threshold), `units`, `safe_text` (text from files made safe to show)."""
