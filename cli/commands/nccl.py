"""`commwall nccl --db FILE --run NAME [--format text|json]`: what the run's NCCL logs say."""

from __future__ import annotations

import argparse

from commwall.cli.commands._section import add_section_command
from commwall.dashboard.nccl_text import render_nccl


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    add_section_command(
        sub,
        "nccl",
        "findings from the run's NCCL_DEBUG logs",
        "NCCL versions per rank, the transport used within and between nodes, "
        "GPU Direct RDMA, TCP sockets where RDMA was expected, ring and tree shapes, warnings, "
        "errors and watchdog timeouts (with the ranks that never issued the collective), and "
        "collective sizes — the `nccl` section of `commwall report`.",
        "nccl",
        render_nccl,
    )
