"""The commwall Streamlit app: navigation over dashboard/views/*.py and the run picker.

Started by `commwall serve --db FILE` (which sets COMMWALL_DB); see docs/dashboard.md.
"""

from __future__ import annotations

import logging
from pathlib import Path

import streamlit as st

from commwall.dashboard import nav, session
from commwall.dashboard.database import StoreBusy

# A file of the package, served by the app itself: a `:material/…:` or emoji icon would be
# fetched from a font CDN on every page (an error offline, as on many clusters).
FAVICON = Path(__file__).with_name("favicon.svg")
st.set_page_config(page_title="commwall", page_icon=str(FAVICON), layout="wide")
pages = [st.Page(p, title=t, icon=i) for p, t, i in nav.PAGES.values()]
# expanded: every page listed (Streamlit folds a menu of more than 12 behind "View more")
page = st.navigation(pages, expanded=True)
st.sidebar.title("commwall")
session.run_picker()
try:
    page.run()
except StoreBusy as busy:  # a page reading the store while an ingest holds it: a notice only
    st.warning(str(busy))
except Exception as e:  # a page that cannot be drawn says why; the others still work
    logging.getLogger("commwall.dashboard").error("page %r failed", page.title, exc_info=e)
    st.error(f"This page is not available: {type(e).__name__}: {e}")
