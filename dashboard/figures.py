"""Charts drawn from a cache: each chart's Vega-Lite specification is built once per builder,
arguments and data, not on every run of a page's script.

Building an Altair chart and converting it to Vega-Lite (schema validation, the data to Arrow)
takes 50–200 ms per chart on a loaded 2-vCPU machine (docs/dashboard.md), several times what
the rest of a page costs once its data is cached; a page switch or a slider move would pay it
for every chart on the page. Here the
finished specification (its data included, as Streamlit sends it to the browser) is cached by
the builder's name and the values of its arguments (data frames by content), so a chart is
rebuilt only when what it shows changes. Builders are plain functions of a module (the
dashboard's `charts`, `doc_charts`): a lambda's identity changes on every run.

A chart whose rows change on every rerun (the what-if curves as a slider moves) would be
rebuilt every time; when its specification depends on the shape of its data only, it is drawn
`shape_only`: built once per shape, its datasets replaced by the new rows.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

#: What a chart builder returns: a top-level chart of any kind (what st.altair_chart draws).
AnyChart = (
    alt.Chart
    | alt.ConcatChart
    | alt.FacetChart
    | alt.HConcatChart
    | alt.LayerChart
    | alt.RepeatChart
    | alt.VConcatChart
)
Builder = Callable[..., AnyChart]

_to_spec: Callable[[AnyChart], dict[str, Any]] | None
_to_arrow: Callable[[Any], bytes] | None
try:  # Streamlit's own conversion (theme, data as Arrow datasets), as st.altair_chart does it
    from streamlit.dataframe_util import convert_anything_to_arrow_bytes
    from streamlit.elements.vega_charts import _convert_altair_to_vega_lite_spec

    _to_spec = _convert_altair_to_vega_lite_spec
    _to_arrow = convert_anything_to_arrow_bytes
except ImportError:  # another Streamlit: charts are drawn uncached, as before
    _to_spec = _to_arrow = None


def builder_name(build: Builder) -> str:
    """`module:function` of a module-level chart builder (what the cache is keyed by)."""
    name = f"{build.__module__}:{build.__qualname__}"
    if "<" in name:  # <lambda>, <locals>: no stable name to find it again by
        raise ValueError(f"a chart builder must be a module-level function, not {name}")
    return name


def _builder(name: str) -> Builder:
    module, _, function = name.partition(":")
    return getattr(importlib.import_module(module), function)


def _renamed(node: Any, names: dict[str, str]) -> Any:
    """`node` (a Vega-Lite spec or part of one) with every `{"name": old}` data reference
    renamed to names[old]."""
    if isinstance(node, dict):
        out = {k: _renamed(v, names) for k, v in node.items()}
        if isinstance(out.get("name"), str) and out["name"] in names:
            out["name"] = names[out["name"]]
        return out
    if isinstance(node, list):
        return [_renamed(v, names) for v in node]
    return node


#: The heights the builders set are the plot's own (26 px a timeline lane, a heatmap's rows):
#: titles, axes and legends come on top of them. Streamlit's default for a single or layered
#: chart fits the whole drawing, decorations included, into that height, which squeezed a
#: two-rank timeline with its legends below into a flat line; only the width is fitted.
FIT_WIDTH = {"type": "fit-x", "contains": "padding"}
#: Compositions keep Streamlit's own sizing (fit-x breaks nested ones).
_COMPOSED = ("vconcat", "hconcat", "concat", "facet", "repeat")


@st.cache_data(show_spinner=False, max_entries=512)
def spec(name: str, args: tuple) -> dict[str, Any]:
    """The Vega-Lite specification of builder `name` called with `args`, data included.

    Its datasets are named by position ("data-0", …), not by content: when only the data
    changes (a slider moves), the specification stays the same and the browser replaces
    the chart's data in place instead of building the chart anew."""
    assert _to_spec is not None
    out = _to_spec(_builder(name)(*args))
    if "autosize" not in out and not any(k in out for k in _COMPOSED):
        out["autosize"] = FIT_WIDTH
    datasets = out.pop("datasets", None) or {}
    names = {old: f"data-{i}" for i, old in enumerate(datasets)}
    out = _renamed(out, names)
    out["datasets"] = {names[old]: data for old, data in datasets.items()}
    return out


def _shape(arg: Any) -> Any:
    """What a shape-only builder's specification may depend on in `arg`: a data frame's
    columns, their types and whether it is empty; any other argument itself."""
    if isinstance(arg, pd.DataFrame):
        return ("frame", tuple(map(str, arg.columns)), tuple(map(str, arg.dtypes)), arg.empty)
    return arg


@st.cache_data(show_spinner=False, max_entries=128)
def _template(name: str, shape: tuple, _args: tuple) -> tuple[dict[str, Any], dict[str, int]]:
    """The specification of builder `name` for arguments of `shape` (built from `_args`, not
    part of the cache key), and for each of its datasets the position of the argument whose
    rows it holds; no datasets ({}) when they cannot be told apart (two equal frames, a frame
    the builder derived)."""
    out = spec(name, _args)
    assert _to_arrow is not None
    frames = {i: _to_arrow(a) for i, a in enumerate(_args) if isinstance(a, pd.DataFrame)}
    sources = {}
    for data_name, data in out["datasets"].items():
        found = [i for i, b in frames.items() if b == data]
        if len(found) != 1:
            return out, {}
        sources[data_name] = found[0]
    return out, sources


def shape_spec(name: str, args: tuple) -> dict[str, Any]:
    """`spec(name, args)` for a builder whose specification depends on its frames' shape only
    (`_shape`), not on their rows: built once per shape, the rows of `args` swapped in as
    Arrow datasets (a what-if slider moves the data of the same charts)."""
    out, sources = _template(name, tuple(map(_shape, args)), args)
    if not sources:
        return spec(name, args)
    assert _to_arrow is not None
    return {**out, "datasets": {n: _to_arrow(args[i]) for n, i in sources.items()}}


def chart(
    where: Any, build: Builder, *args: Any, key: str | None = None, shape_only: bool = False
) -> None:
    """`build(*args)` drawn across its column in `where` (st, a column, a container).
    `shape_only`: the builder's specification depends on its frames' columns, types and
    emptiness only (explicit encoding types, nothing computed from the rows), so that new
    rows reuse it (`shape_spec`)."""
    if _to_spec is None:
        where.altair_chart(build(*args), key=key, width="stretch")
    else:
        of = shape_spec if shape_only else spec
        where.vega_lite_chart(of(builder_name(build), args), key=key, width="stretch")
