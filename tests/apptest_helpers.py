"""What the page tests share: an app isolated from the user's files, a page opened from a link,
and reading a metric by its label."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import re

# A CommonMark code span: a run of backticks, text, the same run (not part of a longer run).
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
APP = Path(__file__).resolve().parent.parent / "app.py"


def isolate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Point the uploads store and ``tidelens.toml`` at a test's own folder."""
    monkeypatch.setenv("TIDELENS_UPLOADS_DB", str(tmp_path / "uploads.duckdb"))
    monkeypatch.setenv("TIDELENS_CONFIG", str(tmp_path / "tidelens.toml"))


def open_page(page: str, tmp_path: Path, **params: str) -> AppTest:
    """Run ``page`` as a link with ``params`` would, with no store (a missing DuckDB file)."""
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.query_params.update({"source": "duckdb", "db": str(tmp_path / "none.duckdb"), **params})
    at.run()
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def open_store_page(page: str, db: Path, tab: str | None = None) -> AppTest:
    """Run ``page`` on the DuckDB store ``db`` (created on first write), on the Data page's
    ``tab`` ("Your own table", ...) when given."""
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.query_params.update({"source": "duckdb", "db": str(db)})
    at.run()
    at.switch_page(page).run()
    if tab is not None:
        at.session_state["data_add"] = tab
        at.run()
    return at


def open_store_link(db: Path, page: str, **params: str) -> AppTest:
    """Run ``page`` as a link to the DuckDB store ``db`` with ``params`` would, no exception
    allowed: what the cross-page agreement tests open."""
    at = AppTest.from_file(str(APP), default_timeout=240)
    at.query_params.update({"source": "duckdb", "db": str(db), **params})
    at.run()
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def metric(at: AppTest, label: str) -> str:
    for m in at.metric:
        if m.label == label:
            return m.value
    raise AssertionError(f"no metric {label!r}: {[m.label for m in at.metric]}")


def open_settings(at: AppTest) -> AppTest:
    """Open the sidebar's "View settings" panel (it runs its widgets only when open)."""
    at.session_state["v_open"] = True
    return at.run()


def shown(markdown: str) -> str:
    """What a reader sees of a Markdown element's source: backslash escapes and the entities
    ``analytics.text.md`` writes undone (AppTest gives the source)."""
    import re

    def plain(text: str) -> str:
        text = re.sub(r"\\(.)", r"\1", text)
        return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")

    out, pos = [], 0
    for m in CODE_SPAN.finditer(markdown):  # a code span shows its characters as they are
        inner = m.group(2)
        if len(inner) > 1 and inner.startswith(" ") and inner.endswith(" "):
            inner = inner[1:-1]
        out += [plain(markdown[pos:m.start()]), inner]
        pos = m.end()
    return "".join(out) + plain(markdown[pos:])


def outside_code(markdown: str) -> str:
    """``markdown`` with its code spans removed (their text is never a link or an image)."""
    return CODE_SPAN.sub(" ", markdown)


def sidebar_summary(at: AppTest) -> str:
    """The one line above the settings panel that names the view, as the reader sees it."""
    return shown(at.sidebar.caption[0].value)


def morning_store(path: Path) -> Path:
    """Three weekdays of the simulator's morning story on 64 GPUs (seed 7) in a store file: the
    store the cross-page and cross-command agreement tests read."""
    from analytics.sample import load_into, simulate
    from analytics.store import Store

    with Store(path) as st:
        load_into(st, simulate("morning", days=3, gpus=64, seed=7))
    return path


def isolated_cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """:func:`isolate`, run from an empty folder: no ./tidelens.toml for the CLI either."""
    isolate(monkeypatch, tmp_path)
    monkeypatch.chdir(tmp_path)


def click_option(widget, i: int):
    """``widget`` (AppTest's radio or select slider) with its ``i``-th option picked, as a click
    picks it: the browser sends the option's text. AppTest sets these by value only, and a page's
    values are not always known to a test (an event's id); run the app after."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    def state(self) -> WidgetState:
        ws = WidgetState()
        ws.id = self.id
        if self.type == "radio":
            ws.string_value = self.options[i]
        else:
            ws.string_array_value.data[:] = [self.options[i]]
        return ws

    cls = type(widget)
    widget.__class__ = type(cls.__name__, (cls,), {"_widget_state": property(state)})
    return widget


def event_chooser(at: AppTest):
    """The Tail events page's chooser (``ev_chosen``): a radio of a few events, a slider through dozens."""
    for w in [*at.radio, *at.select_slider]:
        if w.key == "ev_chosen":
            return w
    raise AssertionError("the page draws no event chooser")


# The frames the pages' tables were drawn from, by table key (the latest drawing of each): the
# browser gets only the drawn text, and a test reads the values the text was made from here.
_FRAMES: dict[str, tuple[object, list]] = {}


def _record_table_frames() -> None:
    import pages._show as show

    if getattr(show.table_html, "_recorded", False):
        return
    real = show.table_html

    def recorded(frame, shown, *, key, **kw):
        _FRAMES[key] = (frame, shown)
        return real(frame, shown, key=key, **kw)

    recorded._recorded = True  # type: ignore[attr-defined]
    show.table_html = recorded


_record_table_frames()


def _own_value(x):
    """A cell's own value as the tests compare it: numbers and text as they are, times ISO."""
    from datetime import date, datetime

    from pages._show import _scalar

    x = _scalar(x)
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    return x.isoformat() if isinstance(x, (datetime, date)) else str(x)


class DrawnTable:
    """A table a page drew (``pages/_show.show_table``: one HTML table), read back from AppTest.

    ``value`` holds each cell's own value under its header (from the frame the table was drawn
    from), as ``at.table[i].value`` did; ``drawn`` what the table shows, as text under the same
    headers; ``key`` the table's key.
    """

    def __init__(self, body: str) -> None:
        from html.parser import HTMLParser

        import pandas as pd

        cols: list[str] = []
        headers: list[str] = []
        rows: list[list[tuple[object, str]]] = []
        found: dict[str, str] = {}

        class _Read(HTMLParser):
            cell: tuple[object, list[str]] | None = None
            head: list[str] | None = None

            def handle_starttag(self, tag, attrs):
                a = dict(attrs)
                if tag == "div" and "data-key" in a:
                    found["key"] = a["data-key"] or ""
                elif tag == "th":
                    cols.append(a.get("data-col") or "")
                    self.head = []
                elif tag == "tr" and self.head is None and cols:
                    rows.append([])
                elif tag == "td":
                    self.cell = (None, [])

            def handle_endtag(self, tag):
                if tag == "th" and self.head is not None:
                    headers.append("".join(self.head))
                    self.head = None
                elif tag == "td" and self.cell is not None:
                    rows[-1].append((self.cell[0], "".join(self.cell[1])))
                    self.cell = None

            def handle_data(self, data):
                if self.cell is not None:
                    self.cell[1].append(data)
                elif self.head is not None:
                    self.head.append(data)

        _Read(convert_charrefs=True).feed(body)
        self.key = found.get("key", "")
        self.drawn = pd.DataFrame([[t for _, t in r] for r in rows if r], columns=headers)
        frame, shown = _FRAMES[self.key]
        values = [[_own_value(row[c]) for c, *_ in shown] for row in frame.iter_rows(named=True)]
        assert len(values) == len(self.drawn), f"table {self.key!r}: drawn and recorded frames differ"
        self.value = pd.DataFrame(values, columns=headers)


def tables(at) -> list[DrawnTable]:
    """Every table the run drew (``show_table``'s HTML tables), in order."""
    return [DrawnTable(h.proto.body) for h in at.get("html") if 'class="tl-table' in h.proto.body]


def drawn_table(table: DrawnTable):
    """What a table draws, as a frame of text under its headers (``.value`` holds the values)."""
    return table.drawn


def drawn_cells(table) -> list[str]:
    """A static table's headers and drawn cells, as a list of text (see :func:`drawn_table`)."""
    drawn = drawn_table(table)
    return [str(c) for c in drawn.columns] + [str(x) for x in drawn.to_numpy().ravel()]


def map_pod_duty_cycle(at: AppTest) -> None:
    """Fill the Data page's mapping form for a pod-level duty-cycle table (``container_ip``, a
    percentage) as a user does: the pod column, the signal and its scale, one GPU per pod; then load."""
    at.text_input(key="map_renames").set_value("container_ip:pod").run()
    at.selectbox(key="map_sig_0").set_value("DCGM_FI_PROF_GR_ENGINE_ACTIVE")
    at.number_input(key="map_scale_0").set_value(0.01).run()
    at.radio(key="map_device").set_value("one GPU per pod").run()
    at.button(key="map_load_go").click().run()
    assert not at.exception, [e.value for e in at.exception]
