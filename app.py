"""Tidelens: the app's entry point. Page setup, navigation and the background prefetch; no analysis.

Run with ``streamlit run app.py`` (``make run``). Pages are registered in :data:`PAGES`; a page
appears only when its file exists, so pages added later show up without touching this file.
Each page starts with ``v = page_setup()`` (``pages/_common.py``), which draws the sidebar
and returns the view settings the URL and the sidebar hold.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

ROOT = Path(__file__).resolve().parent

# (file, title, icon, url path): the order of the navigation.
PAGES: tuple[tuple[str, str, str, str], ...] = (
    ("pages/overview.py", "Overview", ":material/monitoring:", "overview"),
    ("pages/rhythm.py", "Rhythm", ":material/waves:", "rhythm"),
    ("pages/events.py", "Tail events", ":material/troubleshoot:", "events"),
    ("pages/whatif.py", "What-if", ":material/tune:", "whatif"),
    ("pages/chargeback.py", "Chargeback", ":material/receipt_long:", "chargeback"),
    ("pages/data.py", "Data", ":material/database:", "data"),
)

# A local favicon: a Material icon as page_icon makes every browser fetch it from
# fonts.gstatic.com, which an air-gapped server cannot reach (tests/test_browser_hostile.py).
st.set_page_config(page_title="Tidelens", page_icon=str(ROOT / "static" / "favicon.png"), layout="wide")

pages = [st.Page(str(ROOT / path), title=title, icon=icon, url_path=url, default=(i == 0))
         for i, (path, title, icon, url) in enumerate(PAGES) if (ROOT / path).exists()]
page = st.navigation(pages, position="sidebar", expanded=True)
try:
    page.run()
finally:
    # The page has drawn (or stopped early): compute in the background what the other pages
    # and steps will ask for.
    from pages._analyses import prefetch_after_run

    prefetch_after_run(page.url_path)
