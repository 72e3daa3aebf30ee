"""The Data page's pull tab: a Prometheus-compatible server (Prometheus, Thanos, Mimir,
VictoriaMetrics) pulled into the page's store, with the connection, authentication and TLS.

Where a pull may go is the library's decision (:func:`analytics.access.check_pull`, called by
:func:`analytics.writes.pull`): the local operator as before roles existed, anyone else only the
servers in ``[live] servers`` and the secrets listed for each (``[live.secrets]``), and nobody a
link-local or metadata address. The page never says whether a variable it was not told about
is set.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Callable

import duckdb
import polars as pl
import streamlit as st

from analytics.access import Identity
from analytics.errors import ConfigError, TidelensError
from analytics.fieldhelp import field_help
from analytics.live import (
    AuthConfig,
    ClientConfig,
    PromClient,
    PullError,
    Scope,
    SeriesGuardError,
    describe,
    fleet_queries,
    pull,
    timeline_queries,
)
from analytics.live.client import allowed_servers, listed_secrets, safe_url
from analytics.live.pull import DEFAULT_MAX_SERIES
from analytics.text import code, md
from analytics.times import iso_utc, parse_time_ms
from analytics.view import STEP_CHOICES_S, ViewSettings, format_step
from analytics.writes import pull as checked_pull
from pages._data_upload import offer_switch, seeded
from pages._show import kpi_row, show_table
from pages._store import config_file, writer

ss = st.session_state
# An environment variable's name, as a shell accepts it: anything else is likely a pasted secret.
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _secret_source(prefix: str, what: str, reveal: Callable[[str], bool]) -> tuple[str | None, str | None, str | None]:
    """``(env_name, file_path, problem)`` of one secret, named by the user and never typed in;
    whether a variable is set is said only where ``reveal(name)`` (a name the operator listed)."""
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
        if not reveal(name):
            pass  # whether an unlisted variable exists is never said
        elif os.environ.get(name):
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


def _auth_form(reveal: Callable[[str], bool]) -> tuple[Any, str | None]:
    """The pull's :class:`AuthConfig` from the form, or why it cannot be built."""

    mode = st.radio("Authentication", ["none", "bearer", "basic"], key="pull_auth", horizontal=True,
                    format_func={"none": "none", "bearer": "bearer token",
                                 "basic": "basic auth"}.__getitem__,
                    help="Secrets are named (an environment variable or a file), never typed "
                         "into the page, and never put in the URL.")
    auth = AuthConfig()
    problem = None
    if mode == "bearer":
        env, path, problem = _secret_source("pull_token", "Token", reveal)
        auth.bearer_token_env, auth.bearer_token_file = env, path
    elif mode == "basic":
        auth.basic_user = st.text_input("User", key="pull_user",
                                        help=field_help(AuthConfig, "basic_user")).strip() or None
        env, path, problem = _secret_source("pull_password", "Password", reveal)
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


def _run_pull(what: str, v: ViewSettings, target: Path,
              run: Callable[[Callable[[int, int, str], None]], Any]) -> dict[str, Any]:
    """Run one pull (``run(progress)``, through :func:`analytics.writes.pull`) into the page's
    store under a progress bar; its outcome as the page shows it.

    Every failure becomes a message: the library's (server down, query error with the server's
    words, series guard, allowlist), a store another program holds, or an unexpected bug.
    """

    bar = st.progress(0.0, text=f"Pulling from {what}...")

    def progress(done: int, total: int, message: str) -> None:
        bar.progress(done / max(total, 1), text=f"[{done}/{total}] {message}")

    outcome: dict[str, Any] = {"error": None, "what": what}
    try:
        report = run(progress)
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
        offer_switch(v)
    return outcome


def pull_panel(v: ViewSettings, target: Path, who: Identity) -> None:
    st.caption(f"Pull what the timelines need, aggregated by the server, into {code(target)}. "
               "Pulling the same range again fetches only what is new.")
    try:
        allowed = allowed_servers(config_file())
        listed = listed_secrets(config_file())
    except ConfigError as exc:
        st.error(md(exc), icon=":material/error:")
        return
    if not who.is_local and not allowed:
        st.info(f"Pulls from this shared server go only to the servers its operator lists under "
                f"`[live] servers` in `{config_file().name}`, and none is listed.", icon=":material/block:")
        return
    if allowed is not None:
        st.caption(f"This deployment allows: {', '.join(f'`{a}`' for a in allowed) or '(none)'} "
                   f"([live] servers in `{config_file().name}`).")
    else:
        # A named secret's value goes to whichever server is asked: shared deployments list theirs.
        st.caption(f"Any server may be asked. A shared deployment should list its servers under "
                   f"`[live] servers` in `{config_file()}`.")
    if not who.is_local:
        named = {s: ", ".join(f"`{n}`" for n in names) for s, names in (listed or {}).items() if names}
        if named:
            st.caption("Secrets listed for them: " + "; ".join(f"`{s}`: {n}" for s, n in named.items()))
    url = st.text_input("Server URL", key="pull_url", placeholder="http://prometheus:9090",
                        help="The query API's base: Prometheus http://host:9090, Thanos Query, "
                             "Mimir https://host/prometheus, VictoriaMetrics http://host:8428").strip()
    a, b, c = st.columns(3)
    start_text = a.text_input("From (UTC)", key=seeded("pull_from", "now-1d"),
                              help="ISO-8601 (2026-11-28T09:30Z), epoch seconds, or now-2h")
    end_text = b.text_input("To (UTC)", key=seeded("pull_to", "now"), help="same forms as From")
    steps = sorted({*STEP_CHOICES_S, v.step_s})
    if ss.get("pull_step") not in steps:
        ss.pop("pull_step", None)
    step_s = c.selectbox("Step", steps, key=seeded("pull_step", v.step_s),
                         format_func=format_step,
                         help="Each stored point is the step ending at it; pull at the analysis "
                              "step (or finer) you will use.")
    a, b, c = st.columns([2, 1, 1])
    scope_text = a.text_input("Scope", key=seeded("pull_scope", "pool"),
                              help="pool (everything), or label=value[,label=~regex] added to "
                                   "every selector, e.g. namespace=inference")
    catalogue = b.selectbox("Queries", ["timeline", "fleet"], key="pull_catalogue",
                            format_func={"timeline": "timelines' inputs",
                                         "fleet": "fleet counts"}.__getitem__,
                            help="timelines' inputs: device series per step, services summed "
                                 "(what every page reads); fleet counts: GPU counts per holder "
                                 "for very large fleets")
    max_series = c.number_input("Max series per query", min_value=1, step=1000,
                                key=seeded("pull_max_series", DEFAULT_MAX_SERIES),
                                help="A query returning more series stops the pull with a message")
    with st.expander("Connection, authentication and TLS"):
        auth, auth_problem = _auth_form(
            lambda name: who.is_local or name in (listed or {}).get(safe_url(url), []))
        a, b = st.columns(2)
        timeout_s = a.number_input("Timeout (s)", min_value=1.0, step=10.0,
                                   key=seeded("pull_timeout", ClientConfig.timeout_s),
                                   help=field_help(ClientConfig, "timeout_s"))
        retries = b.number_input("Retries", min_value=0, max_value=10,
                                 key=seeded("pull_retries", ClientConfig.retries), help=field_help(ClientConfig, "retries"))
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
    if who.is_local and allowed is None and auth.names_secrets():
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
        ss["pull_outcome"] = _run_pull(what, v, target, lambda progress: checked_pull(
            who, url, auth, allowed=allowed, listed=listed, open_writer=writer(target),
            make_client=lambda: PromClient(url, auth, config, allowed=allowed),
            run=lambda store, client: pull(
                store, client, start_ms, end_ms, step_ms=step_ms, scope=scope, queries=queries,
                max_series=int(max_series), incremental=not full, progress=progress)))
        ss["pull_running"] = False
        st.rerun()  # the sidebar ran before this pull: let it see the new data span
    _show_pull_outcome()
