"""The Data page's record of changes: who loaded, pulled, saved a mapping or changed the workload
map, when, and what (:mod:`analytics.audit`, read from the store the page writes into)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from analytics.audit import audit_rows
from analytics.errors import TidelensError
from analytics.text import code, md
from analytics.view import ViewSettings
from pages._show import show_table
from pages._store import open_store

# The newest rows the page shows; `tidelens audit --db DB` prints every one.
SHOWN_ROWS = 200


def audit_section(target: Path, v: ViewSettings) -> None:
    """The newest changes recorded in ``target`` (the store uploads and pulls go to)."""
    st.subheader("Record of changes")
    if not target.exists():
        st.caption(f"Nothing recorded yet: {code(target)} does not exist.")
        return
    try:
        with open_store(target) as store:
            rows = audit_rows(store, SHOWN_ROWS)
    except TidelensError as exc:
        st.warning(md(exc), icon=":material/warning:")
        return
    st.caption(f"Every load, pull, column mapping and workload-map change made from the app into "
               f"{code(target)}: who, when, what (sources with their content hashes; the map's digest "
               "before and after). `tidelens audit --db` prints the whole record.")
    if rows.height == 0:
        st.caption("No change recorded yet.")
        return
    show_table(rows, key="audit_table",
               column_config={"at": st.column_config.DatetimeColumn("at", format="YYYY-MM-DD HH:mm:ss",
                                                                   timezone=v.tz)})
