"""Data: upload files, see what the store holds, and edit which workload is which."""

from __future__ import annotations

from dataclasses import asdict

import polars as pl
import streamlit as st

from analytics.charts.data import coverage_figure, inventory_figure
from analytics.errors import ConfigError
from analytics.overview import label_inventory
from analytics.view import apply_workload_edits, parse_iso_ms
from pages._common import (cached_inventory, cached_series, cached_workloads, config_file,
                           config_version, load_upload, load_workload_map, not_available,
                           optional, page_setup, show_chart, source, upload_target)

v = page_setup()
st.title("Data")

ss = st.session_state

# -- upload ----------------------------------------------------------------------------------
target = upload_target(v)
st.subheader("Load files")
st.caption(f"Prometheus/OpenMetrics text, Prometheus API JSON, CSV or Parquet, optionally "
           f"gzipped. Files are added to `{target}`; the same file twice is skipped.")
at_text = st.text_input("Time of untimestamped scrapes (UTC)", key="upload_at",
                        placeholder="2026-11-28T09:30Z, only for a single scrape without timestamps")
files = st.file_uploader("Files", accept_multiple_files=True, key="upload_files")
done: set[str] = ss.setdefault("upload_done", set())
new = [f for f in files or [] if f.file_id not in done]
if new:
    try:
        at_ms = parse_iso_ms(at_text) if at_text.strip() else None
    except ValueError:
        at_ms = None
        st.error(f"Scrape time {at_text!r} is not an ISO-8601 time such as 2026-11-28T09:30Z; "
                 "loading without it.")
    bar = st.progress(0.0, text="Loading...")
    results = ss.setdefault("upload_results", [])
    for i, f in enumerate(new, start=1):
        bar.progress((i - 1) / len(new), text=f"Loading {f.name} ({i} of {len(new)})")
        results.insert(0, asdict(load_upload(target, f.name, f.getvalue(), at_ms)))
        done.add(f.file_id)
    bar.progress(1.0, text=f"Done: {len(new)} file(s)")
    if v.source == "sample":
        ss["upload_offer_switch"] = True
    st.rerun()  # the sidebar ran before these loads: let it see the new data span

results = ss.get("upload_results", [])
if results:
    table = pl.DataFrame(results)
    st.dataframe(table, hide_index=True, width="stretch", key="upload_table",
                 column_config={"status": st.column_config.TextColumn("status", width="small")})
    for r in results:
        if r["status"] == "failed":
            st.error(r["message"], icon=":material/error:")
if ss.get("upload_offer_switch") and v.source == "sample":
    st.button("Analyse the uploaded files", key="use_uploads", icon=":material/swap_horiz:",
              on_click=lambda: ss.update(v_source="uploads", upload_offer_switch=False))

# -- what the store holds -------------------------------------------------------------------
src = source()
if src.problem or not src.path:
    st.info(src.problem or "No data source.", icon=":material/database_off:")
    st.stop()

sources, metrics = cached_inventory(src.path, src.version)
st.subheader("Sources")
st.dataframe(sources.drop("content_hash"), hide_index=True, width="stretch", key="sources_table")
if sources.filter(pl.col("status") == "loaded").height:
    show_chart(coverage_figure(sources, tz=v.tz), sources.drop("content_hash"), "source-coverage")

st.subheader("Series inventory")
if metrics.height == 0:
    st.info("The store holds no samples yet.", icon=":material/info:")
else:
    left, right = st.columns([3, 2])
    with left:
        show_chart(inventory_figure(metrics), metrics, "series-per-metric")
    with right:
        metric = st.selectbox("Metric", metrics["metric"].to_list(), key="inv_metric")
        series = cached_series(src.path, src.version, metric)
        st.dataframe(label_inventory(series), hide_index=True, width="stretch", key="labels_table")
    with st.expander(f"Series of {metric}"):
        st.dataframe(series, hide_index=True, width="stretch")

# -- workload map ---------------------------------------------------------------------------
st.subheader("Workload map")
try:
    workloads = cached_workloads(src.path, src.version, config_version())
except ConfigError as exc:
    st.error(str(exc), icon=":material/error:")
    st.stop()
if workloads is None:
    not_available("The workload map", "analytics.workloads")
    st.stop()
if workloads.height == 0:
    st.info("No pods in this store, so no workloads to classify.", icon=":material/info:")
    st.stop()
st.caption(f"Change a workload's class or team; the change is saved to `{config_file()}` as a "
           "rule and every page uses it at once. `rule` names what decided the class.")
classes = list((optional("analytics.workloads", "CLASSES") or (("inference", "batch", "other"),))[0])
shown = workloads.select("namespace", "workload", "pods", "cls", "team", "pool", "rule")
edited = st.data_editor(
    shown, key="workload_editor", hide_index=True, width="stretch",
    disabled=["namespace", "workload", "pods", "pool", "rule"],
    column_config={"cls": st.column_config.SelectboxColumn("class", options=classes, required=True),
                   "team": st.column_config.TextColumn("team")})
edited = pl.DataFrame(edited) if not isinstance(edited, pl.DataFrame) else edited
changes = [row for row, before in zip(edited.iter_rows(named=True), shown.iter_rows(named=True))
           if row["workload"] and (row["cls"], row["team"]) != (before["cls"], before["team"])]
if changes:
    save_map, map_to_dict = optional("analytics.workloads", "save_map", "map_to_dict")  # type: ignore[misc]
    old = load_workload_map()
    wmap = apply_workload_edits(old, changes)
    if map_to_dict(wmap) != map_to_dict(old):  # an edit already saved must not rerun forever
        save_map(wmap, config_file())
        st.toast(f"Saved {len(changes)} change(s) to {config_file().name}", icon=":material/save:")
        st.rerun()
