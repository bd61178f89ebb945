"""NCCL logs: the `nccl` report section (versions, ranks, networks, transports, GPU Direct RDMA,
communicators, problems, nccl-tests tables; docs/nccl_logs.md) and the bus bandwidth common
links achieve."""
