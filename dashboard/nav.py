"""The dashboard's pages: key → (file under dashboard/views, title, icon), in menu order."""

from __future__ import annotations

PAGES: dict[str, tuple[str, str, str]] = {
    "upload": ("views/upload.py", "Upload and runs", ":material/upload_file:"),
    "overview": ("views/overview.py", "Overview", ":material/dashboard:"),
    "ranks": ("views/ranks.py", "Ranks × steps", ":material/grid_on:"),
    "timeline": ("views/timeline.py", "Timeline", ":material/view_timeline:"),
    "collectives": ("views/collectives.py", "Collectives", ":material/swap_horiz:"),
    "stragglers": ("views/stragglers.py", "Stragglers", ":material/hourglass_bottom:"),
    "model": ("views/model.py", "Model and what-if", ":material/tune:"),
    "nccl": ("views/nccl.py", "NCCL", ":material/hub:"),
    "hang": ("views/hang.py", "Hang", ":material/block:"),
    "inspector": ("views/inspector.py", "Inspector", ":material/monitoring:"),
    "checklist": ("views/checklist.py", "Checklist", ":material/checklist:"),
    "compare": ("views/compare.py", "Compare runs", ":material/compare_arrows:"),
    "export": ("views/export.py", "Export", ":material/download:"),
}


def path(key: str) -> str:
    """The page file of `key`, relative to dashboard/app.py."""
    return PAGES[key][0]
