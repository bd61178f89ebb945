"""What every parser returns: the file's format, facts about it, and its tables."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa


@dataclass
class Parsed:
    """The result of parsing one file. `tables` maps store table names to Arrow tables whose
    columns match that table minus `run_id` and `file_id`; `detail` is JSON-able facts."""

    format: str
    tables: dict[str, pa.Table]
    detail: dict = field(default_factory=dict)

    @property
    def n_rows(self) -> int:
        """Rows over all tables."""
        return sum(t.num_rows for t in self.tables.values())

    def ranks(self) -> list[int]:
        """Ranks this file describes."""
        t = self.tables.get("ranks")
        return [] if t is None else sorted(set(t.column("rank").to_pylist()))
