"""Data: add data (files, a Prometheus-compatible server, this machine's GPUs), see what the
store holds, and edit which workload is which."""

from __future__ import annotations

import os
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

import duckdb
import polars as pl
import streamlit as st

from analytics.charts.data import coverage_figure, inventory_figure
from analytics.errors import ConfigError, TidelensError
from analytics.fieldhelp import field_help
from analytics.text import code, md, safe_table
from analytics.ingest import group_messages
from analytics.workloads import CLASSES, map_to_dict, save_map
from analytics.overview import label_inventory
from analytics.times import iso_utc, parse_time_ms
from analytics.view import STEP_CHOICES_S, apply_workload_edits, format_step
from pages._caches import cached_inventory, cached_links, cached_request_logs, cached_series, cached_workloads
from pages._show import choose, kpi_row, show_chart, show_table, show_table_with_notes
from pages._sidebar import page_setup, source
from pages._store import (config_file, config_version, load_upload, load_uploads, load_workload_map, mapping_file,
                          open_store, upload_target)

v = page_setup()
st.title("Data")

ss = st.session_state
PULL_TAB = "Prometheus / Thanos / Mimir / VictoriaMetrics"
try:
    target = upload_target(v)
except ConfigError as exc:  # a store path outside the data folder: say so, create nothing
    st.error(md(str(exc)), icon=":material/folder_off:")
    st.stop()
# An environment variable's name, as a shell accepts it: anything else is likely a pasted secret.
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _offer_switch() -> None:
    """After new data lands in the uploads store, offer to analyse it instead of the sample."""
    if v.source == "sample":
        ss["upload_offer_switch"] = True


def _secret_source(prefix: str, what: str) -> tuple[str | None, str | None, str | None]:
    """``(env_name, file_path, problem)`` of one secret, named by the user and never typed in."""
    kind = st.radio(f"{what} from", ["env", "file"], key=f"{prefix}_from", horizontal=True,
                    format_func={"env": "environment variable", "file": "file"}.__getitem__)
    if kind == "env":
        name = st.text_input(f"{what}: environment variable name", key=f"{prefix}_env",
                             placeholder="PROM_TOKEN",
                             help="The NAME of a variable set where the app runs; its value is "
                                  "read when pulling and never shown or stored.").strip()
        if not name:
            return None, None, f"Name the environment variable that holds the {what.lower()}."
        if not ENV_NAME.match(name):
            return None, None, (f"`{what}: environment variable name` must be a variable's name "
                                "such as PROM_TOKEN, never the secret itself.")
        if os.environ.get(name):
            st.caption(f"`{name}` is set where the app runs.")
        else:
            st.caption(f"`{name}` is not set where the app runs: set it before starting the app.")
        return name, None, None
    path = st.text_input(f"{what}: file path", key=f"{prefix}_file",
                         placeholder="/var/run/secrets/prometheus/token",
                         help="A file readable by the app; read when pulling, never shown.").strip()
    if not path:
        return None, None, f"Give the path of the file that holds the {what.lower()}."
    return None, path, None


def _auth_form() -> tuple[Any, str | None]:
    """The pull's :class:`AuthConfig` from the form, or why it cannot be built."""
    from analytics.live import AuthConfig

    mode = st.radio("Authentication", ["none", "bearer", "basic"], key="pull_auth", horizontal=True,
                    format_func={"none": "none", "bearer": "bearer token",
                                 "basic": "basic auth"}.__getitem__,
                    help="Secrets are named (an environment variable or a file), never typed "
                         "into the page, and never put in the URL.")
    auth = AuthConfig()
    problem = None
    if mode == "bearer":
        env, path, problem = _secret_source("pull_token", "Token")
        auth.bearer_token_env, auth.bearer_token_file = env, path
    elif mode == "basic":
        auth.basic_user = st.text_input("User", key="pull_user",
                                        help=field_help(AuthConfig, "basic_user")).strip() or None
        env, path, problem = _secret_source("pull_password", "Password")
        auth.basic_password_env, auth.basic_password_file = env, path
        if auth.basic_user is None and problem is None:
            problem = "Basic auth needs a user name."
    tenant = st.text_input("Tenant (X-Scope-OrgID), optional", key="pull_tenant",
                           help=field_help(AuthConfig, "headers")).strip()
    if tenant:
        auth.headers = {"X-Scope-OrgID": tenant}
    left, right = st.columns([3, 1], vertical_alignment="bottom")
    auth.ca_bundle = left.text_input("CA bundle (PEM file), optional", key="pull_ca",
                                     help=field_help(AuthConfig, "ca_bundle")).strip() or None
    auth.insecure = right.checkbox("Skip TLS verification", key="pull_insecure",
                                   help=field_help(AuthConfig, "insecure"))
    if auth.insecure:
        st.warning("TLS verification is off: anyone on the path could read or alter the data "
                   "(and see the credentials).", icon=":material/lock_open:")
    return auth, problem


# The library's messages name CLI flags; on this page the same settings are form fields.
_FLAG_WORDS: tuple[tuple[str, str], ...] = (
    ("--password-env VAR or --password-file PATH", "a password variable or file"),
    ("--user with --password-env/--password-file, or --token-env/--token-file",
     "basic auth or a bearer token under *Connection, authentication and TLS*"),
    ("--ca-bundle PEM", "a CA bundle under *Connection, authentication and TLS*"),
    ("--insecure", "*Skip TLS verification*"),
    ("--scope", "*Scope*"), ("--max-series", "*Max series per query*"), ("--step", "*Step*"),
    ("--timeout", "*Timeout*"))


def _page_words(message: str) -> str:
    """A library message with its CLI flags named as this page's fields."""
    for flag, field_name in _FLAG_WORDS:
        message = message.replace(flag, field_name)
    return message


def _show_pull_outcome() -> None:
    out = ss.get("pull_outcome")
    if not out:
        return
    st.caption(f"Last pull: {out['what']}")
    if out["error"]:
        st.error(out["error"], icon=":material/error:")
        if out.get("hint"):
            st.info(out["hint"], icon=":material/filter_alt:")
        return
    c = kpi_row(4)
    c[0].metric("Series", f"{out['series']:,}")
    c[1].metric("Samples", f"{out['samples']:,}")
    c[2].metric("Sources loaded", f"{out['loaded']:,}", help="one per query and time chunk")
    c[3].metric("Requests", f"{out['requests']:,}", help=f"{out['bytes']:,} bytes received")
    if out["up_to_date"]:
        st.caption(f"{len(out['up_to_date'])} queries were pulled for this range before: nothing "
                   "new to fetch for them (tick *Fetch again* to ask anyway).")
    if out["sources"]:
        show_table(pl.DataFrame(out["sources"]),
                     key="pull_table")
    elif not out["up_to_date"]:
        st.info("The server returned no series for these queries in this range: check the range "
                "(times are UTC) and the scope.", icon=":material/info:")


def _run_pull(what: str, make_client: Callable[[], Any],
              run: Callable[[Any, Any, Callable[[int, int, str], None]], Any]) -> dict[str, Any]:
    """Run one pull into the page's store under a progress bar; its outcome as the page shows it.

    Every failure becomes a message: the library's (server down, query error with the server's
    words, series guard, allowlist), a store another program holds, or an unexpected bug.
    """
    from analytics.live import PullError, SeriesGuardError

    bar = st.progress(0.0, text=f"Pulling from {what}...")

    def progress(done: int, total: int, message: str) -> None:
        bar.progress(done / max(total, 1), text=f"[{done}/{total}] {message}")

    outcome: dict[str, Any] = {"error": None, "what": what}
    try:
        with make_client() as client, open_store(target, read_only=False) as store:
            report = run(store, client, progress)
    except SeriesGuardError as exc:
        outcome.update(error=_page_words(str(exc)), hint="Narrow **Scope** to a namespace, node or "
                       "pool (e.g. `namespace=inference` or `Hostname=~node-0.*`), or raise "
                       "**Max series per query** if the store can take it.")
        return outcome
    except (PullError, TidelensError) as exc:
        outcome.update(error=_page_words(str(exc)))
        return outcome
    except duckdb.Error as exc:
        outcome.update(error=f"Cannot write to {code(target)}: {exc}. If another program is loading "
                             "into it, wait for it to finish and pull again.")
        return outcome
    except Exception as exc:  # noqa: BLE001 - a bug must not take the page down
        outcome.update(error=f"Internal error while pulling ({type(exc).__name__}: {exc}); "
                             "please report it with the settings above.")
        return outcome
    d = report.as_dict()
    outcome.update(
        series=report.series_returned, samples=report.samples, loaded=d["loaded"],
        requests=report.requests, bytes=report.bytes_received, up_to_date=d["up_to_date"],
        sources=[{"source": r.name, "status": r.status, "series": r.series, "samples": r.samples,
                  "from": iso_utc(r.first_ts_ms) if r.first_ts_ms is not None else "",
                  "to": iso_utc(r.last_ts_ms) if r.last_ts_ms is not None else ""}
                 for r in report.results])
    if d["loaded"]:
        _offer_switch()
    return outcome


def _mapping_panel() -> None:
    """A CSV or Parquet in no known layout: preview it, say what its columns mean, load it."""
    from analytics.ingest.mapping import STANDARD_SIGNALS, ColumnMapping, guess_mapping, load_mapping, read_table

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
        _request_mapping_form(up, cols, time_col, unit, zone, start, saved_at)
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
        _load_mapped(up, mapping, saved_at, "series")


def _request_mapping_form(up: Any, cols: list[str], time_col: str, unit: str, zone: str, start: Any,
                          saved_at: Path) -> None:
    """The mapping form for a per-request log: which column is the latency (and its unit), the
    service, the status and the pod."""
    from analytics.ingest.mapping import ColumnMapping
    from analytics.ingest.requests import RequestColumns

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
    c = st.columns(2)
    status = pick(c[0], "HTTP status column (5xx and 429 are errors)", guess.status, "map_req_status")
    pod = pick(c[1], "Pod column", guess.pod, "map_req_pod")
    req = RequestColumns(time="", latency=latency, latency_unit=lat_unit, service=service,
                         service_name=(service_name or None) if service is None else None, status=status, pod=pod)
    mapping = ColumnMapping(time=time_col, time_unit=unit, time_zone=zone or "UTC", requests=req)
    if st.button("Load with this mapping", key="map_load_go", type="primary"):
        _load_mapped(up, mapping, saved_at, "requests")


def _load_mapped(up: Any, mapping: Any, saved_at: Path, what: str) -> None:
    """Load the uploaded table through ``mapping``; on success save the mapping beside the store."""
    from analytics.ingest.mapping import mapping_toml

    try:
        mapping.check("the mapping")
    except TidelensError as exc:
        st.error(md(exc), icon=":material/error:")
        return
    out = load_upload(target, up.name, up.getvalue(), None, columns=mapping)
    ss.setdefault("upload_results", [])[:0] = [asdict(out)]
    if out.status == "failed":
        st.error(md(out.message), icon=":material/error:")
        return
    saved_at.write_text(mapping_toml(mapping), encoding="utf-8")
    loaded = (md(out.message) if what == "requests"
              else f"{out.series} series, {out.samples:,} samples ({md(out.message)})")
    st.success(f"{md(up.name)}: {out.status}, {loaded}. Mapping saved as {code(saved_at)}.",
               icon=":material/check_circle:")


def _seeded(key: str, default: Any) -> str:
    """``key``, its value set to ``default`` the first time: the fields' values live in session
    state only (carried across tab switches), so the widgets take no ``value=`` of their own."""
    ss.setdefault(key, default)
    return key


def _pull_panel() -> None:
    from analytics.live import ClientConfig, PromClient, Scope, describe, fleet_queries, pull, timeline_queries
    from analytics.live.client import allowed_servers, safe_url
    from analytics.live.pull import DEFAULT_MAX_SERIES

    st.caption(f"Pull what the timelines need, aggregated by the server, into {code(target)}. "
               "Pulling the same range again fetches only what is new.")
    try:
        allowed = allowed_servers(config_file())
    except ConfigError as exc:
        st.error(md(exc), icon=":material/error:")
        return
    if allowed is not None:
        st.caption(f"This deployment allows: {', '.join(f'`{a}`' for a in allowed) or '(none)'} "
                   f"([live] servers in `{config_file().name}`).")
    else:
        # A named secret's value goes to whichever server is asked: shared deployments list theirs.
        st.caption(f"Any server may be asked. A shared deployment should list its servers under "
                   f"`[live] servers` in `{config_file()}`.")
    url = st.text_input("Server URL", key="pull_url", placeholder="http://prometheus:9090",
                        help="The query API's base: Prometheus http://host:9090, Thanos Query, "
                             "Mimir https://host/prometheus, VictoriaMetrics http://host:8428").strip()
    a, b, c = st.columns(3)
    start_text = a.text_input("From (UTC)", key=_seeded("pull_from", "now-1d"),
                              help="ISO-8601 (2026-11-28T09:30Z), epoch seconds, or now-2h")
    end_text = b.text_input("To (UTC)", key=_seeded("pull_to", "now"), help="same forms as From")
    steps = sorted({*STEP_CHOICES_S, v.step_s})
    if ss.get("pull_step") not in steps:
        ss.pop("pull_step", None)
    step_s = c.selectbox("Step", steps, key=_seeded("pull_step", v.step_s),
                         format_func=format_step,
                         help="Each stored point is the step ending at it; pull at the analysis "
                              "step (or finer) you will use.")
    a, b, c = st.columns([2, 1, 1])
    scope_text = a.text_input("Scope", key=_seeded("pull_scope", "pool"),
                              help="pool (everything), or label=value[,label=~regex] added to "
                                   "every selector, e.g. namespace=inference")
    catalogue = b.selectbox("Queries", ["timeline", "fleet"], key="pull_catalogue",
                            format_func={"timeline": "timelines' inputs",
                                         "fleet": "fleet counts"}.__getitem__,
                            help="timelines' inputs: device series per step, services summed "
                                 "(what every page reads); fleet counts: GPU counts per holder "
                                 "for very large fleets")
    max_series = c.number_input("Max series per query", min_value=1, step=1000,
                                key=_seeded("pull_max_series", DEFAULT_MAX_SERIES),
                                help="A query returning more series stops the pull with a message")
    with st.expander("Connection, authentication and TLS"):
        auth, auth_problem = _auth_form()
        a, b = st.columns(2)
        timeout_s = a.number_input("Timeout (s)", min_value=1.0, step=10.0,
                                   key=_seeded("pull_timeout", ClientConfig.timeout_s),
                                   help=field_help(ClientConfig, "timeout_s"))
        retries = b.number_input("Retries", min_value=0, max_value=10,
                                 key=_seeded("pull_retries", ClientConfig.retries), help=field_help(ClientConfig, "retries"))
    full = st.checkbox("Fetch again what was pulled before", key="pull_full",
                       help="Ignore the record of ranges already pulled (unchanged data is "
                            "still skipped)")

    problems = []
    try:
        scope = Scope.parse(scope_text)
    except ConfigError as exc:
        scope, problems = None, [_page_words(str(exc))]
    step_ms = int(step_s) * 1000
    if scope is not None:
        queries = (fleet_queries if catalogue == "fleet" else timeline_queries)(step_ms, scope)
        promql = st.expander(f"PromQL it will send ({len(queries)} queries)", key="pull_promql",
                             on_change="rerun")
        if promql.open:
            promql.code(describe(queries), language="text", wrap_lines=True)
    try:
        start_ms, end_ms = parse_time_ms(start_text), parse_time_ms(end_text)
        if end_ms <= start_ms:
            problems.append(f"To ({end_text}) must be after From ({start_text}).")
    except ConfigError as exc:
        problems.append(str(exc))
    if auth_problem:
        problems.append(auth_problem)
    if allowed is None and auth.names_secrets():
        # Without a list of servers, a named secret could be sent to any server a visitor types.
        problems.append(f"Credentials are used only towards listed servers: add this server under "
                        f"`[live] servers` in `{config_file()}` first.")
    for p in problems:
        st.warning(p, icon=":material/edit:")
    clicked = st.button("Pull", key="pull_go", type="primary", icon=":material/cloud_download:",
                        disabled=bool(problems) or not url)
    if clicked:
        config = ClientConfig(timeout_s=float(timeout_s), retries=int(retries))
        what = (f"{safe_url(url)}, {iso_utc(start_ms)} to {iso_utc(end_ms)} UTC, step "
                f"{format_step(int(step_s))}, scope {scope_text.strip() or 'pool'}")
        ss["pull_running"] = True  # still set on the next run if a click interrupts this one
        ss["pull_outcome"] = _run_pull(
            what, lambda: PromClient(url, auth, config, allowed=allowed),
            lambda store, client, progress: pull(
                store, client, start_ms, end_ms, step_ms=step_ms, scope=scope, queries=queries,
                max_series=int(max_series), incremental=not full, progress=progress))
        ss["pull_running"] = False
        st.rerun()  # the sidebar ran before this pull: let it see the new data span
    _show_pull_outcome()


def _collect_panel() -> None:
    from analytics.nvml import CollectConfig, available, collect
    from analytics.live.timespec import parse_duration_ms

    ok, message = available()
    if not ok:
        st.info(f"Local GPUs cannot be sampled: {message}.", icon=":material/memory:")
        return
    st.success(f"NVML sees {message}.", icon=":material/memory:")
    st.caption(f"Samples this machine's GPUs under dcgm-exporter's names into {code(target)}. The page "
               "waits while sampling; for hours, run `tidelens collect` in a terminal instead.")
    a, b = st.columns(2)
    interval_text = a.text_input("Every", key=_seeded("nvml_interval", "1s"),
                                 help=field_help(CollectConfig, "interval_ms") + " (e.g. 500ms, 1s, 10s)")
    duration_text = b.text_input("For", key=_seeded("nvml_duration", "1m"),
                                 help=field_help(CollectConfig, "duration_ms") + " (e.g. 30s, 5m; at most 1h)")
    problems = []
    try:
        interval_ms = parse_duration_ms(interval_text, "Every")
        duration_ms = parse_duration_ms(duration_text, "For")
        if duration_ms > 3_600_000:
            problems.append("For: at most 1h on this page; run `tidelens collect --duration 8h` "
                            "in a terminal for longer.")
        elif duration_ms < interval_ms:
            problems.append("For must be at least one interval (Every).")
    except ConfigError as exc:
        problems.append(str(exc))
    for p in problems:
        st.warning(p, icon=":material/edit:")
    if st.button("Collect", key="nvml_go", type="primary", icon=":material/play_arrow:",
                 disabled=bool(problems)):
        cfg = CollectConfig(interval_ms=interval_ms, duration_ms=duration_ms,
                            flush_ms=min(CollectConfig.flush_ms, duration_ms))
        ss["nvml_running"] = True  # still set on the next run if a click interrupts this one
        ss["nvml_outcome"] = _run_collect(cfg, collect)
        ss["nvml_running"] = False
        st.rerun()  # the sidebar ran before this collection: let it see the new data span
    out = ss.get("nvml_outcome")
    if out and out["error"]:
        st.error(out["error"], icon=":material/error:")
    elif out:
        n = sum(s["samples"] for s in out["sources"])
        st.success(f"Collected {n:,} samples.", icon=":material/check_circle:")
        show_table(pl.DataFrame(out["sources"]),
                     key="nvml_table")


class _OpenPerLoad:
    """The store as :func:`analytics.nvml.collect` uses it (``load`` per flush), opened for each
    load only: a collection runs for minutes, and while the page's store is open for writing no
    other session of the app can read it (one process-wide lock, see ``pages/_store.py``)."""

    def __init__(self, path: Any) -> None:
        self.path = path

    def load(self, *args: Any, **kwargs: Any) -> Any:
        with open_store(self.path, read_only=False) as store:
            return store.load(*args, **kwargs)


def _run_collect(cfg: Any, collect: Callable[..., Any]) -> dict[str, Any]:
    """Sample local GPUs into the page's store under a progress bar; the outcome to show."""
    bar = st.progress(0.0, text="Sampling...")

    def progress(done: int, total: int, msg: str) -> None:
        bar.progress(done / max(total, 1), text=f"[{done}/{total}] {msg}")

    try:
        results = collect(_OpenPerLoad(target), cfg, progress=progress)
    except TidelensError as exc:
        outcome = {"error": str(exc), "sources": []}
    except duckdb.Error as exc:
        outcome = {"error": f"Cannot write to {code(target)}: {exc}. If another program is loading "
                            "into it, wait for it to finish.", "sources": []}
    except Exception as exc:  # noqa: BLE001 - an NVML or driver failure must not show a traceback
        outcome = {"error": f"Sampling failed ({type(exc).__name__}: {exc}); anything read before "
                            "the failure is in the store.", "sources": []}
    else:
        outcome = {"error": None, "sources": [
            {"source": r.name, "status": r.status, "series": r.series, "samples": r.samples}
            for r in results]}
        if any(r.status == "loaded" for r in results):
            _offer_switch()
    return outcome


def _interrupted(kind: str) -> bool:
    """Whether the last pull or collection of ``kind`` was cut short by a rerun (a click).

    Streamlit stops a running script when the user interacts with the page; the library keeps
    what it finished (every pulled chunk, every flushed sample), so only the message is lost.
    """
    if ss.get(f"{kind}_running"):
        ss[f"{kind}_running"] = False
        return True
    return False


# -- add data --------------------------------------------------------------------------------
# One panel at a time: a tab runs (and draws its form) only when picked. Its fields keep what
# was typed while another tab is shown: page_setup carries them (pages/_sidebar.PAGE_STATE_PREFIXES).
# Said above the tabs: the click that stopped a pull may have been on another tab.
if _interrupted("pull"):
    ss.pop("pull_outcome", None)
    st.warning("The pull stopped early (the page was used while it ran): what arrived up to "
               "then is in the store; pull again to fetch the rest.", icon=":material/stop_circle:")
if _interrupted("nvml"):
    ss.pop("nvml_outcome", None)
    st.warning("Sampling stopped early (the page was used while it ran): what was read up to "
               "then is in the store.", icon=":material/stop_circle:")
files_tab, map_tab, pull_tab, nvml_tab = st.tabs(
    ["Files", "Your own table", PULL_TAB, "Local GPUs (NVML)"], key="data_add", on_change="rerun")
if files_tab.open:
    with files_tab:
        st.caption(f"Prometheus/OpenMetrics text, Prometheus API JSON, CSV or Parquet, per-request logs "
                   f"(CSV, JSON lines or Parquet with a time and a latency_ms / latency_s column), optionally gzipped "
                   f"or in a .tar, .tar.gz or .zip (each member its own file). Files are added to {code(target)}; "
                   "the same file twice is skipped.")
        at_text = st.text_input("Time of untimestamped scrapes (UTC)", key="upload_at",
                                placeholder="2026-11-28T09:30Z, only for a single scrape without timestamps")
        files = st.file_uploader("Files", accept_multiple_files=True, key="upload_files")
        done: set[str] = ss.setdefault("upload_done", set())
        new = [f for f in files or [] if f.file_id not in done]
        if new:
            try:
                at_ms = parse_time_ms(at_text, what="Scrape time") if at_text.strip() else None
            except ConfigError as exc:
                at_ms = None
                st.error(md(f"{exc}; loading without it."))
            bar = st.progress(0.0, text="Loading...")
            results = ss.setdefault("upload_results", [])
            for i, f in enumerate(new, start=1):
                bar.progress((i - 1) / len(new), text=f"Loading {f.name} ({i} of {len(new)})")
                results[:0] = [asdict(o) for o in load_uploads(target, f.name, f.getvalue(), at_ms)]
                done.add(f.file_id)
            bar.progress(1.0, text=f"Done: {len(new)} file(s)")
            _offer_switch()
            st.rerun()  # the sidebar ran before these loads: let it see the new data span

        results = ss.get("upload_results", [])
        if results:
            table = pl.DataFrame(results)
            show_table(table, key="upload_table",
                         column_config={"status": st.column_config.TextColumn("status", width="small")})
            # One box per reason, naming its files: a folder of 160 files in one unknown layout
            # is one problem, not 160 red boxes.
            failed = [(r["file"], r["message"]) for r in results if r["status"] == "failed"]
            for reason, names in group_messages(failed):
                if len(names) == 1:  # the whole message: file, line and what to do
                    st.error(md(dict(failed)[names[0]]), icon=":material/error:")
                    continue
                names = sorted(names)
                listed = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
                st.error(f"{md(f'{len(names)} files: {reason}')}  \n{md(listed)} (each file's line is in "
                         "the table above)", icon=":material/error:")
if map_tab.open:
    with map_tab:
        _mapping_panel()
if pull_tab.open:
    with pull_tab:
        _pull_panel()
if nvml_tab.open:
    with nvml_tab:
        _collect_panel()
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
st.subheader("Sources")
# The columns a room reads; the rest (ids, series, counts of duplicates and blanks, notes) in a
# panel: all fourteen were twice a 1280x720 projector's width.
when = st.column_config.DatetimeColumn
show_table(sources.with_columns(pl.col("first_ts", "last_ts").dt.replace_time_zone("UTC")),  # the store's are UTC
           key="sources_table", column_order=("name", "format", "status", "samples", "first_ts", "last_ts"),
           column_config={"first_ts": when("first", format="YYYY-MM-DD HH:mm", timezone=v.tz),
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
    left, right = st.columns([3, 2])
    with left:
        show_chart(inventory_figure(metrics), metrics, "series-per-metric")
    with right:  # a list beside the chart (a store's dozens of metrics scroll in its box)
        metric = choose("Metric", metrics["metric"].to_list(), key="inv_metric", widget="radio",
                        horizontal=False, height=400)
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

# -- workload map ---------------------------------------------------------------------------
st.subheader("Workload map")
try:
    workloads = cached_workloads(src.path, src.version, config_version())
except ConfigError as exc:
    st.error(md(exc), icon=":material/error:")
    st.stop()
if workloads.height == 0:
    st.info("No pods in this store, so no workloads to classify.", icon=":material/info:")
    st.stop()
st.caption(f"Change a workload's class or team; the change is saved to `{config_file()}` as a "
           "rule and every page uses it at once. `rule` names what decided the class.")
classes = list(CLASSES)
# Without the pool and the pod count: with them the editor was wider than a 1280x720 projector.
shown = workloads[["namespace", "workload", "cls", "team", "rule"]]
# A static table first (a grid costs a new tab ~0.7 s, bench/elements.py); the editor, which shows
# every row, only once its panel is opened.
show_table(shown, key="workloads_table", column_config={"cls": "class"}, every_rows=False)
editor = st.expander("Change a class or team", icon=":material/edit:", key="workload_edit", on_change="rerun")
if not editor.open:
    st.stop()
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
        save_map(wmap, config_file())
        st.toast(f"Saved {len(changes)} change(s) to {config_file().name}", icon=":material/save:")
        st.rerun()
