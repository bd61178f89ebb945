"""commwall: did a distributed training run hit the communication wall, and why?

The Python API over a store (`commwall.Store`, `commwall.Run`; see `commwall.analysis.api`):

    import commwall
    with commwall.Store("runs.duckdb") as store:
        report = store.run("my_run").report()

Subpackages: `commwall.ingest` (reading files into the store), `commwall.analysis` (metrics over
the store), `commwall.dashboard` (the Streamlit app), `commwall.cli` (the `commwall` command),
`commwall.addrspace` (sizing the libraries under an address-space limit). Importing `commwall`
loads none of them; the API loads on first use.
"""

from __future__ import annotations

from importlib import metadata
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from commwall.analysis.api import Run, Store

try:
    __version__ = metadata.version("commwall")
except metadata.PackageNotFoundError:  # pragma: no cover (a checkout that was never installed)
    __version__ = "0+unknown"

__all__ = ["Run", "Store", "__version__"]


def __getattr__(name: str) -> Any:
    """`commwall.Store` and `commwall.Run`, imported when first asked for (so that importing a
    subpackage, or `commwall` itself, loads no analysis code)."""
    if name in ("Store", "Run"):
        from commwall.analysis import api  # noqa: PLC0415

        return getattr(api, name)
    raise AttributeError(f"module 'commwall' has no attribute {name!r}")
