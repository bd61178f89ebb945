"""Upload and runs: drop a run's files, watch them land one by one, manage stored runs."""

from __future__ import annotations

import shlex

import pandas as pd
import streamlit as st

from commwall.dashboard import data, database, nav, session, uploads
from commwall.dashboard.database import StoreBusy
from commwall.dashboard.ui import md

#: A stored run starts a new generation of the form's widgets (new keys: empty widgets; a
#: file uploader cannot be emptied any other way).
GEN_KEY = "upload_form_generation"
#: (run, number of files, per-file rows) of the run just stored, shown once.
DONE_KEY = "upload_done"

st.header("Upload and runs")
db = data.current()
done = st.session_state.pop(DONE_KEY, None)
if done:
    stored, n_files, stored_rows = done
    st.dataframe(pd.DataFrame(stored_rows), hide_index=True)
    st.success(f"Stored run {md(stored)} ({n_files} files).")
    st.page_link(nav.path("overview"), label="Open its overview", icon=":material/dashboard:")

with st.form("upload", clear_on_submit=False):
    st.markdown(
        "Drop all files of one run at once: a Kineto trace per rank (`.json`, `.json.gz`), "
        "Nsight Systems SQLite exports, NCCL_DEBUG logs (nccl-tests output too), PyTorch "
        "Flight Recorder dumps of a job that hung (one per rank, JSON or pickle). Formats are "
        "recognised by content."
    )
    gen = st.session_state.get(GEN_KEY, 0)
    name = st.text_input("Run name", key=f"upload_name_{gen}", placeholder="e.g. llama-8n-fix")
    notes = st.text_area("Notes", key=f"upload_notes_{gen}", placeholder="what changed in this run")
    files = st.file_uploader("Files", accept_multiple_files=True, key=f"upload_files_{gen}")
    submitted = st.form_submit_button("Store run", type="primary")

if submitted:
    chosen = files or []
    table = st.empty()
    bar = st.progress(0.0, text="Reading files…")
    rows = [
        {"file": f.name, "status": "pending", "format": "", "ranks": "", "problem": ""}
        for f in chosen
    ]

    def on_file(i: int, out: uploads.FileOutcome) -> None:
        status = uploads.shown_status(out.status)
        rows[i].update(status=status, format=out.format or "", problem=out.error or "")
        rows[i]["ranks"] = ", ".join(map(str, out.ranks))
        bar.progress((i + 1) / len(rows), text=f"Read {i + 1} of {len(rows)} files")
        table.dataframe(pd.DataFrame(rows), hide_index=True)

    try:
        outcome = uploads.upload_run(
            db,
            name,
            [(f.name, f.getvalue()) for f in chosen],
            database.upload_root(),
            notes=notes or None,
            on_file=on_file,
        )
    except StoreBusy as e:
        outcome = uploads.UploadOutcome(name, False, [], str(e))
    bar.empty()
    if outcome.stored:
        for row, out in zip(rows, outcome.files, strict=True):
            row["status"] = uploads.shown_status(out.status)
        # Run again from the top so that the sidebar picks the new run and the form is empty;
        # the outcome is shown by the next run.
        st.session_state[DONE_KEY] = (outcome.run, len(outcome.files), rows)
        st.session_state[session.NEXT_RUN_KEY] = outcome.run
        st.session_state[GEN_KEY] = st.session_state.get(GEN_KEY, 0) + 1
        st.rerun()
    else:
        if rows:
            table.dataframe(pd.DataFrame(rows), hide_index=True)
        st.error(f"Nothing was stored. {md(outcome.error or '')}")
        for out in outcome.files:
            if out.error:
                st.error(f"{md(out.name)}: {md(out.error)}")

with st.expander("Files too large to upload? Ingest them from a shell instead"):
    st.markdown(
        "The browser upload holds files in the server's memory. For big traces, run this on the "
        "machine that serves the dashboard (it writes to the same store; reload the page after):"
    )
    cmd = f"commwall ingest PATH... --db {shlex.quote(str(db.path))} --run NAME --notes '...'"
    st.code(cmd, language="bash")

st.subheader("Stored runs")
try:
    runs = data.run_list()
except StoreBusy as e:
    st.warning(str(e))
    st.stop()
if runs.empty:
    st.caption("No runs yet.")
    st.stop()
st.dataframe(runs, hide_index=True, key="runs_table")

left, right = st.columns(2)
with left, st.form("rename"):
    st.markdown("**Rename a run**")
    old = st.selectbox("Run", runs["run"].tolist(), key="rename_from")
    new = st.text_input("New name", key="rename_to")
    if st.form_submit_button("Rename"):
        problem = uploads.rename_run(db, old, new)
        if problem:
            st.error(md(problem))
        else:
            st.session_state[session.NEXT_RUN_KEY] = new.strip()
            st.rerun()
with right, st.form("delete"):
    st.markdown("**Delete a run**")
    victim = st.selectbox("Run", runs["run"].tolist(), key="delete_run")
    sure = st.checkbox("Yes, delete it and its uploaded files", key="delete_sure")
    if st.form_submit_button("Delete"):
        if not sure:
            st.warning("Tick the box to confirm.")
        elif uploads.delete_run(db, victim, database.upload_root()):
            st.rerun()
