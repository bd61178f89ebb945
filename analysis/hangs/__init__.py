"""Hangs: the `hang` report section from PyTorch Flight Recorder dumps (who did not arrive, and
where each rank stopped; docs/hangs.md), and whether the job stopped at all, which the other
sections take into account."""
