"""Opening the store from a reading command: the shared `--db` and `--wait` options, and the
wait itself while another process (an ingest, the dashboard computing a report) holds the file."""

from __future__ import annotations

import argparse

from commwall.analysis.api import Store
from commwall.cli.commands._output import add_db, add_wait, note
from commwall.ingest.store import while_held


def add_read_db(p: argparse.ArgumentParser) -> None:
    """`--db FILE` and `--wait SECONDS` of the commands that read a store."""
    add_db(p)
    add_wait(p)


def open_store(args: argparse.Namespace) -> Store:
    """The store `args.db`, waiting up to `args.wait` seconds while another process holds it
    (saying once, on stderr, who holds it); after that StoreBusyError names the holder."""
    return while_held(lambda: Store(args.db), args.db, args.wait, note)
