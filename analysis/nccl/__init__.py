"""NCCL logs: the `nccl` report section (`section`: versions, ranks, networks, transports, GPU
Direct RDMA, communicators, problems; docs/nccl_logs.md), the ranks that died of an error of
their own (`crashes`), the nccl-tests tables found in the logs (`tests_tables`), the macros'
rows as dicts (`rows`), and the bus bandwidth common links achieve (`links`)."""
