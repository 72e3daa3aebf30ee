"""App speed in a real browser: each page's first complete render and a settings change.

Starts ``streamlit run app.py`` and, as the peer, ``streamlit run`` of a page with one small
Plotly chart (the floor: Streamlit's page load plus Plotly.js on this machine), both headless
on free ports, and drives
Debian's Chromium through Playwright. Prints seconds per page and the ratio to the peer.

Targets (issue 4): first complete render < 2 s per page, a settings change < 1 s.
"First complete render" = from the click (or navigation start) until the script run has
finished and the page's title (and, on Overview, its chart) is on screen, with no placeholder
left. Columns:

- ``first``: a new tab on a fresh browser profile, the first open ever (the app's caches
  empty: its own ``HOME``);
- ``restart``: the same after a server restart (disk caches kept);
- ``new tab``: a fresh profile again (the browser downloads and compiles Streamlit's
  JavaScript: a colleague opening a shared link);
- ``revisit``: a new tab in a browser that has opened the app before (its HTTP cache warm);
- ``click``: a click on the page in the sidebar of the open app, the way a meeting moves
  between pages, right after the server restart (the background prefetch has had the time a
  user spends reading the page before).

Usage::

    .venv/bin/python bench/app.py [--db PATH] [--repeat 3]

Without ``--db`` it opens the bundled sample when ``analytics.sample`` is there, else an hour
of a 4-GPU node built by the tests' generator.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from test_browser import (APP_IDLE, CUT_BUTTONS_JS, OPERATOR_TOKEN, wait_settled, CHROMIUM,  # noqa: E402
                          CHROMIUM_ARGS, answer_off_screen, as_operator, cut_off, first_render_s, free_port,
                          registered_pages, wait_healthy)

# The floor for any charted page: Streamlit's own page load plus Plotly.js drawing one small chart.
PEER_APP = ('import plotly.graph_objects as go\nimport streamlit as st\nst.title("Peer")\n'
            'st.plotly_chart(go.Figure(go.Scatter(y=[1, 3, 2])), theme=None)\n')
# The floor for a slider: the same page load, one slider and a chart redrawn from its value.
PEER_SLIDER_APP = ('import plotly.graph_objects as go\nimport streamlit as st\nst.title("Peer")\n'
                   'x = st.slider("x", 0.0, 1.0, 0.3, 0.05, key="x")\n'
                   'st.plotly_chart(go.Figure(go.Scatter(y=[1, 3 * x, 2])), theme=None)\n')
# The same floor served as serve.py serves the app, with Nagle's algorithm off (serve_tcp.py):
# how much of a page's ratio to the floor is that fix, which stock Streamlit lacks.
PEER_NO_NAGLE = ("import sys\nsys.path.insert(0, {root!r})\nimport streamlit as st\n"
                 "from serve_tcp import without_nagle\nwithout_nagle()\napp = st.App({peer!r})\n")
TARGET_RENDER_S = 2.0
TARGET_CHANGE_S = 1.0
TARGET_SLIDER_S = 0.5  # a What-if decision slider (issue 17)
TARGET_TAB_X_PEER = 1.3  # a page's first render in a new tab on a warm server, against the peer
TARGET_CHARGEBACK_RESTART_S = 3.0
READ_S = 5.0  # default seconds a user spends on a page before the next click (--read-s)


def _serve(script: Path, env: dict[str, str]) -> tuple[str, object]:
    import os
    import subprocess

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(script), "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true",
         "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
        cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url, proc)
    return url, proc


SHOT_SIZES = ((1600, 1000), (1280, 720))  # a meeting room's screens (issue 17)


def _render_s(browser, url: str, *, chart: bool, shot: Path | None = None,
              size: tuple[int, int] = (1600, 1000), cut: list[str] | None = None) -> float:
    """Seconds to a page's complete first render in a new tab; with ``shot``, a screenshot,
    and with ``cut``, what the page draws cut off appended to it."""
    page = browser.new_page(viewport={"width": size[0], "height": size[1]})
    try:
        if shot is not None:  # the screenshots of a local install: its operator's (serve.py's token)
            as_operator(page, url.split("/", 3)[0] + "//" + url.split("/", 3)[2])
        elapsed = first_render_s(page, url, chart=chart)
        if shot is not None:
            page.screenshot(path=str(shot))
        if cut is not None:
            cut.extend(cut_off(page) + page.evaluate(CUT_BUTTONS_JS))
            off = answer_off_screen(page, chart=chart)
            cut.extend([f"the answer: {off}"] if off else [])
        return elapsed
    finally:
        page.close()


def _open(page, url: str) -> float:
    return first_render_s(page, url, chart=False)


def _revisit_s(context, url: str, *, chart: bool) -> float:
    """A new tab in a browser profile that has been to the app before."""
    page = context.new_page()
    try:
        t0 = time.perf_counter()
        page.goto(url, wait_until="commit")
        if chart:
            page.wait_for_selector(".js-plotly-plot", timeout=300_000)
        wait_settled(page, 300_000)
        return time.perf_counter() - t0
    finally:
        page.close()


def _click_s(page, path: str, title: str, *, chart: bool) -> float:
    """Click a page's link in the sidebar; seconds until that page has drawn."""
    link = page.locator(f'[data-testid="stSidebarNav"] a[href$="/{path}"]' if path
                        else '[data-testid="stSidebarNav"] a').first
    t0 = time.perf_counter()
    link.click()
    page.wait_for_function(
        "t => { const h = document.querySelector('[data-testid=\"stMainBlockContainer\"] h1');"
        " return h !== null && h.textContent.trim() === t; }", arg=title, timeout=300_000)
    if chart:
        page.wait_for_selector(".js-plotly-plot", timeout=300_000)
    wait_settled(page, 300_000)
    return time.perf_counter() - t0


def _totals(app_url: str, query: dict[str, str]) -> dict:
    """The span of the store the bench opens."""
    from analytics.store import Store

    path = query.get("db")
    if path is None:
        from analytics.sample import ensure_default_store

        path = str(ensure_default_store())
    with Store(path, read_only=True) as store:
        return store.totals()


def _page_titles() -> dict[str, str]:
    """Each page's ``st.title``, by its file name."""
    import re

    out = {}
    for f in (ROOT / "pages").glob("*.py"):
        found = re.search(r'^st\.title\("([^"]+)"\)', f.read_text(), re.M)
        if found:
            out[f.stem] = found.group(1)
    return out


def _change_s(browser, url: str, *, read_s: float) -> list[tuple[str, float]]:
    """Change the analysis step, then the SLO, as a user would; time until re-rendered.

    ``read_s``: seconds on the page before the first change (the prefetch's head start)."""
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    out = []
    try:
        page.goto(url)
        page.wait_for_selector(".js-plotly-plot", timeout=300_000)
        page.wait_for_selector(APP_IDLE, timeout=300_000)
        if read_s:
            page.wait_for_timeout(read_s * 1000)
        # The settings panel is folded on arrival; open it once, as a user would.
        page.locator('[data-testid="stSidebar"] [data-testid="stExpander"] summary').first.click()
        page.wait_for_selector('[data-testid="stSidebar"] [data-testid="stSelectbox"]', timeout=300_000)
        wait_settled(page, 300_000)
        for label in ("5 min", "15 min", "1 min"):
            page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first.click()
            option = page.get_by_role("option", name=label, exact=True)
            t0 = time.perf_counter()
            option.click()
            page.wait_for_selector(f'text=step {label}', timeout=300_000)
            page.wait_for_selector(APP_IDLE, timeout=300_000)
            out.append((f"step -> {label}", time.perf_counter() - t0))
        t0 = time.perf_counter()
        page.locator('[data-testid="stSidebar"] [data-testid="stNumberInputStepUp"]').first.click()
        page.wait_for_function("() => new URL(location.href).searchParams.get('slo') !== null",
                               timeout=300_000)
        page.wait_for_selector(APP_IDLE, timeout=300_000)
        out.append(("SLO +10 ms", time.perf_counter() - t0))
        # Drag the range's start one slider step (15 min) to the right, from the keyboard.
        before = page.evaluate("() => new URL(location.href).searchParams.get('start')")
        page.locator('[data-testid="stSidebar"] [data-testid="stSlider"] input[type="range"]').first.focus()
        t0 = time.perf_counter()
        page.keyboard.press("ArrowRight")
        page.wait_for_function("b => new URL(location.href).searchParams.get('start') !== b",
                               arg=before, timeout=300_000)
        page.wait_for_selector(APP_IDLE, timeout=300_000)
        wait_settled(page, 300_000)
        out.append(("range start +15 min", time.perf_counter() - t0))
    finally:
        page.close()
    return out


def _slider_s(browser, url: str, key: str, *, presses: int = 3, read_s: float = 2.0) -> list[float]:
    """Move the slider under ``key`` one step right from the keyboard, ``presses`` times, each
    ``read_s`` after the last answer (a user reads the numbers before the next move); the
    seconds each takes until the run has finished and every element is drawn again."""
    import re

    key = re.sub(r"[^a-zA-Z0-9_-]", "-", key)  # the CSS class Streamlit gives a widget key
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    out = []
    try:
        page.goto(url)
        page.wait_for_selector(f".st-key-{key}", timeout=300_000)
        wait_settled(page, 300_000)
        thumb = page.locator(f'.st-key-{key} input[type="range"]').first
        for _ in range(presses):
            page.wait_for_timeout(read_s * 1000)
            wait_settled(page, 300_000)
            before = thumb.input_value()
            thumb.focus()
            t0 = time.perf_counter()
            page.keyboard.press("ArrowRight")
            page.wait_for_function(
                "([k, b]) => { const t = document.querySelector(`.st-key-${k} input[type=range]`);"
                " return t && t.value !== b; }", arg=[key, before], timeout=300_000)
            page.wait_for_selector(APP_IDLE, timeout=300_000)
            wait_settled(page, 300_000)
            out.append(time.perf_counter() - t0)
    finally:
        page.close()
    return out


def _screenshots(browser, app_url: str, qs: str) -> int:
    """Every page at each of :data:`SHOT_SIZES`, after a first open that warms its caches; 1
    when any page draws a KPI, table or button cut off, or its answer below the fold (listed),
    else 0."""
    out = ROOT / "docs" / "screenshots"
    failed = 0
    for path, name in registered_pages():
        url = f"{app_url}/{path}?{qs}"
        _render_s(browser, url, chart=name == "overview")
        for w, h in SHOT_SIZES:
            shot = out / f"sample-{name}-{w}x{h}.png"
            cut: list[str] = []
            _render_s(browser, url, chart=name == "overview", shot=shot, size=(w, h), cut=cut)
            print(f"wrote {shot.relative_to(ROOT)}" + "".join(f"\n  CUT OFF: {c}" for c in cut))
            failed |= bool(cut)
    return int(failed)


def _slider_report(browser, slider_url: str, app_url: str, query: dict[str, str]) -> None:
    """A What-if decision slider, on the store's own calibrated scenario, against the peer's."""
    wq = urllib.parse.urlencode({**query, "w_src": "store"})
    _slider_s(browser, f"{app_url}/whatif?{wq}", "w_f.pool.headroom", presses=1)  # calibrated, cached
    peer_moves = _slider_s(browser, slider_url, "x", presses=5)
    moves = _slider_s(browser, f"{app_url}/whatif?{wq}", "w_f.pool.headroom", presses=5)
    p_med, m_med = statistics.median(peer_moves), statistics.median(moves)
    print(f"What-if headroom slider, one step (5 moves, 2 s apart): median {m_med:.2f} s, worst {max(moves):.2f} s; "
          f"peer (one slider, one chart) median {p_med:.2f} s, {m_med / p_med:.2f}x; target "
          f"{TARGET_SLIDER_S:g} s: {'met' if max(moves) < TARGET_SLIDER_S else 'MISSED'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", help="DuckDB store to open (default: the sample, else a generated hour)")
    ap.add_argument("--repeat", type=int, default=3, help="warm renders per page (median shown)")
    ap.add_argument("--read-s", type=float, default=READ_S,
                    help="seconds on a page before the next click or setting (the prefetch's head start)")
    ap.add_argument("--slider-only", action="store_true",
                    help="only the What-if decision slider against the peer's slider (quick)")
    ap.add_argument("--screenshots", action="store_true",
                    help="only save each page (warm, as the local operator) at 1600x1000 and 1280x720 to "
                         "docs/screenshots/sample-<page>-<W>x<H>.png; exit 1 if a KPI, table or button "
                         "is cut off or a page's answer is not on its first screen")
    args = ap.parse_args(argv)
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} missing: apt-get install chromium", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="tidelens-bench-"))
    if args.db:
        query, what = {"source": "duckdb", "db": args.db}, args.db
    else:
        try:
            from analytics.sample import ensure_default_store

            t0 = time.perf_counter()
            ensure_default_store()
            print(f"sample store ready in {time.perf_counter() - t0:.1f} s")
            query, what = {}, "bundled sample"
        except ImportError:
            from test_app_pages import build_store

            db = build_store(tmp / "hour.duckdb")
            query, what = {"source": "duckdb", "db": str(db)}, "generated hour, 4 GPUs (no sample yet)"
    qs = urllib.parse.urlencode(query)
    peer_file = tmp / "peer.py"
    peer_file.write_text(PEER_APP)
    fair_file = tmp / "peer_no_nagle.py"
    fair_file.write_text(PEER_NO_NAGLE.format(root=str(ROOT), peer=str(peer_file)))
    slider_file = tmp / "peer_slider.py"
    slider_file.write_text(PEER_SLIDER_APP)
    # The app's own home: its disk caches start empty ("first" open ever), then survive a
    # restart ("restart"), as on a user's machine.
    env = {"TIDELENS_UPLOADS_DB": str(tmp / "uploads.duckdb"), "TIDELENS_CONFIG": str(tmp / "t.toml"),
           "HOME": str(tmp / "home"), "TIDELENS_TOKEN": OPERATOR_TOKEN}
    (tmp / "home").mkdir()
    app_url, app_proc = _serve(ROOT / "serve.py", env)
    if args.screenshots:  # the app alone: no peer to time against
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                failed = _screenshots(browser, app_url, qs)
                browser.close()
                return failed
        finally:
            app_proc.terminate()
    peer_url, peer_proc = _serve(peer_file, env)
    slider_url, slider_proc = _serve(slider_file, env)
    fair_url, fair_proc = _serve(fair_file, env)
    print(f"data: {what}")
    procs = [app_proc, peer_proc, slider_proc, fair_proc]
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            if args.slider_only:
                _slider_report(browser, slider_url, app_url, query)
                browser.close()
                return 0
            _render_s(browser, peer_url, chart=True)  # warm the browser's own caches
            _render_s(browser, fair_url, chart=True)
            peer = statistics.median(_render_s(browser, peer_url, chart=True)
                                     for _ in range(args.repeat))
            fair = statistics.median(_render_s(browser, fair_url, chart=True)
                                     for _ in range(args.repeat))
            pages = registered_pages()
            visited = browser.new_context(viewport={"width": 1600, "height": 1000})
            _revisit_s(visited, peer_url, chart=True)
            peer_revisit = statistics.median(_revisit_s(visited, peer_url, chart=True)
                                             for _ in range(args.repeat))
            first = {name: _render_s(browser, f"{app_url}/{path}?{qs}", chart=name == "overview")
                     for path, name in pages}
            app_proc.terminate()
            app_proc.wait(timeout=15)
            app_url, app_proc = _serve(ROOT / "serve.py", env)
            procs[0] = app_proc
            titles = _page_titles()
            restart: dict[str, float] = {}
            clicks: dict[str, float] = {}
            tab = visited.new_page()
            # After the restart: the first open (a new tab), then the rest by clicks, each after
            # a few seconds on the page before, as a user reading it.
            for i, (path, name) in enumerate(pages):
                url = f"{app_url}/{path}?{qs}"
                restart[name] = _render_s(browser, url, chart=name == "overview")
                if i == 0:
                    _open(tab, url)
                else:
                    clicks[name] = _click_s(tab, path, titles[name], chart=name == "overview")
                tab.wait_for_timeout(args.read_s * 1000)
            clicks[pages[0][1]] = _click_s(tab, pages[0][0], titles[pages[0][1]], chart=True)
            tab.close()
            print("first = the first open ever (empty caches); restart = the first open after the "
                  "server restarted (disk caches kept); new tab = a fresh browser profile "
                  "(median); revisit = a browser that has opened the app before (median); "
                  f"click = from the sidebar, {args.read_s:g} s after the page before")
            print("x no-Nagle = the new tab against the same floor served as the app is (serve_tcp.py), "
                  f"{fair:.2f} s")
            print(f"{'page':<12} {'first s':>7} {'restart':>7} {'new tab':>7} {'x peer':>7} "
                  f"{'revisit':>7} {'x peer':>7} {'click':>7} {'< 2 s':>7} {'x no-Nagle':>10}")
            print(f"{'(peer)':<12} {'':>7} {'':>7} {peer:7.2f} {1.0:7.2f} {peer_revisit:7.2f} "
                  f"{1.0:7.2f}")
            worst_tab = worst_click = 0.0
            for path, name in pages:
                url = f"{app_url}/{path}?{qs}"
                chart = name == "overview"
                warm = statistics.median(_render_s(browser, url, chart=chart)
                                         for _ in range(args.repeat))
                again = statistics.median(_revisit_s(visited, url, chart=chart)
                                          for _ in range(args.repeat))
                worst_tab = max(worst_tab, warm)
                worst_click = max(worst_click, clicks[name])
                ok = "ok" if clicks[name] < TARGET_RENDER_S else "SLOW"
                print(f"{name:<12} {first[name]:7.2f} {restart[name]:7.2f} {warm:7.2f} "
                      f"{warm / peer:7.2f} {again:7.2f} {again / peer_revisit:7.2f} "
                      f"{clicks[name]:7.2f} {ok:>7} {warm / fair:10.2f}")
            print(f"target {TARGET_RENDER_S:.0f} s, judged on the click (a page of the open app): "
                  f"slowest {worst_click:.2f} s")
            print(f"a new tab on a fresh browser profile: slowest {worst_tab:.2f} s, "
                  f"{worst_tab / peer:.2f}x the peer (one small chart: {peer:.2f} s, Streamlit's "
                  f"own floor on this machine; target {TARGET_TAB_X_PEER:g}x: "
                  f"{'met' if worst_tab / peer <= TARGET_TAB_X_PEER else 'MISSED'}); "
                  f"{worst_tab / fair:.2f}x the same floor served without Nagle's algorithm as the "
                  f"app is ({fair:.2f} s)")
            cb = restart.get("chargeback")
            if cb is not None:
                print(f"Chargeback's first open after the server restart: {cb:.2f} s (target "
                      f"{TARGET_CHARGEBACK_RESTART_S:g} s: {'met' if cb < TARGET_CHARGEBACK_RESTART_S else 'MISSED'})")
            _slider_report(browser, slider_url, app_url, query)
            visited.close()
            # A range not opened before (the last week or eight days): once changed right after
            # the page has drawn, once after a user's reading time.
            from analytics.times import iso_utc

            totals = _totals(app_url, query)
            for i, read_s in enumerate((0.0, args.read_s)):
                start = iso_utc(totals["last_ts_ms"] - (7 + i) * 86_400_000)
                fresh = urllib.parse.urlencode({**query, "start": start})
                print(f"settings change on Overview, on a range not opened before, {read_s:g} s after "
                      "it drew (a zoom is cut from the whole span's timelines):")
                for label, secs in _change_s(browser, f"{app_url}/?{fresh}", read_s=read_s):
                    ok = "ok" if secs < TARGET_CHANGE_S else "SLOW"
                    print(f"  {label:<16} {secs:6.2f} s {ok}")
            browser.close()
    finally:
        for proc in procs:
            proc.terminate()  # type: ignore[attr-defined]
            proc.wait(timeout=15)  # type: ignore[attr-defined]
    return 0


if __name__ == "__main__":
    sys.exit(main())
