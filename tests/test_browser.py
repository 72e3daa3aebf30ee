"""The real thing: ``streamlit run app.py`` on a free port, every page opened in Debian's
Chromium through Playwright, no exception on any page, and a screenshot of each saved to
``docs/screenshots/`` (the README shows the Overview one).

Without ``/usr/bin/chromium`` the test is skipped locally and fails in CI (``CI=true``).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from pages._nav import FIRST_RENDER_ELEMENTS

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCREENSHOTS = ROOT / "tests" / "artifacts" / "screenshots"  # kept out of git; the README shows bench/app.py's shots of the sample
# The token the test servers print (serve.py): a tab that opened it is the local operator, as the
# person who ran ``make run`` is (tests/test_access_operator.py shows the rule).
OPERATOR_TOKEN = "browser-tests-local-operator-token-0123456789"
# Script state the frontend puts on the app root: "notRunning" once a run has finished.
APP_IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
# "Idle" alone is not "done": the root reads notRunning before the first run starts, and the
# frontend keeps skeleton placeholders until every element of the run has arrived.
SETTLED_JS = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  return app && app.dataset.testScriptState === 'notRunning'
    && app.dataset.testConnectionState === 'CONNECTED'
    && document.querySelectorAll('[data-testid="stSkeleton"]').length === 0
    && document.querySelector('[data-testid="stMainBlockContainer"] h1') !== null;
}"""


# Resolves after the browser has laid out and painted twice: a resize's layout (and the charts'
# resize observers) have run by then.
NEXT_FRAMES_JS = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"


def wait_settled(page, timeout_ms: int = 60_000) -> None:
    """Wait until the script run has finished and every element is drawn (no skeletons left)."""
    page.wait_for_function(SETTLED_JS, timeout=timeout_ms, polling=100)

def first_render_s(page, url: str, *, chart: bool, timeout_ms: int = 300_000) -> float:
    """Seconds from sending ``page`` to ``url`` to its settled first render (its title drawn and,
    with ``chart``, a Plotly chart): what ``bench/app.py`` and ``bench/elements.py`` time."""
    import time

    t0 = time.perf_counter()
    page.goto(url, wait_until="commit")
    page.wait_for_selector('[data-testid="stMainBlockContainer"] h1', timeout=timeout_ms)
    if chart:
        page.wait_for_selector(".js-plotly-plot", timeout=timeout_ms)
    wait_settled(page, timeout_ms)
    return time.perf_counter() - t0

# Text of a KPI (label or value) wider than the box that shows it, i.e. drawn with an ellipsis.
CUT_OFF_JS = """() => Array.from(document.querySelectorAll(
    '[data-testid="stMetricLabel"], [data-testid="stMetricLabel"] *, [data-testid="stMetricValue"], '
    + '[data-testid="stMetricValue"] *'))
  .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent.trim()).filter(t => t)"""

# A button's label drawn with an ellipsis ("Capacity r...", "Postmortem rep..." in a narrow column).
# (The label's box clips it, with an ellipsis: its text is in a child, so every element is measured.)
CUT_BUTTONS_JS = """() => Array.from(new Set(Array.from(document.querySelectorAll(
    '[data-testid="stMainBlockContainer"] button, [data-testid="stSidebar"] button'))
  .filter(b => b.offsetParent !== null)
  .flatMap(b => Array.from(b.querySelectorAll('*')).filter(e => e.textContent.trim() && e.clientWidth > 0
    && e.scrollWidth > e.clientWidth + 1).map(e => e.textContent.trim()))))"""

# Where a page's answer is drawn (its ``headline`` container: the sentence and its number), and
# where its first chart starts, against the viewport's height, as the page first opens.
HEADLINE_JS = """() => {
  const h = document.querySelector('.st-key-headline'), c = document.querySelector('.js-plotly-plot');
  const r = h && h.getBoundingClientRect();
  return {text: h ? h.innerText.trim() : '', top: r ? r.top : null, bottom: r ? r.bottom : null,
          chart_top: c ? c.getBoundingClientRect().top : null, vh: window.innerHeight};
}"""


# Remembers whether a status whose label starts with the given words was ever drawn (it goes
# once its work is done, however quick).
SAW_STATUS_JS = """words => { window.__sawStatus = false;
  new MutationObserver((_m, obs) => {
    for (const e of document.querySelectorAll('[data-testid="stExpander"] summary'))
      if (e.textContent.includes(words)) { window.__sawStatus = true; obs.disconnect(); return; }
  }).observe(document.body, {childList: true, subtree: true, characterData: true}); }"""


def answer_off_screen(page, *, chart: bool = False) -> str:
    """Why the page's answer is not on its first screen ('' when it is): its headline empty, or
    not wholly inside the viewport; with ``chart``, its first chart starting below the fold."""
    box = page.evaluate(HEADLINE_JS)
    if not box["text"]:
        return "no headline"
    if box["top"] < 0 or box["bottom"] > box["vh"]:
        return f"headline at {box['top']:.0f}-{box['bottom']:.0f} px of {box['vh']} px: {box['text'][:80]!r}"
    if chart and (box["chart_top"] is None or box["chart_top"] > box["vh"] - 200):
        return f"first chart starts at {box['chart_top']} px of {box['vh']} px"
    return ""


# Tables (and choices) a projector would cut. ``st.dataframe`` draws on a canvas, so its cells have no box to
# measure; but its scroller is a real element (columns wider than the table's box scroll out of
# sight), and the grid's own props (read from its canvas's React fiber, glide-data-grid's
# DataGrid) hold each column's drawn width, its theme's font and padding, and ``getCellContent``,
# which gives the very text a cell draws: a header or a cell wider than its column ends in an
# ellipsis (a column of mostly empty cells is sized by its typical cell, not its longest). Cells
# of HTML tables are measured directly. Hidden tables (a closed panel) count only once shown; at
# most 300 rows of a grid are read. A static table (``st.table``, what pages draw) wraps its
# cells' text, so it is cut when its columns together are wider than its box (it scrolls) or a
# word is wider than its cell.
TABLE_CUT_OFF_JS = """() => {
  const out = [];
  const shown = e => e.offsetParent !== null && e.getBoundingClientRect().width > 0;
  const ctx = document.createElement('canvas').getContext('2d');
  const gridProps = canvas => {
    const key = Object.keys(canvas).find(k => k.startsWith('__reactFiber'));
    for (let f = key && canvas[key], depth = 0; f && depth < 20; f = f.return, depth++) {
      const p = f.memoizedProps;
      if (p && Array.isArray(p.columns) && typeof p.getCellContent === 'function' && p.theme) return p;
    }
    return null;
  };
  document.querySelectorAll('[data-testid="stDataFrame"]').forEach(df => {
    if (!shown(df)) return;
    const name = Array.from(df.querySelectorAll('table th')).slice(0, 3).map(t => t.textContent.trim()).join(', ');
    const sc = df.querySelector('.dvn-scroller');
    if (sc && sc.scrollWidth > sc.clientWidth + 1)
      out.push(`table (${name}, ...): ${sc.scrollWidth} px of columns in a ${sc.clientWidth} px box`);
    const p = df.querySelector('canvas') && gridProps(df.querySelector('canvas'));
    if (!p) { out.push(`table (${name}, ...): its grid's columns could not be read (Streamlit changed?)`); return; }
    const pad = 2 * (p.theme.cellHorizontalPadding || 8);
    p.columns.forEach((col, c) => {
      const width = col.width;  // as drawn: a stretched table's growth is already in it
      ctx.font = `${p.theme.headerFontStyle || p.theme.baseFontStyle} ${p.theme.fontFamily}`;
      if (col.title && ctx.measureText(col.title).width + pad > width + 1)
        out.push(`table (${name}, ...): header "${col.title}" is wider than its ${Math.round(width)} px column`);
      ctx.font = `${p.theme.baseFontStyle} ${p.theme.fontFamily}`;
      for (let r = 0; r < Math.min(p.rows, 300); r++) {
        const cell = p.getCellContent([c, r]);
        const text = cell && typeof cell.displayData === 'string' ? cell.displayData : '';
        if (text && ctx.measureText(text).width + pad > width + 1)
          out.push(`table (${name}, ...): cell "${text.slice(0, 60)}" is wider than its ${Math.round(width)} px column`);
      }
    });
  });
  document.querySelectorAll('[data-testid="stTable"]').forEach(t => {
    if (!shown(t)) return;
    const name = Array.from(t.querySelectorAll('th')).slice(0, 3).map(h => h.textContent.trim()).join(', ');
    const sc = t.firstElementChild;  // the box that scrolls when the columns do not fit
    if (sc && sc.scrollWidth > sc.clientWidth + 1)
      out.push(`table (${name}, ...): ${sc.scrollWidth} px of columns in a ${sc.clientWidth} px box`);
  });
  document.querySelectorAll('.tl-table').forEach(t => {  // pages/_show.table_html: its box scrolls
    if (!shown(t)) return;
    const name = Array.from(t.querySelectorAll('th')).slice(0, 3).map(h => h.textContent.trim()).join(', ');
    if (t.scrollWidth > t.clientWidth + 1)
      out.push(`table (${name}, ...): ${t.scrollWidth} px of columns in a ${t.clientWidth} px box`);
  });
  // Choices (segmented controls, pills) that run past their box scroll their last options out of sight.
  document.querySelectorAll('[data-testid="stButtonGroup"]').forEach(g => {
    if (!shown(g)) return;
    const label = (g.querySelector('[data-testid="stWidgetLabel"]') || g).textContent.trim().slice(0, 40);
    g.querySelectorAll('*').forEach(e => {
      if (e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== 'visible')
        out.push(`choices "${label}": ${e.scrollWidth} px of options in a ${e.clientWidth} px box`);
    });
  });
  document.querySelectorAll('[data-testid="stTable"] td, [data-testid="stTable"] th, '
                            + '[data-testid="stTable"] td [data-testid="stMarkdownContainer"], '
                            + '[data-testid="stTable"] th [data-testid="stMarkdownContainer"], '
                            + '[data-testid="stMarkdownContainer"] td, [data-testid="stMarkdownContainer"] th, '
                            + '.tl-table td, .tl-table th')
    .forEach(c => { if (shown(c) && c.scrollWidth > c.clientWidth + 1) out.push(`cell "${c.textContent.trim().slice(0, 60)}"`); });
  return out;
}"""


# Every shown grid has drawn its header into its accessibility table (it fills it after the
# canvas: measured before, a table's cells would be missed).
GRIDS_DRAWN_JS = """() => Array.from(document.querySelectorAll('[data-testid="stDataFrame"]'))
  .filter(df => df.offsetParent !== null)
  .every(df => Array.from(df.querySelectorAll('table th')).some(t => t.textContent.trim()))"""


# The Streamlit frontend's element modules (``static/js/<Name>.<hash>.js``): each loaded when the
# first element of its kind arrives, unless serve.py's index imported it as the tab connected.
ELEMENT_MODULES = frozenset((
    "ArrowVegaLiteChart", "Audio", "AudioInput", "Balloons", "BidiComponent", "Button", "ButtonGroup",
    "CameraInput", "ChatInput", "Checkbox", "ColorPicker", "ComponentInstance", "DataFrame", "DateInput",
    "DateTimeInput", "DeckGlJsonChart", "DownloadButton", "EChartsChart", "Feedback", "FileUploader",
    "GraphVizChart", "Html", "IFrame", "ImageList", "Json", "LinkButton", "MermaidChart", "Metric",
    "Multiselect", "NumberInput", "PageLink", "PlotlyChart", "Progress", "Radio", "Selectbox", "Slider",
    "Snow", "Spinner", "StreamlitSyntaxHighlighter", "Table", "TextArea", "TextInput", "TimeInput",
    "Toast", "Video"))


def element_modules_loaded(page) -> set[str]:
    """The element modules the page's document has loaded (``ELEMENT_MODULES``)."""
    files = page.evaluate("() => performance.getEntriesByType('resource').map(r => r.name.split('/').pop())")
    return {f.split(".")[0] for f in files if f.endswith(".js")} & ELEMENT_MODULES


def cut_off(page) -> list[str]:
    """What the page draws cut off: KPI labels and values, tables and their cells."""
    page.wait_for_function(GRIDS_DRAWN_JS, timeout=30_000, polling=100)
    return [f"KPI {t!r}" for t in page.evaluate(CUT_OFF_JS)] + page.evaluate(TABLE_CUT_OFF_JS)


# Charts whose labels pushed a margin past the one they were given, which makes Plotly lay the
# figure out and draw it a second time (analytics.charts.theme.MARGIN_PX). Charts labelled by
# category (source and metric names on the Data page) are sized by their labels and left out.
# ``PUSHED_SIDES_JS`` is a chart's pushed sides (``bench/charts.py`` draws with it too).
PUSHED_SIDES_JS = ("gd => ['l', 'r', 't', 'b'].filter("
                   "k => Math.round(gd._fullLayout._size[k]) > gd._fullLayout.margin[k])")
PUSHED_MARGIN_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot'))
  .filter(gd => gd._fullLayout && gd._fullLayout.yaxis.type !== 'category')
  .map(gd => { const s = gd._fullLayout._size, m = gd._fullLayout.margin;
    const over = (""" + PUSHED_SIDES_JS + """)(gd);
    const a = (gd._fullLayout.annotations || [])[0];
    const name = ((gd.layout.title && gd.layout.title.text) || (a && a.text) || '').slice(0, 40);
    return over.length ? `chart ${JSON.stringify(name)} pushed ${over.join(',')}: ` +
      over.map(k => `${m[k]} -> ${Math.round(s[k])} px`).join(', ') : ''; })
  .filter(t => t)"""


def pushed_margins(page) -> list[str]:
    """The page's charts drawn twice because their labels did not fit the margins given."""
    return page.evaluate(PUSHED_MARGIN_JS)


NAV_TITLES = ["Overview", "Rhythm", "Tail events", "What-if", "Forecast", "Chargeback", "Data"]
pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]


def _need_browser() -> None:
    if Path(CHROMIUM).exists():
        return
    message = f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    """Poll Streamlit's health endpoint (blocking reads with a timeout, no sleeps)."""
    import time

    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            told = proc.stdout.read() if proc.stdout else ""
            raise RuntimeError(f"streamlit exited with {proc.returncode}: {told}")
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError as exc:
            last = exc
            # A refused connection returns at once; wait on the process instead of sleeping.
            try:
                proc.wait(timeout=0.25)
            except subprocess.TimeoutExpired:
                pass
    raise TimeoutError(f"streamlit did not answer at {url}: {last}")


def as_operator(page, base: str) -> None:
    """Make ``page``'s browser context the local operator of the server at ``base``: the address
    with the token it printed, answered with a cookie (its health check's, the cheapest)."""
    page.goto(f"{base}/_stcore/health?token={OPERATOR_TOKEN}")


def start_app(env_extra: dict[str, str], port: int, log: Path | None = None) -> subprocess.Popen:
    env = {**os.environ, "TIDELENS_PREFETCH": "1", "TIDELENS_TOKEN": OPERATOR_TOKEN, **env_extra,
           "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "serve.py"), "--server.port", str(port),
           "--server.address", "127.0.0.1", "--server.headless", "true",
           "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
    # With ``log``, the server's output goes to that file (the test reads its warnings after).
    out = open(log, "w") if log is not None else subprocess.PIPE  # noqa: SIM115 - the server owns it
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)


def stop_app(proc: subprocess.Popen) -> None:
    """Stop a server started by :func:`start_app` (SIGTERM, then SIGKILL after 15 s)."""
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


def registered_pages() -> list[tuple[str, str]]:
    """``(url path, screenshot name)`` of every page app.py registers whose file exists."""
    from pages._nav import PAGES

    # Every page by its own path, the first too.
    return [(url, url) for path, _, _, url in PAGES if (ROOT / path).exists()]


@pytest.fixture(scope="module")
def app_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A running app and the query string that opens a store with an hour of a 4-GPU node."""
    _need_browser()
    from test_app_pages import build_store

    tmp = tmp_path_factory.mktemp("browser")
    db = build_store(tmp / "hour.duckdb")
    port = free_port()
    proc = start_app({"TIDELENS_UPLOADS_DB": str(tmp / "uploads.duckdb"),
                      "TIDELENS_CONFIG": str(tmp / "tidelens.toml")}, port, log=tmp / "server.log")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        yield url, urllib.parse.urlencode({"source": "duckdb", "db": str(db), "slo": "100"}), tmp / "server.log"
    finally:
        stop_app(proc)


def open_page(page, url: str, timeout_ms: int = 60_000) -> None:
    page.goto(url, wait_until="domcontentloaded")
    # The root first shows "initial", then "running", then "notRunning" when the script is done.
    page.wait_for_selector('[data-testid="stApp"][data-test-connection-state="CONNECTED"]',
                           timeout=timeout_ms)
    page.wait_for_selector('[data-testid="stMainBlockContainer"] h1', timeout=timeout_ms)
    wait_settled(page, timeout_ms)


def test_every_page_in_chromium(app_url: tuple[str, str, Path]) -> None:
    from playwright.sync_api import sync_playwright

    base, query, server_log = app_url
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    pages = registered_pages()
    assert pages[0][1] == "overview" and any(name == "data" for _, name in pages)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            # Tall enough for a whole page: Streamlit scrolls inside the app, so full_page cannot.
            # A browser outside UTC (issue 17: times must not depend on the server's or browser's zone).
            page = browser.new_page(viewport={"width": 1600, "height": 1800}, timezone_id="America/New_York")
            as_operator(page, base)
            # The server's first request is a deep link to a page other than the default: it
            # opens that page, with the link's settings, under the app's own navigation (not
            # Streamlit's listing of every file in pages/).
            open_page(page, f"{base}/data?{query}")
            assert page.locator('[data-testid="stMainBlockContainer"] h1').first.inner_text() == "Data"
            assert "source=duckdb" in page.url
            assert "DuckDB file" in page.locator('[data-testid="stSidebar"]').inner_text()
            nav = page.locator('[data-testid="stSidebarNav"] a').all_inner_texts()
            assert [t.strip().splitlines()[-1] for t in nav] == NAV_TITLES, nav  # after the icon
            for path, name in pages:
                open_page(page, f"{base}/{path}?{query}")
                # Every kind of element a first render draws was imported while the tab connected
                # (serve.py), none on its arrival: a page that draws a new kind lists it there.
                late = element_modules_loaded(page) - set(FIRST_RENDER_ELEMENTS[path])
                assert not late, f"{name}: add {sorted(late)} to pages/_nav.FIRST_RENDER_ELEMENTS"
                # and the frontend asked the server at its own address, not first at the page's path
                # (a 404, then a retry ~0.1 s later, without serve.py)
                paths = page.evaluate("() => performance.getEntriesByType('resource')"
                                      ".map(r => new URL(r.name).pathname)")
                assert "/_stcore/health" in paths and not [p for p in paths if p.startswith(f"/{path}/")], paths
                if name == "overview":
                    page.wait_for_selector(".js-plotly-plot", timeout=60_000)
                    assert page.locator('[data-testid="stMetric"]').count() >= 5
                    # A chart's data comes down as CSV from its Export menu, made on the
                    # server when clicked.
                    page.locator(".st-key-export_pool-story button").first.click()
                    with page.expect_download(timeout=60_000) as dl:
                        page.locator(".st-key-csv_pool-story button").first.click()
                    csv = Path(dl.value.path()).read_text()
                    assert csv.splitlines()[0].startswith("ts,cls,gpus")
                    # The capacity review, made in the run on the click with its stage in a status
                    # (the log check below shows it warned about nothing), then downloaded.
                    page.evaluate(SAW_STATUS_JS, "Capacity review: ")
                    page.locator(".st-key-ov_review_make button").first.click()
                    with page.expect_download(timeout=120_000) as dl:
                        page.locator(".st-key-ov_review button").first.click(timeout=120_000)
                    assert page.evaluate("() => window.__sawStatus"), "no status while the review was made"
                    review = Path(dl.value.path()).read_text()
                    assert dl.value.suggested_filename == "tidelens-review.html"
                    assert "<h1>Capacity review</h1>" in review and review.count("<h2>") == 5
                wait_settled(page)
                assert page.locator('[data-testid="stSkeleton"]').count() == 0
                errors = page.locator('[data-testid="stException"]')
                assert errors.count() == 0, f"{name}: {errors.first.inner_text()}"
                assert "source=duckdb" in page.url, f"{name} lost the view settings: {page.url}"
                assert "Session State API" not in page.locator("body").inner_text(), name  # Streamlit's state warning
                # Nothing cut off on a projector: no KPI or table wider than its box.
                cut = cut_off(page)
                assert not cut, f"{name}: cut off: {cut}"
                pushed = pushed_margins(page)
                assert not pushed, f"{name}: {pushed}"
                page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
            # A meeting room's projector at 1280x720: still nothing cut off, a screenshot of each.
            page.set_viewport_size({"width": 1280, "height": 720})
            for path, name in pages:
                open_page(page, f"{base}/{path}?{query}")
                cut = cut_off(page) + page.evaluate(CUT_BUTTONS_JS)
                assert not cut, f"{name} at 1280x720: cut off: {cut}"
                pushed = pushed_margins(page)
                assert not pushed, f"{name} at 1280x720: {pushed}"
                page.screenshot(path=str(SCREENSHOTS / f"{name}-1280x720.png"))
            page.set_viewport_size({"width": 1600, "height": 1800})
            # The root opens the Overview at its own path, with the link's settings.
            open_page(page, f"{base}/?{query}")
            assert page.locator('[data-testid="stMainBlockContainer"] h1').first.inner_text() == "Overview"
            page.wait_for_function("() => location.pathname === '/overview'", timeout=60_000)
            assert "source=duckdb" in page.url
            # Moving between pages through the navigation keeps the view in the URL.
            page.locator('[data-testid="stSidebarNav"] a', has_text="Data").first.click()
            page.wait_for_url("**/data**", timeout=60_000)
            wait_settled(page)
            page.wait_for_function("() => location.search.includes('source=duckdb')", timeout=60_000)
            # The folded settings panel opens on a click; a step picked there reaches the URL.
            page.locator('[data-testid="stSidebar"] [data-testid="stExpander"] summary').first.click()
            page.wait_for_selector('[data-testid="stSidebar"] [data-testid="stSelectbox"]', timeout=60_000)
            wait_settled(page)  # a click during the panel's run would land on a redrawn widget
            page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first.click()
            page.get_by_role("option", name="5 min", exact=True).click()
            page.wait_for_function("() => new URL(location.href).searchParams.get('step') === '300'",
                                   timeout=60_000)
            wait_settled(page)
        finally:
            browser.close()
    assert (SCREENSHOTS / "overview.png").stat().st_size > 10_000
    # The server said nothing alarming while every page was driven: no warning (e.g. a widget
    # "created with a default value but also had its value set via the Session State API"), no traceback.
    text = server_log.read_text()
    assert "Streamlit" in text  # the log is the server's (its start-up banner), not an empty file
    said = [line for line in text.splitlines() if "WARNING" in line or "Traceback" in line or "Error" in line]
    assert not said, said[:5]


def test_a_story_of_days_fits_a_projector(app_url: tuple[str, str, Path], tmp_path: Path) -> None:
    """The pages whose content needs days of a real story (a calibrated What-if with its backtest,
    the policies' tables, the bills, the events list): at 1280x720 and 1600x1000 no KPI, table or
    button label is cut off, and every page's answer (its headline: the sentence and its number,
    the Overview's chart) is on its first screen. The hour's store above cannot calibrate, so it
    never drew these."""
    from playwright.sync_api import sync_playwright

    from analytics.sample import load_into, simulate, truth
    from analytics.store import Store

    res = simulate("morning", days=2, gpus=64, seed=4)
    db = tmp_path / "two-days.duckdb"
    with Store(db) as st:
        load_into(st, res)
    slo = ",".join(f"{k}:{v['p99_ms']:g}" for k, v in truth(res)["slos"].items())
    base = app_url[0]
    query = urllib.parse.urlencode({"source": "duckdb", "db": str(db), "slo": slo, "w_src": "store",
                                    "tz": "America/Argentina/Buenos_Aires"})  # a long zone name
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            as_operator(page, base)
            for path in ("overview", "rhythm", "events", "whatif", "forecast", "chargeback", "data"):
                # Each page opened once and judged at both sizes: the second by resizing the window,
                # as a laptop does on the projector (the layout and the charts follow the window).
                page.set_viewport_size({"width": 1280, "height": 720})
                open_page(page, f"{base}/{path}?{query}", timeout_ms=180_000)
                for size in ((1280, 720), (1600, 1000)):
                    if size != (1280, 720):
                        page.set_viewport_size({"width": size[0], "height": size[1]})
                        page.evaluate(NEXT_FRAMES_JS)
                        wait_settled(page)
                    assert page.locator('[data-testid="stException"]').count() == 0, path
                    off = answer_off_screen(page, chart=path == "overview")
                    assert not off, f"{path} at {size[0]}x{size[1]}: the answer is not on the first screen: {off}"
                    if path == "whatif":  # the store's own calibration, with its backtest
                        assert page.get_by_text(re.compile(r"^Minutes over the SLO, [\w-]+, modelled$")).count() >= 1
                        assert page.get_by_text("Best policy, pool 'default'").count() >= 1  # the pool's answer
                    if path in ("events", "whatif", "chargeback"):
                        # HTML tables: a grid costs a new tab ~0.7 s, st.table up to 0.3 (bench/elements.py)
                        assert page.locator('.tl-table table').count() >= 1, path
                        assert page.locator('[data-testid="stDataFrame"]').count() == 0, path
                    cut = cut_off(page) + page.evaluate(CUT_BUTTONS_JS)
                    assert not cut, f"{path} at {size[0]}x{size[1]}: cut off: {cut}"
                    pushed = pushed_margins(page)
                    assert not pushed, f"{path} at {size[0]}x{size[1]}: {pushed}"
        finally:
            browser.close()


def test_server_side_svg_uses_debian_chromium(monkeypatch: pytest.MonkeyPatch) -> None:
    _need_browser()
    import plotly.graph_objects as go

    from analytics.charts import figure_image

    monkeypatch.delenv("BROWSER_PATH", raising=False)
    svg = figure_image(go.Figure(go.Bar(x=["a", "b"], y=[1, 2])), "svg")
    assert svg.lstrip().startswith(b"<svg") and b"</svg>" in svg
    assert os.environ["BROWSER_PATH"] == CHROMIUM
