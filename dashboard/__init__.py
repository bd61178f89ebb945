"""User-facing front ends: the `commwall` CLI and the Streamlit app. No metric logic here."""
