"""Data: add data (files, a Prometheus-compatible server, this machine's GPUs), see what the
store holds, edit which workload is which, and read the record of who changed what.

Each job has its module: ``_data_upload`` (files, local GPUs), ``_data_mapping`` (your own
table), ``_data_pull`` (a server), ``_data_workloads`` (the workload map's editor) and
``_data_audit`` (the record). What a visitor may do is their role's (``pages/_access.py``);
the library checks it again on every write (``analytics/writes.py``).
"""

from __future__ import annotations

import polars as pl
import streamlit as st

from analytics.access import ENABLE_EDITING, NO_OPERATOR_LINK, allows
from analytics.charts.data import coverage_figure, inventory_figure
from analytics.errors import ConfigError
from analytics.overview import label_inventory, store_headline
from analytics.text import code, md
from pages._access import identity
from pages._caches import cached_inventory, cached_links, cached_request_logs, cached_series
from pages._data_audit import audit_section
from pages._data_mapping import mapping_panel
from pages._data_pull import pull_panel
from pages._data_upload import collect_panel, files_panel, interrupted
from pages._data_workloads import workload_section
from pages._show import choose, show_chart, show_table, show_table_with_notes
from pages._sidebar import page_setup, source
from pages._store import config_file, config_version, upload_target

v = page_setup()
st.title("Data")
# What the store holds, in a sentence, above the forms that add to it (filled once it is read).
headline = st.container(key="headline")

ss = st.session_state
who = identity()
PULL_TAB = "Prometheus / Thanos / Mimir / VictoriaMetrics"
try:
    target = upload_target(v)
except ConfigError as exc:  # a store path outside the data folder: say so, create nothing
    st.error(md(str(exc)), icon=":material/folder_off:")
    st.stop()

# -- add data --------------------------------------------------------------------------------
# One panel at a time: a tab runs (and draws its form) only when picked. Its fields keep what
# was typed while another tab is shown: page_setup carries them (pages/_sidebar.PAGE_STATE_PREFIXES).
# Said above the tabs: the click that stopped a pull may have been on another tab.
if not allows(who, "load"):
    # A viewer gets no upload, pull or collect form; the library refuses them anyway.
    st.info(who.note if who.note in (ENABLE_EDITING, NO_OPERATOR_LINK) else
            (f"You are signed in as {md(who.who)}" if who.how in ("oidc", "header") else "You are not signed in")
            + f" with the {who.role} role: you can read every page and "
            f"export, but loading data and pulls need the editor role (ask the operator: `[access] "
            f"editors` in `{config_file().name}`).", icon=":material/visibility:")
else:
    if interrupted("pull"):
        ss.pop("pull_outcome", None)
        st.warning("The pull stopped early (the page was used while it ran): what arrived up to "
                   "then is in the store; pull again to fetch the rest.", icon=":material/stop_circle:")
    if interrupted("nvml"):
        ss.pop("nvml_outcome", None)
        st.warning("Sampling stopped early (the page was used while it ran): what was read up to "
                   "then is in the store.", icon=":material/stop_circle:")
    files_tab, map_tab, pull_tab, nvml_tab = st.tabs(
        ["Files", "Your own table", PULL_TAB, "Local GPUs (NVML)"], key="data_add", on_change="rerun")
    if files_tab.open:
        with files_tab:
            files_panel(v, target, who)
    if map_tab.open:
        with map_tab:
            mapping_panel(target, who)
    if pull_tab.open:
        with pull_tab:
            pull_panel(v, target, who)
    if nvml_tab.open:
        with nvml_tab:
            collect_panel(v, target, who)
if ss.get("upload_offer_switch") and v.source == "sample":
    st.button("Analyse the added data", key="use_uploads", icon=":material/swap_horiz:",
              help=f"Switch the data source from the bundled sample to {code(target)}",
              on_click=lambda: ss.update(v_source="uploads", upload_offer_switch=False))


# -- what the store holds -------------------------------------------------------------------
src = source()
if src.problem or not src.path:
    st.info(src.problem or "No data source.", icon=":material/database_off:")
    st.stop()

sources, metrics = cached_inventory(src.path, src.version)
headline.markdown(md(store_headline(sources, metrics, v.tz)))
st.subheader("Sources")
# The columns a room reads; the rest (ids, series, counts of duplicates and blanks, notes) in a
# panel: all fourteen were twice a 1280x720 projector's width.
when = st.column_config.DatetimeColumn
show_table(sources.with_columns(pl.col("first_ts", "last_ts").dt.replace_time_zone("UTC")),  # the store's are UTC
           key="sources_table", column_order=("name", "format", "status", "samples", "first_ts", "last_ts"),
           column_config={"samples": st.column_config.NumberColumn(format="%,d"),
                          "first_ts": when("first", format="YYYY-MM-DD HH:mm", timezone=v.tz),
                          "last_ts": when("last", format="YYYY-MM-DD HH:mm", timezone=v.tz)})
every_column = st.expander("Every column of the sources", key="src_every", on_change="rerun")
if every_column.open:
    show_table(sources.drop("content_hash"), where=every_column, key="sources_every")
if sources.filter(pl.col("status") == "loaded").height:
    show_chart(coverage_figure(sources, tz=v.tz), sources.drop("content_hash"), "source-coverage")

request_logs = cached_request_logs(src.path, src.version, config_version())
st.subheader("Series inventory")
if metrics.height == 0:
    st.info("No metric series: the store holds request logs only (below)." if request_logs.height
            else "The store holds no samples yet.", icon=":material/info:")
else:
    # The chart the page's width (a metric's name is long), the list of metrics under it (a
    # store's dozens scroll in its box).
    show_chart(inventory_figure(metrics), metrics, "series-per-metric")
    metric = choose("Metric", metrics["metric"].to_list(), key="inv_metric", widget="radio",
                    horizontal=False, height=260)
    series = cached_series(src.path, src.version, metric)
    show_table(label_inventory(series), key="labels_table")  # the page's width: a column's cut it
    every = st.expander(f"Series of {metric}", key="inv_series", on_change="rerun")
    if every.open:
        show_table(series, where=every, key="inv_series_table")

if request_logs.height:
    st.subheader("Request logs")
    st.caption("Services with a per-request log: their traffic and p50/p95/p99 come from it, exactly, on every "
               "step it covers (errors counted apart); a histogram of the same service is used only outside.")
    show_table(request_logs, key="request_logs_table")

# -- autoscalers and unlabelled GPUs -----------------------------------------------------------
links, gpu_rules = cached_links(src.path, src.version, config_version())
st.subheader("Autoscalers")
if links.height == 0:
    st.info("No HPA or Deployment series (kube-state-metrics) in this store: desired replicas are inferred "
            "from traffic where uncontended periods allow, and the Tail events evidence says so.",
            icon=":material/info:")
else:
    st.caption("Which service each HPA and Deployment was linked to, and the rule that made the link. "
               f"Name a link yourself with an `[[autoscaler]]` rule in `{config_file().name}`.")
    show_table(links, key="autoscaler_links")
    for row in links.filter(pl.col("status") != "linked").iter_rows(named=True):
        st.warning(md(f"{row['kind']} {row['namespace'] or '?'}/{row['name']}: {row['status']}. "
                             f"{row['note']}"),
                   icon=":material/link_off:")
st.subheader("GPUs without a pod label")
st.caption("How each exporter's GPUs without a pod label are counted: idle, unmanaged (busy outside "
           "Kubernetes) or unknown.")
show_table_with_notes(gpu_rules, label="job", note="rule", label_if_empty="no job label", key="gpu_class_rules")

# -- the workload map and the record of changes -------------------------------------------------
workload_section(src, target, who)
audit_section(target, v)
