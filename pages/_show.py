"""How a page shows things: a row of KPIs that wraps, a table made safe to draw and download,
and a chart with its CSV/SVG export.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Any, Callable
from zoneinfo import ZoneInfo

import pandas as pd
import plotly.graph_objects as go
import polars as pl
import streamlit as st

from analytics.charts import PLOTLY_CONFIG, figure_image
from analytics.text import escape_figure, html_text, md, safe_csv, safe_table
from analytics.units import number_text
from pages._caches import memo


def kpi_row(n: int) -> list[Any]:
    """``n`` slots for KPIs in one row that wraps on a narrow screen (a 1280x720 projector cut
    five fixed columns' labels and values with an ellipsis); ``row[i].metric(...)`` as columns."""
    row = st.container(horizontal=True, wrap=True)
    return [row] * n


# -- tables ---------------------------------------------------------------------------------
# A first render affords no interactive grid: ``st.dataframe`` alone adds ~0.7 s to a new tab,
# ``st.table`` 0.1-0.3 s (each of its cells is a Markdown element), the same rows as one escaped
# HTML table nothing measurable (bench/elements.py). Tables are static HTML, formatted as the
# column_config asks, their rows beyond this many in the CSV (and in a grid drawn only when asked for).
TABLE_ROWS = 25
GRID_WIDTH_PX = 1000  # the whole table's grid, in its menu (a 1280x720 projector's page is ~1150 px)
# Streamlit's moment.js date tokens, as strftime's.
_MOMENT = (("YYYY", "%Y"), ("MM", "%m"), ("DD", "%d"), ("HH", "%H"), ("mm", "%M"), ("ss", "%S"))
_PRINTF = re.compile(r"%([,+ 0-9]*)(\.\d+)?([dfieEgGs%])")
# The table's look, Streamlit's static table's: the theme's font, thin rules, numbers to the right.
TABLE_CSS = (".tl-table{overflow-x:auto;margin-bottom:.25rem}"
             ".tl-table table{border-collapse:collapse;font-size:.875em;color:inherit}"
             ".tl-table.tl-stretch table{width:100%}"
             ".tl-table th,.tl-table td{border-bottom:1px solid rgba(49,51,63,.1);padding:.25rem .5rem;"
             "text-align:left;vertical-align:top;overflow-wrap:normal}"
             ".tl-table th{font-weight:600;color:rgba(49,51,63,.75);border-bottom-width:2px}"
             ".tl-table td.tl-num,.tl-table th.tl-num{text-align:right;font-variant-numeric:tabular-nums}"
             ".tl-table td.tl-num{white-space:nowrap}")


def _printf(fmt: str, x: Any) -> str:
    """A number in Streamlit's printf-like column format (``%,.0f``, ``$%,.0f``, ``%d GPUs``).

    >>> _printf("$%,.0f", 1234.5), _printf("%d GPUs", 3.0), _printf("%.1f%%", 12.34)
    ('$1,234', '3 GPUs', '12.3%')
    """
    def one(m: re.Match) -> str:
        flags, prec, kind = m.group(1), m.group(2) or "", m.group(3)
        if kind == "%":
            return "%"
        comma = "," if "," in flags else ""
        rest = flags.replace(",", "")
        if kind in "diu":
            return format(int(round(x)), f"{rest}{comma}d")
        if kind == "s":
            return str(x)
        return format(x, f"{rest}{comma}{prec}{kind}")
    return _PRINTF.sub(one, fmt)


def _number_text(x: Any, fmt: str | None) -> str:
    """A number as ``st.dataframe`` shows it under ``fmt``; with none, a fraction as a meeting
    reads it (:func:`analytics.units.number_text`: ``4,371``, ``87.4``), never ``4371.1479``."""
    if fmt in (None, ""):
        return str(x) if isinstance(x, int) else number_text(x)
    if fmt == "plain":
        return str(x) if isinstance(x, int) else f"{x:.4f}".rstrip("0").rstrip(".")
    if fmt == "dollar":
        return f"${x:,.2f}"
    if fmt == "euro":
        return f"€{x:,.2f}"
    if fmt == "percent":
        return f"{x:.2%}"
    if fmt == "localized":
        return f"{x:,}" if isinstance(x, int) else f"{x:,.4f}".rstrip("0").rstrip(".")
    if fmt == "compact":
        for div, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
            if abs(x) >= div:
                return f"{x / div:.1f}{unit}"
        return f"{x:g}"
    if fmt == "scientific":
        return f"{x:.3E}"
    return _printf(fmt, x)


def _scalar(x: Any) -> Any:
    """A cell as a Python value: numpy's scalars as Python's, every kind of missing as None."""
    if hasattr(x, "item") and not isinstance(x, datetime):
        x = x.item()
    if x is None or (isinstance(x, float) and x != x) or x is pd.NaT or x is pd.NA:
        return None
    return x


def _cell_text(x: Any, kind: str, cfg: dict[str, Any]) -> str:
    """One cell's text as the table draws it, formatted as its column asks (escaped by the caller)."""
    x = _scalar(x)
    if x is None:
        return ""
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, (int, float)):
        return _number_text(x, cfg.get("format") if kind == "number" else None)
    if isinstance(x, datetime):
        zone = cfg.get("timezone") if kind in ("datetime", "date", "time") else None
        if zone and x.tzinfo is not None:
            x = x.astimezone(ZoneInfo(zone))
        fmt = cfg.get("format") if kind in ("datetime", "date", "time") else None
        for token, code_ in _MOMENT:
            fmt = fmt.replace(token, code_) if fmt else fmt
        return x.strftime(fmt or "%Y-%m-%d %H:%M:%S")
    if isinstance(x, date):
        return x.isoformat()
    return str(x)


def table_html(frame: pl.DataFrame, shown: list[tuple[str, str, str, dict[str, Any], str | None]],
               *, key: str, stretch: bool = True) -> str:
    """``frame``'s ``shown`` columns as one HTML table, every header and cell escaped; only the
    text it draws goes to the browser.

    >>> html = table_html(pl.DataFrame({"pod": ["<b>x</b>"], "gpus": [2.5]}),
    ...                   [("pod", "pod", "", {}, None), ("gpus", "GPUs", "number", {"format": "%.0f"}, None)],
    ...                   key="k")
    >>> "&lt;b&gt;x&lt;/b&gt;" in html and ">2</td>" in html and "2.5" not in html
    True
    """
    esc = html_text
    numeric = {c: frame.schema[c].is_numeric() for c, *_ in shown}
    head = "".join("<th" + (' class="tl-num"' if numeric[c] else "")
                   + (f' title="{esc(help_)}"' if help_ else "") + f">{esc(h)}</th>"
                   for c, h, _k, _cfg, help_ in shown)
    rows = []
    for row in frame.iter_rows(named=True):
        rows.append("<tr>" + "".join(
            "<td" + (' class="tl-num"' if numeric[c] else "")
            + f">{esc(_cell_text(row[c], kind, cfg))}</td>" for c, _h, kind, cfg, _help in shown) + "</tr>")
    return (f"<style>{TABLE_CSS}</style>"
            f'<div class="tl-table{" tl-stretch" if stretch else ""}" data-key="{esc(key)}">'
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")


def _columns(frame: pl.DataFrame, column_config: dict[str, Any] | None,
             column_order: Any) -> list[tuple[str, str, str, dict[str, Any], str | None]]:
    """``(column, header, kind, type config, help)`` of each column shown, in order."""
    out = []
    for name in column_order or frame.columns:
        spec = (column_config or {}).get(name)
        if isinstance(spec, str) or spec is None:
            out.append((name, spec or name, "", {}, None))
        else:
            type_config = dict(spec.get("type_config") or {})
            out.append((name, spec.get("label") or name, str(type_config.get("type") or ""), type_config,
                        spec.get("help")))
    return out


def show_table(frame: Any, *, key: str, where: Any = None, column_order: Any = None,
               column_config: dict[str, Any] | None = None, rows: int = TABLE_ROWS,
               width: Any = "stretch", every_rows: bool = True) -> None:
    """A static HTML table of a frame made safe to draw and to download: controls shown escaped,
    formula-like cells neutralised (analytics.text.safe_table), every header and cell HTML-escaped;
    numbers and times formatted as ``column_config`` says, only ``column_order``'s columns.

    What it draws are the formatted cells (:func:`table_html`). Beyond ``rows`` rows it draws the first ones and says how
    many more the CSV holds, and (with ``every_rows``) a menu draws them all in a grid when opened.
    The CSV (every column and row) sits in a lazy Export menu, like a chart's: made on the click.
    """
    if not isinstance(frame, pl.DataFrame):
        frame = pl.DataFrame(frame)
    frame = safe_table(frame)
    where = where or st
    shown = _columns(frame, column_config, column_order)
    where.html(table_html(frame.head(rows), shown, key=key, stretch=width == "stretch"))
    helps = [(h, help_) for _, h, _k, _c, help_ in shown if help_]
    bar = where.container(horizontal=True, gap="small", vertical_alignment="center")
    if frame.height > rows:
        bar.caption(f"{frame.height - rows:,} more rows in the CSV")
        if every_rows:  # the whole table in a grid, drawn only once opened (also inside a panel)
            every = bar.popover(f"All {frame.height:,} rows", icon=":material/table_rows:", key=f"rows_{key}",
                                on_change="rerun", type="tertiary", help="Every row, to sort and search")
            if every.open:
                every.dataframe(frame, hide_index=True, width=GRID_WIDTH_PX, column_config=column_config,
                                column_order=column_order)
    # One menu: what each column counts (also each header's tooltip) and the CSV. A popover
    # each cost a new tab ~0.04 s a table (bench/elements.py --base).
    menu = bar.popover("Columns and CSV" if helps else "Export", icon=":material/download:", key=f"export_{key}",
                       on_change="rerun", type="tertiary",
                       help="What each column counts, and this table's data as CSV" if helps
                       else "This table's data as CSV")
    if menu.open:
        if helps:
            menu.markdown("\n".join(f"- **{md(h)}**: {md(text)}" for h, text in helps))
        data = safe_csv(frame)
        menu.download_button("CSV", data=lambda: data.write_csv(), file_name=f"tidelens-{key}.csv",
                             mime="text/csv", key=f"csv_{key}", on_click="ignore",
                             icon=":material/table:", help="Every row and column of this table")


def show_table_with_notes(frame: pl.DataFrame, *, label: str, note: str, label_if_empty: str = "",
                          **kwargs: Any) -> None:
    """``show_table`` without the ``note`` column (one sentence a row), and those sentences as a
    list under it, each after its row's ``label``: a list wraps on a projector, where a table
    cut a sentence at its column's width."""
    show_table(frame, column_order=[c for c in frame.columns if c != note], **kwargs)
    st.markdown("\n".join(f"- **{md(row[label] or label_if_empty)}**: {md(row[note])}"
                           for row in frame.iter_rows(named=True)))


# -- charts ---------------------------------------------------------------------------------
def show_chart(fig: go.Figure | Callable[[], go.Figure], data: pl.DataFrame | Callable[[], pl.DataFrame],
               name: str, *, memo_key: Any = None) -> None:
    """A chart with the toolbar's PNG export, and an Export menu: its data as CSV, the figure as SVG.

    ``theme=None`` keeps the Tidelens template (large type, class colours) instead of
    Streamlit's. The menu's buttons are drawn only once it is opened, and the CSV and SVG are
    made only when their button is clicked: a page's first render pays for neither. ``data`` may
    be a function that makes it (called only then). With ``memo_key`` (everything the figure
    depends on), ``fig`` is a function that builds it, called once per key for every session
    (pages._caches.memo): a run that builds no figure sends its elements in one burst.
    """
    if memo_key is not None:
        build = fig
        fig = memo(("chart", name, memo_key), lambda: escape_figure(build()))  # type: ignore[operator]
    elif callable(fig):
        fig = fig()
    fig = escape_figure(fig)  # trace names, hover text and custom data come from labels
    st.plotly_chart(fig, theme=None, key=f"chart_{name}", config=PLOTLY_CONFIG | {
        "toImageButtonOptions": {"format": "png", "scale": 2, "filename": f"tidelens-{name}"}})
    menu = st.popover("Export", icon=":material/download:", key=f"export_{name}",
                      on_change="rerun", type="tertiary",
                      help="This chart's data as CSV, or the chart as an SVG image")
    if not menu.open:
        return
    table = safe_csv(data() if callable(data) else data)  # no cell a spreadsheet would run
    with menu:
        st.download_button("CSV", data=lambda: table.write_csv(), file_name=f"tidelens-{name}.csv",
                           mime="text/csv", key=f"csv_{name}", on_click="ignore",
                           icon=":material/table:", help="The data behind this chart")
        st.download_button("SVG", data=lambda: figure_image(fig, "svg"),
                           file_name=f"tidelens-{name}.svg", mime="image/svg+xml",
                           key=f"svg_{name}", on_click="ignore", icon=":material/image:",
                           help="This chart as a vector image (rendered on the server)")


# -- choices --------------------------------------------------------------------------------
def choose(label: str, options: Any, *, key: str, where: Any = None, format_func: Any = str,
           widget: str = "segmented", default: Any = None, horizontal: bool = True,
           height: int | None = None, help: str | None = None) -> Any:
    """One of ``options`` under ``key``: a segmented control (``widget="segmented"``), pills
    (``"pills"``, which wrap) or a radio (``"radio"``; in a box ``height`` px tall that scrolls,
    when given): what a first render affords, where a selectbox adds ~0.6 s to a new tab
    (bench/elements.py). The value is kept in session state under ``key`` (links seed it).

    Never None: a value that is not an option (none yet, a stale one) becomes ``default``, else
    the first option, and a control cannot be deselected. The options' text is escaped: these
    widgets draw it as Markdown, and labels are data.
    """
    ss = st.session_state
    options = list(options)
    fallback = default if default in options else options[0]
    if ss.get(key) not in options:
        ss[key] = fallback
    where = where or st
    shown = lambda o: md(format_func(o))  # noqa: E731
    if widget in ("segmented", "pills"):
        draw = where.segmented_control if widget == "segmented" else where.pills
        value = draw(label, options, key=key, format_func=shown, required=True, help=help, wrap=True)
    else:
        box = where.container(height=height) if height else where
        value = box.radio(label, options, key=key, format_func=shown, horizontal=horizontal, help=help)
    return fallback if value is None else value


# -- work that takes seconds ------------------------------------------------------------------
def made_download(label: str, *, key: str, inputs: Any, make: Callable[[Callable[[str], None]], Any],
                  what: str, file_name: str, mime: str, help: str, where: Any = None) -> None:
    """A file that takes seconds to make (the capacity review, a postmortem): a button that makes
    it in the run, a status above the page saying its stage while it does (``make`` hears each
    stage's words), then the file's download button in the button's place, kept while ``inputs``
    (everything the file depends on) hold.

    A deferred download made the file on the click with no sign of it for 10-24 s on a cold
    server, and people clicked again.
    """
    ss = st.session_state
    where = where or st
    made = ss.get(f"{key}_made")
    if made is not None and made[0] == inputs:
        where.download_button(f"Download: {label}", data=made[1], file_name=file_name, mime=mime, key=key,
                              on_click="ignore", icon=":material/download:", width="content", help=help)
        return
    if not where.button(label, key=f"{key}_make", icon=":material/description:", width="content",
                        help=f"{help} (made on the click, its progress shown; then a download)"):
        return
    slot = st.empty()
    with slot.status(f"{md(what)}: starting", expanded=False) as box:  # a label is Markdown; names are data
        data = make(lambda words: box.update(label=f"{md(what)}: {md(words)}"))
        box.update(label=f"{md(what)}: ready", state="complete")
    ss[f"{key}_made"] = (inputs, data)
    st.rerun()  # the download button in the button's place


def with_status(what: str, work: Callable[[Callable[[str], None]], Any]) -> Any:
    """``work``'s result, with a status saying its stage while it runs (``work`` hears each
    stage's words); the status goes once it is done."""
    slot = st.empty()
    with slot.status(f"{md(what)}: starting", expanded=False) as box:  # a label is Markdown; names are data
        out = work(lambda words: box.update(label=f"{md(what)}: {md(words)}"))
    slot.empty()
    return out
