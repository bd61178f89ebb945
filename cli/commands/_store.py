"""Opening the store from a reading command: the shared `--db` and `--wait` options, and the
wait itself while another process (an ingest, the dashboard computing a report) holds the file."""

from __future__ import annotations

import argparse
import time

from analysis.api import Store
from cli.commands._output import add_db, add_wait, note
from ingest.store import RETRY_S, lock_holder


def add_read_db(p: argparse.ArgumentParser) -> None:
    """`--db FILE` and `--wait SECONDS` of the commands that read a store."""
    add_db(p)
    add_wait(p)


def open_store(args: argparse.Namespace) -> Store:
    """The store `args.db`, waiting up to `args.wait` seconds while another process holds it
    (saying once, on stderr, who holds it); after that the lock error is raised, and the CLI
    names the holder (_output.unexpected)."""
    deadline = time.monotonic() + args.wait
    told = False
    while True:
        try:
            return Store(args.db)
        except Exception as e:
            holder = lock_holder(e)
            if holder is None or time.monotonic() >= deadline:
                raise
            if not told:
                note(f"{args.db} is in use by {holder}; waiting up to {args.wait:g} s for it")
                told = True
            time.sleep(RETRY_S)
