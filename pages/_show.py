"""How a page shows things: a row of KPIs that wraps, a table made safe to draw and download,
and a chart with its CSV/SVG export.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
import polars as pl
import streamlit as st

from analytics.charts import PLOTLY_CONFIG, figure_image
from analytics.text import escape_figure, md, safe_csv, safe_table


def kpi_row(n: int) -> list[Any]:
    """``n`` slots for KPIs in one row that wraps on a narrow screen (a 1280x720 projector cut
    five fixed columns' labels and values with an ellipsis); ``row[i].metric(...)`` as columns."""
    row = st.container(horizontal=True, wrap=True)
    return [row] * n


# -- tables ---------------------------------------------------------------------------------
def show_table(frame: Any, *, where: Any = None, **kwargs: Any) -> Any:
    """``st.dataframe`` of a frame made safe to draw and to download (its own CSV button):
    controls shown escaped, formula-like cells neutralised (analytics.text.safe_table)."""
    if not isinstance(frame, pl.DataFrame):
        frame = pl.DataFrame(frame)
    kwargs.setdefault("hide_index", True)
    kwargs.setdefault("width", "stretch")
    return (where or st).dataframe(safe_table(frame), **kwargs)


def show_table_with_notes(frame: pl.DataFrame, *, label: str, note: str, label_if_empty: str = "",
                          **kwargs: Any) -> None:
    """``show_table`` without the ``note`` column (one sentence a row), and those sentences as a
    list under it, each after its row's ``label``: a list wraps on a projector, where a table
    cut a sentence at its column's width."""
    show_table(frame, column_order=[c for c in frame.columns if c != note], **kwargs)
    st.markdown("\n".join(f"- **{md(row[label] or label_if_empty)}**: {md(row[note])}"
                           for row in frame.iter_rows(named=True)))


# -- charts ---------------------------------------------------------------------------------
def show_chart(fig: go.Figure, data: pl.DataFrame, name: str) -> None:
    """A chart with the toolbar's PNG export, and an Export menu: its data as CSV, the figure as SVG.

    ``theme=None`` keeps the Tidelens template (large type, class colours) instead of
    Streamlit's. The menu's buttons are drawn only once it is opened, and the CSV and SVG are
    made only when their button is clicked: a page's first render pays for neither.
    """
    fig = escape_figure(fig)  # trace names, hover text and custom data come from labels
    data = safe_csv(data)  # no cell a spreadsheet would run
    st.plotly_chart(fig, theme=None, key=f"chart_{name}", config=PLOTLY_CONFIG | {
        "toImageButtonOptions": {"format": "png", "scale": 2, "filename": f"tidelens-{name}"}})
    menu = st.popover("Export", icon=":material/download:", key=f"export_{name}",
                      on_change="rerun", type="tertiary",
                      help="This chart's data as CSV, or the chart as an SVG image")
    if not menu.open:
        return
    with menu:
        st.download_button("CSV", data=lambda: data.write_csv(), file_name=f"tidelens-{name}.csv",
                           mime="text/csv", key=f"csv_{name}", on_click="ignore",
                           icon=":material/table:", help="The data behind this chart")
        st.download_button("SVG", data=lambda: figure_image(fig, "svg"),
                           file_name=f"tidelens-{name}.svg", mime="image/svg+xml",
                           key=f"svg_{name}", on_click="ignore", icon=":material/image:",
                           help="This chart as a vector image (rendered on the server)")
