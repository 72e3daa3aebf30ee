"""The app's navigation: its pages in order, and the kinds of element each draws on a first render.

``app.py`` registers :data:`PAGES` with ``st.navigation``; ``serve.py`` reads both tables to
start a new tab's work before the page has run (see there). Imports nothing of Streamlit.
"""

from __future__ import annotations

# (file, title, icon, url path): the order of the navigation.
PAGES: tuple[tuple[str, str, str, str], ...] = (
    ("pages/overview.py", "Overview", ":material/monitoring:", "overview"),
    ("pages/rhythm.py", "Rhythm", ":material/waves:", "rhythm"),
    ("pages/events.py", "Tail events", ":material/troubleshoot:", "events"),
    ("pages/whatif.py", "What-if", ":material/tune:", "whatif"),
    ("pages/forecast.py", "Forecast", ":material/event_upcoming:", "forecast"),
    ("pages/chargeback.py", "Chargeback", ":material/receipt_long:", "chargeback"),
    ("pages/data.py", "Data", ":material/database:", "data"),
)

# The Streamlit frontend's element modules (its lazily loaded ``static/js/<Name>.<hash>.js``)
# that each page's first render draws, by url path. A new tab imports them while it connects,
# instead of one after another as the page's elements arrive; tests/test_browser.py fails when
# a page's first render fetches an element module not listed here. Every page lists "Spinner": a
# first render whose cached work takes longer than Streamlit's spinner delay (a cold cache, a busy
# machine: the suite under load drew one on the Overview) draws one before its answer.
FIRST_RENDER_ELEMENTS: dict[str, tuple[str, ...]] = {
    "overview": ("PlotlyChart", "Metric", "Button", "Spinner"),
    "rhythm": ("PlotlyChart", "Metric", "ButtonGroup", "Slider", "Spinner"),
    "events": ("PlotlyChart", "Metric", "Html", "Slider", "Radio", "Button", "Spinner"),
    "whatif": ("PlotlyChart", "Metric", "Html", "Radio", "NumberInput", "ButtonGroup", "Slider",
               "Checkbox", "Spinner"),
    "forecast": ("PlotlyChart", "Metric", "Html", "Button", "Spinner"),
    "chargeback": ("PlotlyChart", "Metric", "Html", "Radio", "NumberInput", "Spinner"),
    "data": ("PlotlyChart", "Html", "TextInput", "FileUploader", "Radio", "Spinner"),
}
