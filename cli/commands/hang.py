"""`commwall hang --db FILE --run NAME [--format text|json]`: who did not arrive, from the
run's PyTorch Flight Recorder dumps."""

from __future__ import annotations

import argparse

from commwall.cli.commands._section import add_section_command
from commwall.dashboard.hang_text import render_hang


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    add_section_command(
        sub,
        "hang",
        "why the job hung, from PyTorch Flight Recorder dumps",
        "For each process group: the last collective every rank entered, the first one a rank "
        "never entered, ranks that never entered it, mismatched op, dtype or size with the "
        "culprit rank(s), ranks stuck in a collective, ranks without a dump, and one sentence "
        "naming the cause — the `hang` section of `commwall report`.",
        "hang",
        render_hang,
    )
