"""Dashboard pages: scripts run by st.navigation in dashboard/app.py, never imported.

Not named `pages/`: Streamlit treats a `pages/` folder beside the entry script as a legacy
multi-page app until the entry script has run once, so a fresh server opened on a deep link
(`/overview`) would run the page alone, without the navigation or the run picker.
"""
