"""The commwall Streamlit app: navigation over dashboard/views/*.py and the run picker.

Started by `commwall serve --db FILE` (which sets COMMWALL_DB); see docs/dashboard.md.
"""

from __future__ import annotations

import streamlit as st

from dashboard import nav, session

st.set_page_config(page_title="commwall", page_icon=":material/lan:", layout="wide")
pages = [st.Page(p, title=t, icon=i) for p, t, i in nav.PAGES.values()]
page = st.navigation(pages)
st.sidebar.title("commwall")
session.run_picker()
page.run()
