"""Hostile label values are text wherever they are drawn: pages' Markdown, Plotly, CSV exports.

A store whose service, namespace (team) and pod names are a Markdown image, a Markdown link, an
HTML tag, a spreadsheet formula and an RTL override is opened on every page through AppTest:
no Markdown element's source holds an unescaped image or link, no figure's data holds a tag,
and each label is still there as text. The CSV rules are checked on the exports' own frames.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest
from streamlit.testing.v1 import AppTest

from apptest_helpers import drawn_cells, isolate, outside_code, shown, tables

from analytics.ingest import ingest_bytes
from analytics.signals import HTTP_DURATION_BUCKETS_S
from analytics.store import Store
from analytics.text import csv_cell, escape_figure, md, plot_text, safe_csv

APP = Path(__file__).resolve().parent.parent / "app.py"
SERVICE = "chat![s](http://127.0.0.1:9/px.png)"
TEAM = "[teamlink](http://127.0.0.1:9/x)"
FORMULA = '=HYPERLINK("http://evil.example/","pwn")'
RTL = "rec\u202eommender<b>x</b>"
T0 = 1_764_316_800_000


def _esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"')


def hostile_scrapes(minutes: int = 240) -> bytes:
    """Four hours of a 4-GPU node: an http service (hostile name) on 2 GPUs in a hostile
    namespace, a batch job of a formula-named namespace on 2; p99 breaks 100 ms for an hour."""
    out = []
    bounds = HTTP_DURATION_BUCKETS_S
    counts = [0] * (len(bounds) + 1)
    for m in range(minutes):
        ts = T0 + m * 60_000
        holders = [(TEAM, f"{RTL}-7d9f8b6c5d-x2x4z"), (TEAM, f"{RTL}-7d9f8b6c5d-k9m2p"),
                   (FORMULA, "train-llm-0"), (FORMULA, "train-llm-1")]
        for g, (ns, pod) in enumerate(holders):
            lab = (f'gpu="{g}",UUID="GPU-{g}",Hostname="n1",pod="{_esc(pod)}",namespace="{_esc(ns)}",'
                   f'job="dcgm-exporter"')
            out.append(f"DCGM_FI_DEV_GPU_UTIL{{{lab}}} {40 if g < 2 else 97} {ts}")
        slow = 120 <= m < 180
        per_min = 600
        for i, le in enumerate(bounds):
            fast_le = 0.04 <= le
            counts[i] += (per_min - (40 if slow else 3)) * fast_le + (40 if slow else 3) * (le >= (0.4 if slow else 0.08))
        counts[-1] += per_min
        base = f'service="{_esc(SERVICE)}",namespace="{_esc(TEAM)}",pod="{_esc(RTL)}-7d9f8b6c5d-x2x4z"'
        for le, c in zip((*bounds, "+Inf"), counts):
            out.append(f'http_server_request_duration_seconds_bucket{{{base},le="{le}"}} {c} {ts}')
        out.append(f"http_server_request_duration_seconds_count{{{base}}} {counts[-1]} {ts}")
    return ("\n".join(out) + "\n").encode()


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("hostile") / "hostile.duckdb"
    with Store(path) as st:
        assert ingest_bytes(st, "hostile.prom", hostile_scrapes()).status == "loaded"
    return path


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate(monkeypatch, tmp_path)


UNSAFE = (re.compile(r"(?<!\\)!\\?\[[^\]]*\]\("), re.compile(r"(?<!\\)\]\((?:http|//)"), re.compile(r"<(?:img|a|b|iframe)\b"))


def _markdown_sources(at: AppTest) -> list[str]:
    out = []
    for kind in ("markdown", "caption", "title", "subheader", "header", "error", "warning", "info", "success"):
        out += [e.value for e in getattr(at, kind)]
    for m in at.metric:
        out += [m.label, str(m.value), m.help or ""]
    return out


@pytest.mark.parametrize("page", ["pages/overview.py", "pages/events.py", "pages/data.py", "pages/rhythm.py",
                                  "pages/whatif.py", "pages/chargeback.py"])
def test_every_page_shows_hostile_labels_as_text(db: Path, page: str) -> None:
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.query_params.update({"source": "duckdb", "db": str(db), "w_src": "store"})
    at.run()
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    texts = _markdown_sources(at)
    drawn = [o for w in [*at.radio, *at.pills, *at.segmented_control] for o in w.options]  # options are Markdown
    # Tables are HTML (pages/_show.table_html): every label in them escaped, so none is a tag.
    for body in [h.proto.body for h in at.get("html")]:
        assert not re.search(r"<(?:img|a|b|iframe|script|svg)\b", body), (page, body[:300])
    table_text = [c for t in tables(at) for c in drawn_cells(t)]
    for text in texts + drawn:
        for rx in UNSAFE:
            assert not rx.search(outside_code(text)), (page, text)
    for chart in at.get("plotly_chart"):
        spec = chart.proto.spec if hasattr(chart.proto, "spec") else ""
        assert "<img" not in spec and "href=" not in spec and "<b>x</b>" not in spec, page
    assert not at.dataframe, page  # a first render draws static tables only
    cells = " ".join(df.value.astype(str).to_csv() for df in tables(at))
    assert "\u202e" not in cells + " ".join(drawn + table_text), page  # the RTL override shown as an escape
    if page == "pages/data.py":  # the label inventory and the workload map hold the pod's name
        assert "rec\\u202eommender<b>x</b>" in cells, page
        assert any("rec\\u202eommender<b>x</b>" in c for c in table_text), page  # drawn as text
    if page == "pages/events.py":
        heading = " ".join(shown(t) for t in texts)
        assert SERVICE in heading  # the name itself, readable


def test_text_rules() -> None:
    # A label holding a URL becomes a code span (Streamlit links bare URLs even when escaped).
    assert md(SERVICE) == f"`{SERVICE}`" and shown(md(SERVICE)) == SERVICE
    assert md("chat![s](px.png)").count("\\[") == 1 and "](" not in md("chat![s](px.png)")
    assert "\\u202e" in md(RTL) and "<b>" not in md(RTL)
    assert plot_text(RTL) == "rec\\u202eommender&lt;b&gt;x&lt;/b&gt;"
    frame = safe_csv(pl.DataFrame({"team": [FORMULA, "+1", "@SUM(A1)", "ok", "-x"], "cost": [1.0, -2.0, 3, 4, 5]}))
    assert frame["team"].to_list() == ["'" + FORMULA, "'+1", "'@SUM(A1)", "ok", "'-x"]
    assert frame["cost"].to_list() == [1.0, -2.0, 3, 4, 5]  # numbers stay numbers
    assert csv_cell("\tTAB") == "'\tTAB" and csv_cell(-1.5) == -1.5


def test_figures_escape_data_text_once() -> None:
    import plotly.graph_objects as go

    fig = go.Figure(go.Scatter(x=[1], y=[1], name=RTL, text=[SERVICE + "<img src=x>"], customdata=[[TEAM + "<a href='y'>"]]))
    escape_figure(escape_figure(fig))
    assert fig.data[0].name == plot_text(RTL)
    assert "<img" not in fig.data[0].text[0] and "&lt;img" in fig.data[0].text[0]
    assert "<a " not in str(fig.data[0].customdata[0][0])
