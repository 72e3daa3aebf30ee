"""The Data page's workload map: each workload's class, team and the rule that decided it, and
(for admins) the editor whose changes are saved to ``tidelens.toml`` as rules through
:func:`analytics.writes.save_workload_map` (the role checked, the previous file kept, the map's
digest before and after recorded)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import streamlit as st

from analytics.access import Identity, allows
from analytics.errors import ConfigError, TidelensError
from analytics.text import md, safe_table
from analytics.view import apply_workload_edits
from analytics.workloads import CLASSES, map_to_dict
from analytics.writes import save_workload_map
from pages._caches import cached_workloads
from pages._show import show_table
from pages._store import config_file, config_version, load_workload_map, writer


def workload_section(src: Any, target: Path, who: Identity) -> None:
    """The workload table; the editor for a visitor who may change the map."""
    st.subheader("Workload map")
    try:
        workloads = cached_workloads(src.path, src.version, config_version())
    except ConfigError as exc:
        st.error(md(exc), icon=":material/error:")
        return
    if workloads.height == 0:
        st.info("No pods in this store, so no workloads to classify.", icon=":material/info:")
        return
    may_change = allows(who, "change_map")
    if may_change:
        st.caption(f"Change a workload's class or team; the change is saved to `{config_file()}` as a "
                   "rule and every page uses it at once. `rule` names what decided the class.")
    else:
        st.caption(f"`rule` names what decided the class. Admins change classes and teams "
                   f"(`[access] admins` in `{config_file().name}`).")
    classes = list(CLASSES)
    # Without the pool and the pod count: with them the editor was wider than a 1280x720 projector.
    shown = workloads[["namespace", "workload", "cls", "team", "rule"]]
    # A static table first (a grid costs a new tab ~0.7 s, bench/elements.py); the editor, which shows
    # every row, only once its panel is opened.
    show_table(shown, key="workloads_table", column_config={"cls": "class"}, every_rows=False)
    if not may_change:
        return
    editor = st.expander("Change a class or team", icon=":material/edit:", key="workload_edit", on_change="rerun")
    if not editor.open:
        return
    edited = editor.data_editor(
        safe_table(shown), key="workload_editor",  # drawn escaped; the edits apply to the raw rows
        disabled=["namespace", "workload", "rule"],
        column_config={"cls": st.column_config.SelectboxColumn("class", options=classes, required=True),
                       "team": st.column_config.TextColumn("team"),
                       # Sized for its longest built-in rule: a column is sized by its typical cell, which
                       # cut "default: interactive priority class" off.
                       "rule": st.column_config.TextColumn("rule", width=280)})
    edited = pl.DataFrame(edited) if not isinstance(edited, pl.DataFrame) else edited
    changes = [{**raw, "cls": row["cls"], "team": row["team"]}
               for row, drawn, raw in zip(edited.iter_rows(named=True), safe_table(shown).iter_rows(named=True),
                                          shown.iter_rows(named=True))
               if raw["workload"] and (row["cls"], row["team"]) != (drawn["cls"], drawn["team"])]
    if changes:
        old = load_workload_map()
        wmap = apply_workload_edits(old, changes)
        if map_to_dict(wmap) != map_to_dict(old):  # an edit already saved must not rerun forever

            try:
                save_workload_map(who, writer(target), wmap, config_file())
            except TidelensError as exc:
                st.error(md(exc), icon=":material/error:")
                return
            st.toast(f"Saved {len(changes)} change(s) to {config_file().name}", icon=":material/save:")
            st.rerun()
