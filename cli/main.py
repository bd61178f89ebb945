"""`commwall` command line (`commwall`, `python -m commwall`). Each subcommand lives in
cli/commands/<name>.py and defines `add_parser(subparsers)`; the parser's `func(args) -> int`
runs it. Data goes to stdout, logs and progress to stderr."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

import commwall.addrspace as addrspace
from commwall import __version__
from commwall.cli import commands
from commwall.cli.commands._output import setup_logging, unexpected


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argparse tree of every subcommand module, or of `command`'s alone (so that a
    command imports only what it needs)."""
    names = sorted(
        m.name for m in pkgutil.iter_modules(commands.__path__) if not m.name.startswith("_")
    )
    parser = argparse.ArgumentParser(
        prog="commwall",
        description="Did your distributed training run hit the communication wall, and why?",
    )
    parser.add_argument("--version", action="version", version=f"commwall {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in [command] if command in names else names:
        importlib.import_module(f"commwall.cli.commands.{name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    addrspace.prepare()  # under `ulimit -v`: before numpy, pyarrow and DuckDB load
    args = build_parser(argv[0] if argv else None).parse_args(argv)
    setup_logging()
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return 0
    except Exception as e:  # noqa: BLE001 (the last resort: a message, never a traceback)
        return unexpected(e)


if __name__ == "__main__":
    sys.exit(main())
