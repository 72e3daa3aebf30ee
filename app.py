"""Tidelens: the app's entry point. Page setup, navigation and the background prefetch; no analysis.

Served by ``streamlit run serve.py`` (``make run``; ``streamlit run app.py`` works too, without
serve.py's faster first render). Pages are registered in ``pages/_nav.PAGES``; a page
appears only when its file exists, so pages added later show up without touching this file.
Each page starts with ``v = page_setup()`` (``pages/_sidebar.py``), which draws the sidebar
and returns the view settings the URL and the sidebar hold.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from pages._nav import PAGES

ROOT = Path(__file__).resolve().parent

# A local favicon: a Material icon as page_icon makes every browser fetch it from
# fonts.gstatic.com, which an air-gapped server cannot reach (tests/test_browser_hostile.py).
st.set_page_config(page_title="Tidelens", page_icon=str(ROOT / "static" / "favicon.png"), layout="wide")

pages = [st.Page(str(ROOT / path), title=title, icon=icon, url_path=url)
         for path, title, icon, url in PAGES if (ROOT / path).exists()]


def _home() -> None:
    """``/`` opens the Overview at its own path, with the link's settings, so that ``/overview``
    (bookmarked, typed, or copied from the address bar) is a page and not "Page not found"."""
    st.switch_page(overview, query_params=st.query_params.to_dict())


overview = pages[0]
home = st.Page(_home, title="Tidelens", url_path="home", default=True, visibility="hidden")
page = st.navigation([home, *pages], position="sidebar", expanded=True)
try:
    page.run()
finally:
    # The page has drawn (or stopped early): compute in the background what the other pages
    # and steps will ask for. The root's redirect drew nothing, so it asks for nothing.
    if page.url_path != home.url_path:
        from pages._prefetch import prefetch_after_run

        prefetch_after_run(page.url_path)
