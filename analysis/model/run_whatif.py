"""What-ifs on a stored run: the calibrated scenario of the run with the dashboard's knobs
(analysis.model.whatif.KNOBS: gradient accumulation, link bandwidth, compression, overlap, nodes)
moved, beside the run as measured and as the unchanged model predicts it."""

from __future__ import annotations

import duckdb

from commwall.analysis.model.hardware import LinkSpec
from commwall.analysis.model.section import model_section, run_scenario
from commwall.analysis.model.whatif import KNOBS, knob_value, predicted, with_knobs


def run_whatif(
    con: duckdb.DuckDBPyConnection,
    rid: int,
    knobs: dict[str, float],
    link_peak: LinkSpec | None = None,
) -> dict:
    """`{"status", "fit_status", "knobs", "measured", "model", "what_if"}` for run `rid`:
    knob values as given and as in the run (display units: link bandwidth in GB/s), the
    predicted step unchanged and with the knobs set. `model`/`what_if` are None (with the
    reason in `status`) when the run cannot be calibrated or has no compute time."""
    unknown = set(knobs) - set(KNOBS)
    if unknown:
        raise ValueError(f"unknown knob(s) {sorted(unknown)}; known: {', '.join(KNOBS)}")
    section = model_section(con, rid, link_peak)
    measured = section["measured"]
    out = {
        "status": section["status"],
        "fit_status": {f"{f['op']}/{f['n_ranks']}": f["status"] for f in _per_op(section)},
        "knobs": {},
        "measured": measured,
        "model": None,
        "what_if": None,
    }
    s = run_scenario(con, rid)
    if s is None or s.compute_s is None:
        out["status"] = "not available: " + (
            "the run has no calibrated collectives" if s is None else "no compute time measured"
        )
        return out
    idle = measured.get("idle_ms") or 0.0
    out["knobs"] = {k: {"run": knob_value(s, k), "what_if": v} for k, v in knobs.items()}
    out["model"] = predicted(s, idle)
    out["what_if"] = predicted(with_knobs(s, knobs), idle)
    return out


def _per_op(section: dict) -> list[dict]:
    return (section.get("fit") or {}).get("per_op", [])
