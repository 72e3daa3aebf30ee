"""Hostile labels in a real browser: every page of a store whose labels are a Markdown image, a
Markdown link, HTML, a spreadsheet formula and an RTL override, opened in Chromium.

Asserted on every page: no request leaves for another origin (the labels point at
127.0.0.1:9 and evil.example), no ``<img>``, ``<a href>`` or ``<iframe>`` carries a label in an
attribute, no element was made from a label's HTML, the raw RTL override never reaches the
page's text; and across the pages each label is shown as its own characters.
"""

from __future__ import annotations

import subprocess
import urllib.parse
from collections.abc import Iterator

import pytest

from test_browser import (CHROMIUM, CHROMIUM_ARGS, _need_browser, as_operator, free_port, open_page,
                          registered_pages, start_app, stop_app, wait_healthy, wait_settled)
from analytics.text import visible
from test_hostile_labels import FORMULA, RTL, SERVICE, TEAM, hostile_scrapes

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]
MARKERS = ("127.0.0.1:9/", "evil.example", "px.png", "teamlink")

# Every element that could fetch or link: its attributes, as the page has them.
LINKING_JS = """() => Array.from(document.querySelectorAll('img, a[href], iframe, image, use, source, video, audio'))
  .map(e => [e.tagName, Array.from(e.attributes).map(a => a.value).join(' ')])"""


@pytest.fixture(scope="module")
def hostile_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, subprocess.Popen]]:
    _need_browser()
    from analytics.ingest import ingest_bytes
    from analytics.store import Store

    tmp = tmp_path_factory.mktemp("browser-hostile")
    db = tmp / "hostile.duckdb"
    with Store(db) as st:
        assert ingest_bytes(st, "hostile.prom", hostile_scrapes()).status == "loaded"
    port = free_port()
    proc = start_app({"TIDELENS_UPLOADS_DB": str(tmp / "uploads.duckdb"),
                      "TIDELENS_CONFIG": str(tmp / "tidelens.toml"), "TIDELENS_DATA_DIR": str(tmp)}, port)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        yield url, urllib.parse.urlencode({"source": "duckdb", "db": str(db), "slo": "100", "w_src": "store"}), proc
    finally:
        stop_app(proc)


def test_every_page_keeps_hostile_labels_as_text(hostile_app) -> None:
    from playwright.sync_api import sync_playwright

    base, query, proc = hostile_app
    outside: list[str] = []
    shown = ""
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1800})
            as_operator(page, base)

            def _note(request) -> None:
                u = request.url
                if not (u.startswith(base + "/") or u == base or u.startswith(("data:", "blob:"))):
                    outside.append(u)

            page.on("request", _note)
            for path, name in registered_pages():
                open_page(page, f"{base}/{path}?{query}")
                wait_settled(page)
                errors = page.locator('[data-testid="stException"]')
                assert errors.count() == 0, f"{name}: {errors.first.inner_text()}"
                for tag, attrs in page.evaluate(LINKING_JS):
                    assert not any(m in attrs for m in MARKERS), (name, tag, attrs)
                # A label's HTML never became an element: no <b> holding the RTL label's "x".
                assert page.locator("b", has_text="x").count() == 0, name
                # All text, hidden included: the tables' accessible copy of their canvas cells,
                # folded expanders, and the charts' SVG text.
                text = page.evaluate("() => document.body.textContent")
                text += " " + " ".join(page.evaluate("() => Array.from(document.querySelectorAll('svg text')).map(t => t.textContent)"))
                assert "\u202e" not in text, f"{name}: a raw RTL override reached the page"
                shown += f"\n--- {name}\n{text}"
        finally:
            browser.close()
    assert not outside, f"requests to other origins: {outside[:5]}"
    # The RTL pod name, in static tables (the Data page's label inventory and workload map), reads
    # as its characters with the override shown as an escape.
    for label in (SERVICE, TEAM, FORMULA, visible(RTL)):
        assert label in shown, f"{label!r} is not shown as text on any page"
    assert proc.poll() is None  # the server is still up
