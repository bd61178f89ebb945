"""`commwall` command line. Each subcommand lives in dashboard/commands/<name>.py and defines
`add_parser(subparsers)`; the parser's `func(args) -> int` runs it. Data goes to stdout, logs
and progress to stderr."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from dashboard import commands


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree of every subcommand module."""
    parser = argparse.ArgumentParser(
        prog="commwall",
        description="Did your distributed training run hit the communication wall, and why?",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for mod in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if not mod.name.startswith("_"):
            importlib.import_module(f"dashboard.commands.{mod.name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
