-- memory: what a run's memory copies move.
-- A step whose memory copies alone take a large part of it is *memory-bound*; that reads as
-- on-device traffic (HBM), but the copies are often host <-> device transfers over PCIe
-- (input batches, CPU offload, checkpoints), whose remedies differ: pinned memory and
-- prefetching on a side stream, or keeping the data on the GPU.

-- memory_copies(rid): the memory activities of run `rid`, by direction (one row).
--   rid       run_id.
--   returns   copies_ns       total duration of its memory activities (copies and sets),
--             host_device_ns  of which host <-> device copies (`Memcpy HtoD`, `Memcpy DtoH`,
--                             as Kineto and the Nsight reader name them),
--             host_device_share  host_device_ns / copies_ns (NULL without memory activity).
-- Algorithm: sums of durations over the activities of kind 'memory', by name.
CREATE OR REPLACE TEMP MACRO memory_copies(rid) AS TABLE
SELECT coalesce(sum(dur), 0)::BIGINT AS copies_ns,
    coalesce(sum(dur) FILTER (WHERE name LIKE '%HtoD%' OR name LIKE '%DtoH%'), 0)::BIGINT
        AS host_device_ns,
    host_device_ns / NULLIF(copies_ns, 0) AS host_device_share
FROM activities
WHERE run_id = rid AND kind = 'memory';
