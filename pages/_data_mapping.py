"""The Data page's "Your own table" tab: a CSV or Parquet in no known layout, previewed, its
columns said (time, values, labels, or a per-request log's latency, service and status), loaded
and the mapping saved beside the store for next time.

The load and the saved mapping go through :mod:`analytics.writes` (the role checked, the change
recorded).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import streamlit as st

from analytics.access import Identity
from analytics.errors import TidelensError
from analytics.ingest.mapping import (
    STANDARD_SIGNALS,
    ColumnMapping,
    guess_mapping,
    load_mapping,
    mapping_toml,
    read_table,
)
from analytics.ingest.requests import RequestColumns
from analytics.text import code, md
from analytics.writes import save_mapping
from pages._show import show_table
from pages._store import load_upload, mapping_file, writer

ss = st.session_state


def mapping_panel(target: Path, who: Identity) -> None:
    """A CSV or Parquet in no known layout: preview it, say what its columns mean, load it."""

    st.caption("A table Tidelens has no layout for (a warehouse export, a per-container CSV): say which "
               "column is time, which are values and labels, and which standard signal a value stands "
               f"for. The mapping is saved beside {code(target)} and used again next time.")
    up = st.file_uploader("Table (CSV or Parquet, or an archive of them)", type=["csv", "parquet", "gz", "tgz", "tar",
                                                                           "zip"], key="map_file")
    if up is None:
        return
    try:
        frame = read_table(up.getvalue(), up.name)
    except TidelensError as exc:
        st.error(md(exc), icon=":material/error:")
        return
    show_table(frame.head(8), key="map_preview_table")
    saved_at = mapping_file(target)
    start = guess_mapping(frame, up.name)
    if saved_at.exists():
        try:
            saved = load_mapping(saved_at)
            if saved.time in frame.columns and set(saved.values) <= set(frame.columns):
                start = saved
        except TidelensError as exc:
            st.warning(f"The saved mapping was not used: {md(exc)}", icon=":material/warning:")
    cols = list(frame.columns)
    units = ["s", "ms", "us", "ns", "iso", "clf"]
    c = st.columns(3)
    time_col = c[0].selectbox("Time column", cols, index=cols.index(start.time) if start.time in cols else 0,
                              key="map_time")
    unit = c[1].selectbox("Time unit", units, index=units.index(start.time_unit) if start.time_unit in units else 0,
                          key="map_unit", help="epoch seconds, milliseconds, micro- or nanoseconds, ISO-8601 "
                          "text, or (request logs) nginx's $time_local")
    zone = c[2].text_input("Zone of times without one", value=start.time_zone, key="map_zone")
    kind = st.radio("Each row is", ["a value of a metric", "one request"], horizontal=True, key="map_kind",
                    index=1 if start.requests is not None else 0,
                    help="one request: a per-request log (gateway, access log), one row per request with its latency")
    if kind == "one request":
        _request_mapping_form(up, cols, time_col, unit, zone, start, saved_at, target, who)
        return
    values = st.multiselect("Value columns", [x for x in cols if x != time_col],
                            default=[x for x in start.values if x != time_col], key="map_values",
                            help="one column: each row one value of one metric; several: a wide table")
    labels = st.multiselect("Label columns", [x for x in cols if x != time_col and x not in values],
                            default=[x for x in start.labels if x != time_col and x not in values],
                            key="map_labels")
    renames = st.text_input("Rename labels (column:label)", key="map_renames",
                            value=", ".join(f"{k}:{v}" for k, v in start.labels.items() if k != v),
                            placeholder="container_ip:pod, host:Hostname")
    metric = st.text_input("Metric name (one value column)", value=start.metric or Path(up.name).stem,
                           key="map_metric", disabled=len(values) > 1)
    choices = ["(as it is)", *STANDARD_SIGNALS]
    signals: dict[str, tuple[str, float]] = {}
    for i, col in enumerate(values):
        name = col if len(values) > 1 else metric
        have = start.signals.get(name, ("(as it is)", 1.0))
        s1, s2 = st.columns([2, 1])
        std = s1.selectbox(f"{col} stands for", choices, key=f"map_sig_{i}",
                           index=choices.index(have[0]) if have[0] in choices else 0,
                           format_func=lambda k: STANDARD_SIGNALS.get(k, k))
        scale = s2.number_input(f"{col} scale", value=float(have[1]), key=f"map_scale_{i}",
                                help="multiplies every value (0.01 turns a percent into 0-1)")
        if std != "(as it is)":
            signals[name] = (std, float(scale))
    rename = dict(part.split(":", 1) for part in (x.strip() for x in renames.split(",")) if ":" in part)
    gpu_as = ["its UUID (or host and gpu) labels", "one GPU per pod", "these columns"]
    d1, d2 = st.columns([1, 2])
    gpu_is = d1.radio("One GPU is", gpu_as, key="map_device", index=1 if start.device_per else
                      2 if start.device_columns else 0,
                      help="a pod-level table has no GPU column: without 'one GPU per pod' its pods count as one GPU")
    device_cols = d2.multiselect("Columns that identify one GPU", [x for x in cols if x != time_col],
                                 default=[x for x in start.device_columns if x in cols], key="map_device_cols",
                                 disabled=gpu_is != gpu_as[2])
    mapping = ColumnMapping(time=time_col, time_unit=unit, time_zone=zone or "UTC", values=tuple(values),
                            metric=(metric or None) if len(values) <= 1 else None,
                            labels={x: rename.get(x, x).strip() for x in labels}, signals=signals,
                            device_per="pod" if gpu_is == gpu_as[1] else None,
                            device_columns=tuple(device_cols) if gpu_is == gpu_as[2] else ())
    show_table([{"value column": col, "becomes": signals.get(col if len(values) > 1 else metric, (
        col if len(values) > 1 else metric, 1.0))[0],
        "scale": signals.get(col if len(values) > 1 else metric, ("", 1.0))[1]} for col in values],
        key="map_becomes_table")
    if st.button("Load with this mapping", key="map_load_go", type="primary", disabled=not values):
        _load_mapped(up, mapping, saved_at, "series", target, who)


def _request_mapping_form(up: Any, cols: list[str], time_col: str, unit: str, zone: str, start: Any,
                          saved_at: Path, target: Path, who: Identity) -> None:
    """The mapping form for a per-request log: which column is the latency (and its unit), the
    service, the status or the success column (and the words that mean success), and the pod."""

    guess = start.requests or RequestColumns(time=time_col)
    rest = [x for x in cols if x != time_col]
    none = "(none)"
    c = st.columns(4)
    latency = c[0].selectbox("Latency column", rest, key="map_req_latency",
                             index=rest.index(guess.latency) if guess.latency in rest else 0)
    lat_unit = c[1].selectbox("Latency unit", ["ms", "s", "us"], key="map_req_unit",
                              index=["ms", "s", "us"].index(guess.latency_unit))
    optional = [none, *rest]

    def pick(where: Any, label: str, current: str | None, key: str, **kw: Any) -> str | None:
        chosen = where.selectbox(label, optional, key=key, index=optional.index(current) if current in rest else 0,
                                 **kw)
        return None if chosen == none else chosen

    service = pick(c[2], "Service column", guess.service, "map_req_service",
                   help="none: every request is of the service named on the right")
    service_name = c[3].text_input("Service (no column)", value=Path(up.name).name.split(".")[0], key="map_req_name",
                                   disabled=service is not None)
    c = st.columns(4)
    status = pick(c[0], "HTTP status column (5xx and 429 are errors)", guess.status, "map_req_status")
    success = pick(c[1], "Success column", guess.success, "map_req_success",
                   help="a column saying whether the request succeeded: true/false, ok/error, "
                        "success/failed and the like are read as such")
    words = c[2].text_input("Success values", value=", ".join(guess.success_values or ()), key="map_req_success_values",
                            disabled=success is None, placeholder="SUCCEED, OK",
                            help="the success column's values that mean success (any case), comma-separated; "
                                 "empty: the usual words and HTTP codes")
    pod = pick(c[3], "Pod column", guess.pod, "map_req_pod")
    values = tuple(w.strip() for w in words.split(",") if w.strip()) if success is not None else ()
    req = RequestColumns(time="", latency=latency, latency_unit=lat_unit, service=service,
                         service_name=(service_name or None) if service is None else None, status=status, pod=pod,
                         success=success, success_values=values or None)
    mapping = ColumnMapping(time=time_col, time_unit=unit, time_zone=zone or "UTC", requests=req)
    if st.button("Load with this mapping", key="map_load_go", type="primary"):
        _load_mapped(up, mapping, saved_at, "requests", target, who)


def _load_mapped(up: Any, mapping: Any, saved_at: Path, what: str, target: Path, who: Identity) -> None:
    """Load the uploaded table through ``mapping``; on success save the mapping beside the store."""

    try:
        mapping.check("the mapping")
    except TidelensError as exc:
        st.error(md(exc), icon=":material/error:")
        return
    out = load_upload(target, up.name, up.getvalue(), None, columns=mapping, who=who)
    ss.setdefault("upload_results", [])[:0] = [asdict(out)]
    if out.status == "failed":
        st.error(md(out.message), icon=":material/error:")
        return
    try:
        save_mapping(who, writer(target), mapping_toml(mapping), saved_at)
    except TidelensError as exc:
        st.error(md(exc), icon=":material/error:")
        return
    loaded = (md(out.message) if what == "requests"
              else f"{out.series} series, {out.samples:,} samples ({md(out.message)})")
    st.success(f"{md(up.name)}: {out.status}, {loaded}. Mapping saved as {code(saved_at)}.",
               icon=":material/check_circle:")
