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


def drawn_table(table):
    """What a static table (AppTest's ``at.table[i]``) draws, as a frame of text under its headers:
    its cells formatted (``st.table`` reads them as Markdown); ``.value`` holds the values before."""
    from streamlit import dataframe_util

    return dataframe_util.convert_arrow_bytes_to_pandas_df(table.proto.arrow_data.styler.display_values)


def drawn_cells(table) -> list[str]:
    """A static table's headers and drawn cells, as a list of text (see :func:`drawn_table`)."""
    drawn = drawn_table(table)
    return [str(c) for c in drawn.columns] + [str(x) for x in drawn.to_numpy().ravel()]
