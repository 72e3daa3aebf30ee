"""The Data page's own uploads and local GPUs: the Files tab (any format Tidelens reads, an
archive member by member) and the NVML tab (sampling this machine's GPUs), and what the other
tabs share: offering to analyse what was just added, fields seeded once.

Every write goes through :mod:`analytics.writes`, which checks the visitor's role and records it.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

import duckdb
import polars as pl
import streamlit as st

from analytics.access import Identity
from analytics.errors import ConfigError, TidelensError
from analytics.fieldhelp import field_help
from analytics.ingest import group_messages
from analytics.live.timespec import parse_duration_ms
from analytics.nvml import CollectConfig, available, collect
from analytics.text import code, md
from analytics.times import parse_time_ms
from analytics.view import ViewSettings
from analytics.writes import collect as guarded_collect
from pages._show import show_table
from pages._store import load_uploads, writer

ss = st.session_state


def offer_switch(v: ViewSettings) -> None:
    """After new data lands in the uploads store, offer to analyse it instead of the sample."""
    if v.source == "sample":
        ss["upload_offer_switch"] = True


def seeded(key: str, default: Any) -> str:
    """``key``, its value set to ``default`` the first time: the fields' values live in session
    state only (carried across tab switches), so the widgets take no ``value=`` of their own."""
    ss.setdefault(key, default)
    return key


def files_panel(v: ViewSettings, target: Path, who: Identity) -> None:
    """The Files tab: upload files into ``target``, then their outcome, one box per failure reason."""
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
            results[:0] = [asdict(o) for o in load_uploads(target, f.name, f.getvalue(), at_ms, who=who)]
            done.add(f.file_id)
        bar.progress(1.0, text=f"Done: {len(new)} file(s)")
        offer_switch(v)
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


def collect_panel(v: ViewSettings, target: Path, who: Identity) -> None:
    ok, message = available()
    if not ok:
        st.info(f"Local GPUs cannot be sampled: {message}.", icon=":material/memory:")
        return
    st.success(f"NVML sees {message}.", icon=":material/memory:")
    st.caption(f"Samples this machine's GPUs under dcgm-exporter's names into {code(target)}. The page "
               "waits while sampling; for hours, run `tidelens collect` in a terminal instead.")
    a, b = st.columns(2)
    interval_text = a.text_input("Every", key=seeded("nvml_interval", "1s"),
                                 help=field_help(CollectConfig, "interval_ms") + " (e.g. 500ms, 1s, 10s)")
    duration_text = b.text_input("For", key=seeded("nvml_duration", "1m"),
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
        ss["nvml_outcome"] = _run_collect(cfg, collect, v, target, who)
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

    def __init__(self, open_writer: Callable[[], Any]) -> None:
        self.open_writer = open_writer

    def load(self, *args: Any, **kwargs: Any) -> Any:
        with self.open_writer() as store:
            return store.load(*args, **kwargs)


def _run_collect(cfg: Any, collect: Callable[..., Any], v: ViewSettings, target: Path,
                 who: Identity) -> dict[str, Any]:
    """Sample local GPUs into the page's store under a progress bar; the outcome to show."""
    bar = st.progress(0.0, text="Sampling...")

    def progress(done: int, total: int, msg: str) -> None:
        bar.progress(done / max(total, 1), text=f"[{done}/{total}] {msg}")


    try:
        results = guarded_collect(who, writer(target),
                                  lambda: collect(_OpenPerLoad(writer(target)), cfg, progress=progress))
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
            offer_switch(v)
    return outcome


def interrupted(kind: str) -> bool:
    """Whether the last pull or collection of ``kind`` was cut short by a rerun (a click).

    Streamlit stops a running script when the user interacts with the page; the library keeps
    what it finished (every pulled chunk, every flushed sample), so only the message is lost.
    """
    if ss.get(f"{kind}_running"):
        ss[f"{kind}_running"] = False
        return True
    return False
