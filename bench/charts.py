"""Chart draw time in a real browser: every page's Plotly figures against one small chart.

Runs each page of the app on the bundled sample in Streamlit's AppTest, takes the figures it
sends to the browser (the JSON ``st.plotly_chart`` ships), and draws each in a fresh Chromium
tab with the Plotly.js that ships with plotly.py, as the page's first draw does (cold). Prints the
median milliseconds of ``Plotly.newPlot`` (and to the next painted frame), the ratio to the peer
(``go.Figure(go.Scatter(y=[1, 3, 2]))``, the floor of ``bench/app.py``) and whether the figure's
labels pushed a margin past the one it was given: such a figure is laid out and drawn twice
(``analytics.charts.theme.MARGIN_PX``). Figures labelled by category (the Data page's source and
metric names) size their margin from their labels and are listed, not judged.

Usage::

    .venv/bin/python bench/charts.py [--repeat 5] [--pages overview,events]

Exit status 1 when a figure other than a category-labelled one pushed a margin.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

PAGES = ("overview", "rhythm", "events", "whatif", "chargeback", "data")
DRAW_HTML = """<!DOCTYPE html><html><body><div id="g" style="width:1200px"></div>
<script src="plotly.min.js"></script><script>
window.draw = async (fig) => {
  const gd = document.getElementById('g'), t0 = performance.now();
  await Plotly.newPlot(gd, fig.data, fig.layout, {responsive: true, displaylogo: false});
  const t1 = performance.now();
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return {newplot_ms: t1 - t0, painted_ms: performance.now() - t0, pushed: (PUSHED_SIDES)(gd),
          category: gd._fullLayout.yaxis.type === 'category'};
};
</script></body></html>"""


def page_figures(pages: list[str]) -> list[tuple[str, dict]]:
    """(page and index, figure JSON) of every chart each page draws on the sample."""
    from analytics.sample import ensure_default_store
    from apptest_helpers import open_store_page

    db = ensure_default_store()
    out = []
    for page in pages:
        at = open_store_page(f"pages/{page}.py", db)
        for i, chart in enumerate(at.get("plotly_chart")):
            out.append((f"{page}[{i}]", json.loads(chart.proto.spec)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="fresh tabs per figure (median shown)")
    ap.add_argument("--pages", default=",".join(PAGES), help="comma-separated page paths")
    args = ap.parse_args()

    import plotly
    import plotly.graph_objects as go
    from playwright.sync_api import sync_playwright

    from test_browser import CHROMIUM, CHROMIUM_ARGS, PUSHED_SIDES_JS

    tmp = Path(tempfile.mkdtemp())
    os.environ.update(TIDELENS_UPLOADS_DB=str(tmp / "uploads.duckdb"),
                      TIDELENS_CONFIG=str(tmp / "tidelens.toml"), TIDELENS_PREFETCH="0")
    js = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    (tmp / "plotly.min.js").write_bytes(js.read_bytes())
    (tmp / "draw.html").write_text(DRAW_HTML.replace("PUSHED_SIDES", PUSHED_SIDES_JS))
    figures = [("(peer)", json.loads(go.Figure(go.Scatter(y=[1, 3, 2])).to_json()))]
    figures += page_figures(args.pages.split(","))

    results: dict[str, list[dict]] = {name: [] for name, _ in figures}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for _ in range(args.repeat):
            for name, fig in figures:
                page = browser.new_page(viewport={"width": 1600, "height": 1000})
                page.goto((tmp / "draw.html").as_uri())
                results[name].append(page.evaluate("f => window.draw(f)", fig))
                page.close()
        browser.close()

    peer = statistics.median(r["painted_ms"] for r in results["(peer)"])
    print(f"{'figure':16} {'newPlot ms':>10} {'painted ms':>10} {'x peer':>7}  margins")
    failed = 0
    for name, runs in results.items():
        painted = statistics.median(r["painted_ms"] for r in runs)
        pushed = sorted({k for r in runs for k in r["pushed"]})
        note = "given" if not pushed else f"pushed {','.join(pushed)}: drawn twice"
        if pushed and runs[0]["category"]:
            note += " (category labels: sized by them)"
        elif pushed:
            failed += 1
        print(f"{name:16} {statistics.median(r['newplot_ms'] for r in runs):10.0f} {painted:10.0f} "
              f"{painted / peer:7.2f}  {note}")
    print(f"{failed} figure(s) drawn twice because their labels did not fit the margins given")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
