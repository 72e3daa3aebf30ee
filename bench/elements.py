"""What each kind of Streamlit element adds to a new tab's first render, against the floor.

``bench/app.py`` times whole pages against the floor (a Streamlit page with one small Plotly
chart); this times the floor plus one kind of element, each as its own tiny app on its own
port, so that a page's design can be weighed before it is built: which elements a first
render can afford (issue 17: a new tab within 1.3x the floor). Every app is opened in a fresh
browser context (empty HTTP cache: a colleague opening a shared link), the apps in turn each
round so that whatever the machine does meanwhile falls on all of them alike, and the median
of ``--repeat`` rounds is printed with its ratio to the floor's.

It also prints, for the floor and for each page of the app on the bundled sample (``--pages``),
when the page's parts arrived in the browser (milliseconds from navigation): the script run's
start and end as the browser saw them (between them: the page's run on the server and its
elements' arrival), the last network response, and the first Plotly chart drawn.

Usage::

    .venv/bin/python bench/elements.py [--repeat 5] [--only dataframe,table] [--pages events,whatif]

Measured on the project's 2-core machine (2026-12-03, Streamlit 1.67, Chromium 156), floor
1.85-1.91 s, each element's added seconds over the runs that timed it (five runs of 4-5 rounds
in all, two with this script's first draft):

- **one selectbox +0.58-0.62 s** (four: +0.41-0.65), a multiselect +0.56, ``st.dataframe`` of three
  rows +0.63-0.75; a selectbox and a dataframe together +0.81 (their costs overlap, though they load
  no file in common: the selectbox's 21 files are 140 KB, the grid's 29 are 1.7 MB, so neither cost
  is its bytes);
- ``st.table`` +0.04-0.17, the same rows as a Markdown table +0.03-0.04; a horizontal radio +0.10, a
  segmented control +0.11, a slider +0.10-0.12, a select slider +0.18, a number input +0.05-0.12;
- five bordered metrics with help +0.04-0.09; an 8-trace, 720-point stacked chart +0.14-0.18, two
  +0.23-0.26; a download button, a lazy popover or expander, Material icons: within noise.

Each of those three alone takes a page to about 1.3x: a page under it can hardly show one on its
first render. In a whole page one of them removed saves little while another stays (What-if's
two tables as Markdown, its selectboxes kept: 3.13 -> 2.89 s; its decision widgets elided: 2.98 s),
and the pages' own times, interleaved with the floor, were Overview 1.27-1.37x (none of the three),
Rhythm 1.33x, Tail events 1.48-1.49x, What-if 1.62-1.65x, Chargeback 1.47x, Data 1.52x.

Then the pages lost all three from their first render (static tables, radios, segmented
controls, pills, select sliders). ``--base`` times the commit before beside them, in the same
rounds (three runs of 5-7 rounds, load 1.5-7, floor 2.07-2.17 s), pages as x floor, after (before):
Overview 1.37-1.41 (1.37-1.44; unchanged), Rhythm 1.18-1.35 (1.31-1.32), Tail events 1.47-1.56
(1.41-1.58), What-if 1.42-1.54 (1.58-1.67), Chargeback 1.28-1.37 (1.40-1.49), Data 1.43-1.48
(1.52-1.65). The target is still missed: what is left is spread thin. The page's run (from the
script's start to its end as the browser saw them) takes 0.35-0.7 s against the floor's 0.1-0.14;
the first chart is drawn 1.05-1.7 s after it against the floor's 1.0 s (Tail events' and What-if's
larger figures and their elements' lazy files). What these elements cost alone, same runs: a
25-row, 7-column ``st.table`` +0.28 (each cell is Markdown; 3 rows +0.02), a radio of 40 options in
a box +0.49, a select slider of 40 +0.27 (of 96 numbers +0.09), pills +0.22, a file uploader
+0.30, a toggle +0.27 (under load 6: within noise), one selectbox +0.36-0.48.

Then (2026-12-03, later; floor 1.68-1.79 s on a quieter machine): a 25-row, 7-column table drawn
as one escaped HTML table (``st.html``) costs nothing measurable (-0.05, within noise; ``st.table``
+0.20, the same rows as one Markdown table +0.07), and the pause between elements matters more
than their number: thirty bordered metrics sent in one burst +0.13 s, the same thirty 10 ms apart
+0.65 s (the browser draws the page again for each burst). The pages' own times, this script's
``--pages`` (each served by serve.py when the checkout has it), before -> after serve.py (the
index that gives the frontend the server's address and imports each page's element modules while
it connects), HTML tables, figures and replays built once per view (``pages._caches.memo``) and
Tail events' rule in a folded panel: Overview 1.46 -> 1.22-1.23, Rhythm 1.36 -> 1.21-1.25, Tail
events 1.46 -> 1.26-1.27, What-if 1.53 -> 1.34-1.37, Chargeback 1.42 -> 1.18-1.19, Data 1.51 ->
1.28-1.35; What-if's charts in tabs (one drawn) took it to 1.23x in ``bench/app.py``. Removing
what a page draws in turn (``--base`` on a copy without it): What-if's second chart -0.12 s, its
tables' and charts' menus -0.08 s, its backtest KPIs and its sidebar panel within noise; Data's
metric list and label table within noise; Overview's second chart -0.08 s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from test_browser import CHROMIUM, CHROMIUM_ARGS, first_render_s, free_port, wait_healthy  # noqa: E402

# bench/app.py's floor (a title and one small chart) in the app's wide layout, so that an element
# is as wide as on a Tidelens page.
HEAD = ("import numpy as np\nimport plotly.graph_objects as go\nimport streamlit as st\n"
        "st.set_page_config(layout='wide')\nst.title('Peer')\n")
CHART = "st.plotly_chart(go.Figure(go.Scatter(y=[1, 3, 2])), theme=None)\n"
# An Overview-sized chart: eight stacked classes over 720 steps (thin_for_display's most).
BIG = ("x = np.arange(720)\n"
       "st.plotly_chart(go.Figure([go.Scatter(x=x, y=np.sin(x / 50 + i) + i, stackgroup='a', "
       "name=f'c{i}') for i in range(8)]), theme=None, key=f'big{K}')\n")
TABLE = "{'a': [1, 2, 3], 'b': ['x', 'y', 'z']}"
# name -> the lines between the title and the floor's chart
ELEMENTS: dict[str, str] = {
    "floor": "",
    "dataframe": f"st.dataframe({TABLE})\n",
    "table": f"st.table({TABLE})\n",
    "table 25x7": ("st.table({f'column {c}': [f'cell {r} {c}' for r in range(25)] for c in range(7)})\n"),
    "html table 25x7": ("st.html('<table>' + ''.join('<tr>' + ''.join(f'<td>cell {r} {c}</td>' for c in range(7)) + '</tr>' for r in range(25)) + '</table>')\n"),
    "markdown table 25x7": ("st.markdown('|' + '|'.join(f'column {c}' for c in range(7)) + '|\\n|' + '---|' * 7 + '\\n' + '\\n'.join('|' + '|'.join(f'cell {r} {c}' for c in range(7)) + '|' for r in range(25)))\n"),
    "30 metrics": ("import time\nfor i in range(30):\n    st.metric(f'K{i}', i, border=True)\n"),
    "30 metrics 10 ms apart": ("import time\nfor i in range(30):\n    st.metric(f'K{i}', i, border=True)\n    time.sleep(0.01)\n"),
    "radio 40 in a box": ("st.container(height=190).radio('E', [f'event {i}' for i in range(40)], "
                          "key='e')\n"),
    "select slider 40 events": ("st.select_slider('E', [f'2026-10-05 09:{i:02d} · recommender · batch' for i in "
                                "range(40)], key='e')\n"),
    "markdown table": "st.markdown('| a | b |\\n|---|---|\\n| 1 | x |\\n| 2 | y |\\n| 3 | z |')\n",
    "5 metrics, help": ("r = st.container(horizontal=True, wrap=True)\nfor i in range(5):\n"
                        "    r.metric(f'KPI {i}', f'{i * 1000:,} GPUs', border=True, help='what it counts')\n"),
    "5 metrics": ("r = st.container(horizontal=True, wrap=True)\nfor i in range(5):\n"
                  "    r.metric(f'KPI {i}', f'{i * 1000:,} GPUs', border=True)\n"),
    "big chart": BIG.replace("{K}", "1"),
    "2 big charts": BIG.replace("{K}", "1") + BIG.replace("{K}", "2"),
    "download button": "st.download_button('CSV', data='a', icon=':material/download:', on_click='ignore')\n",
    "lazy popover": "st.popover('Export', icon=':material/download:', key='p', on_change='rerun')\n",
    "lazy expander": "st.expander('More', key='e', on_change='rerun')\n",
    "material icons": "st.caption(':material/monitoring: and :material/tune:')\n",
    "4 selectboxes": "for i in range(4):\n    st.selectbox(f'S{i}', ['a', 'b'], key=f's{i}')\n",
    "1 selectbox": "st.selectbox('S', ['a', 'b'], key='s')\n",
    "selectbox and dataframe": f"st.selectbox('S', ['a', 'b'], key='s')\nst.dataframe({TABLE})\n",
    "multiselect": "st.multiselect('M', ['a', 'b'], ['a'], key='m')\n",
    "radio": "st.radio('R', ['a', 'b'], horizontal=True, key='r')\n",
    "select slider": "st.select_slider('H', [f'{h:02d}:00' for h in range(24)], '09:00', key='h')\n",
    "segmented control": "st.segmented_control('G', ['a', 'b'], default='a', key='g')\n",
    "pills": "st.pills('P', ['a', 'b', 'c'], selection_mode='multi', default=['a'], key='p')\n",
    "select slider 96 steps": ("st.select_slider('H', [h / 4 for h in range(96)], 9.0, key='h', "
                                "format_func=lambda h: f'{int(h):02d}:{int(h % 1 * 60):02d}')\n"),
    "file uploader": "st.file_uploader('F', type=['csv'], key='f')\n",
    "toggle": "st.toggle('T', key='t')\n",
    "tabs": "st.tabs(['a', 'b', 'c'])\n",

    "slider": "st.slider('x', 0.0, 1.0, 0.3)\n",
    "number input": "st.number_input('n', 1, 100, 8)\n",
}
PAGE_MARKS_JS = """
window.__marks = {};
const mark = k => { if (!(k in window.__marks)) window.__marks[k] = performance.now(); };
new MutationObserver(() => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (app && app.dataset.testScriptState === 'running') { window.__ran = true; mark('script started'); }
  if (app && window.__ran && app.dataset.testScriptState === 'notRunning') mark('script done');
  if (document.querySelector('.js-plotly-plot .main-svg')) mark('first chart drawn');
}).observe(document, {subtree: true, childList: true, attributes: true});
"""
LAST_RESPONSE_JS = ("() => Math.max(...performance.getEntriesByType('resource').map(r => r.responseEnd))")


def _serve(script: Path, cwd: Path) -> tuple[str, subprocess.Popen]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(script), "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true",
         "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
        cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url, proc)
    return url, proc


def _open(browser, url: str, *, chart: bool) -> tuple[float, dict[str, float]]:
    """Seconds to a settled first render in a fresh context, and when its parts arrived (ms)."""
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    context.add_init_script(PAGE_MARKS_JS)
    page = context.new_page()
    try:
        elapsed = first_render_s(page, url, chart=chart, timeout_ms=120_000)
        marks = page.evaluate("() => window.__marks")
        marks["last response"] = page.evaluate(LAST_RESPONSE_JS)
        return elapsed, marks
    finally:
        context.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="rounds of fresh tabs (median shown)")
    ap.add_argument("--only", default="", help="comma-separated element names (the floor always)")
    ap.add_argument("--pages", default="", help="comma-separated app pages to time too, on the sample")
    ap.add_argument("--base", default="",
                    help="another checkout of the app (e.g. a git worktree of the commit before a change): "
                         "its --pages are timed too, in the same rounds, as 'base <page>'")
    args = ap.parse_args(argv)
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} missing: apt-get install chromium", file=sys.stderr)
        return 2
    names = ["floor"] + [n for n in (args.only.split(",") if args.only else ELEMENTS) if n and n != "floor"]
    unknown = [n for n in names if n not in ELEMENTS]
    if unknown:
        print(f"unknown elements {unknown}; known: {', '.join(ELEMENTS)}", file=sys.stderr)
        return 2
    pages = [p for p in args.pages.split(",") if p]
    tmp = Path(tempfile.mkdtemp(prefix="tidelens-elements-"))
    urls: dict[str, tuple[str, bool]] = {}
    procs: list[subprocess.Popen] = []
    try:
        for i, name in enumerate(names):
            script = tmp / f"app{i}.py"
            script.write_text(HEAD + ELEMENTS[name] + CHART)
            url, proc = _serve(script, tmp)
            procs.append(proc)
            urls[name] = (url, True)
        if pages:
            from analytics.sample import ensure_default_store

            ensure_default_store()
            roots = [("", ROOT)] + ([("base ", Path(args.base).resolve())] if args.base else [])
            for prefix, root in roots:
                # serve.py where the checkout has it (the app as ``make run`` serves it)
                entry = root / "serve.py" if (root / "serve.py").exists() else root / "app.py"
                url, proc = _serve(entry, root)
                procs.append(proc)
                urls.update({f"{prefix}page {p}": (f"{url}/{p}", p == "overview") for p in pages})
        from playwright.sync_api import sync_playwright

        times: dict[str, list[float]] = {n: [] for n in urls}
        marks: dict[str, list[dict[str, float]]] = {n: [] for n in urls}
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for name, (url, chart) in urls.items():  # warm the servers' own caches
                _open(browser, url, chart=chart)
            for _ in range(args.repeat):
                for name, (url, chart) in urls.items():
                    secs, m = _open(browser, url, chart=chart)
                    times[name].append(secs)
                    marks[name].append(m)
            browser.close()
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=15)
    floor = statistics.median(times["floor"])
    print(f"a new tab's first render, median of {args.repeat} rounds (fresh browser context each):")
    print(f"{'element (with the floor chart)':<32} {'s':>6} {'+s':>6} {'x floor':>8}")
    for name in urls:
        med = statistics.median(times[name])
        print(f"{name:<32} {med:6.2f} {med - floor:+6.2f} {med / floor:8.2f}")
    print("when the parts arrived, ms from navigation (median):")
    keys = ("script started", "script done", "last response", "first chart drawn")
    print(f"{'':<32} " + " ".join(f"{k:>17}" for k in keys))
    for name in ["floor", *(n for n in urls if "page " in n)]:
        row = [statistics.median([m[k] for m in marks[name] if k in m] or [float("nan")]) for k in keys]
        print(f"{name:<32} " + " ".join(f"{v:17.0f}" for v in row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
