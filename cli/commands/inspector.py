"""`commwall inspector --db FILE --run NAME [--format text|json]`: the whole run as NCCL
Inspector recorded it: stragglers over time, the fabric's bandwidth and its change points."""

from __future__ import annotations

import argparse

from commwall.cli.commands._section import add_section_command
from commwall.dashboard.inspector_text import render_inspector


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    add_section_command(
        sub,
        "inspector",
        "stragglers and fabric drift over the whole run, from NCCL Inspector logs",
        "Per communicator: the rank the others waited for and over which period, the bus "
        "bandwidth per collective and size over the run with its change points, hosts in "
        "every communicator whose bandwidth fell, and the records the plugin lost — the "
        "`inspector` section of `commwall report`.",
        "inspector",
        render_inspector,
    )
