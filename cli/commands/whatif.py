"""`commwall whatif --db FILE --run NAME [--format text|json]`: the measured run replayed with
one thing changed at a time, ranked by the time each change would save."""

from __future__ import annotations

import argparse

from commwall.cli.commands._section import add_section_command
from commwall.cli.text_report import render_replay


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    add_section_command(
        sub,
        "whatif",
        "what-if replay of the measured run: what would the step take if …",
        "Replays the run's own timeline (gaps between collectives as measured, every matched "
        "collective a barrier that starts transferring at its last arrival) unchanged and with "
        "one change at a time: stragglers at the other ranks' pace, nobody waiting, transfer 2x "
        "faster, transfer hidden, all communication hidden, idle removed — the `replay` section "
        "of `commwall report`.",
        "replay",
        render_replay,
    )
