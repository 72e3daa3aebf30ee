"""The What-if page's *Before and after a change*: record a change (or confirm one Tidelens
proposes), then set the period before it against the period after, and score the what-if.

Recording goes through :func:`analytics.writes.record_policy_change` (the visitor's role checked,
the change in the audit record); a visitor who may not record sees why instead of the form.

Widgets and cached calls only: the numbers are :func:`analytics.change.compare.compare_change`'s,
the words :mod:`analytics.change.findings`'s. The basis (the whole span's timelines, events and
Kueue signals) is built once per store version; dragging the change or the periods cuts it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import polars as pl
import streamlit as st

from analytics.access import ACTION_WORDS, Identity, allows
from analytics.change.basis import change_basis
from analytics.change.candidates import propose_from
from analytics.change.compare import CompareConfig, compare_change
from analytics.change.comparison import ChangeComparison
from analytics.change.record import PolicyChange, list_changes, parse_window
from analytics.change.findings import finding, measure_rows, score_header, score_rows
from analytics.errors import TidelensError
from analytics.fieldhelp import fields_help
from analytics.slo import SloTable
from analytics.text import md
from analytics.times import iso_utc, parse_time_ms
from analytics.whatif.policies import POLICIES
from analytics.writes import record_policy_change
from pages._access import identity
from pages._show import choose, show_table
from pages._store import config_version, load_workload_map, open_store, writer

HELP = fields_help(PolicyChange)
CMP_HELP = fields_help(CompareConfig)


@st.cache_resource(show_spinner="Reading the store's whole span for before and after...", max_entries=4)
def basis_for(path: str, version: str, step_s: int, slos: SloTable,
              map_version: str) -> Any:  # analytics.change.basis.ChangeBasis

    with open_store(path) as store:
        return change_basis(store, step_s=step_s, slos=slos, wmap=load_workload_map())


@st.cache_data(show_spinner=False, max_entries=8)
def recorded_changes(path: str, version: str) -> list[PolicyChange]:
    with open_store(path) as store:
        return list_changes(store)


@st.cache_data(show_spinner=False, max_entries=8)
def changes_and_candidates(path: str, version: str, step_s: int, slos: SloTable,
                           map_version: str) -> tuple[list[PolicyChange], list[Any]]:

    basis = basis_for(path, version, step_s, slos, map_version)
    recorded = recorded_changes(path, version)
    with open_store(path) as store:
        return recorded, propose_from(store, basis.timelines, step_s, recorded)


def _record(who: Identity, path: str, change: PolicyChange) -> None:
    try:
        record_policy_change(who, writer(path), change)
    except TidelensError as exc:
        st.error(md(exc), icon=":material/error:")
    else:
        st.toast(md(f"Recorded: {change.describe()}"))
        st.rerun()


def _record_form(who: Identity, path: str) -> None:
    with st.form("w_change_form", border=False):
        c = st.columns([2, 3])
        at = c[0].text_input("When (UTC)", key="w_change_at", help=HELP["at_ms"], placeholder="2026-10-12T00:00Z")
        policy = c[1].radio("Policy", POLICIES, key="w_change_policy", horizontal=True, help=HELP["policy"])
        c = st.columns(5)
        res = c[0].number_input("Reserved GPUs", min_value=0, value=None, step=1, help=HELP["reservation_gpus"])
        rel = c[1].number_input("Release hour", min_value=0.0, max_value=23.99, value=None, help=HELP["release_hour"])
        win = c[2].text_input("Tidal window", placeholder="22-8", help=HELP["tidal_window"])
        mig = c[3].text_input("MIG profile", placeholder="3g.40gb", help=HELP["mig_profile"])
        rpg = c[4].number_input("Replicas per GPU", min_value=2, max_value=16, value=None, step=1,
                                help=HELP["replicas_per_gpu"])
        if st.form_submit_button("Record the change", icon=":material/add:"):
            try:
                change = PolicyChange(at_ms=parse_time_ms(at, what="the change's time"), policy=policy,
                                      reservation_gpus=None if res is None else int(res), release_hour=rel,
                                      tidal_window=parse_window(win) if win.strip() else None,
                                      mig_profile=mig.strip() or None,
                                      replicas_per_gpu=None if rpg is None else int(rpg),
                                      source="the What-if page").validate()
            except TidelensError as exc:
                st.error(md(exc), icon=":material/error:")
            else:
                _record(who, path, change)


def change_section(v: Any, src: Any) -> None:
    """The section's widgets and results for the view's store (see the module)."""

    args = (src.path, src.version, v.step_s, v.slos, config_version())
    who = identity()
    may_record = allows(who, "record_change")
    try:
        recorded, candidates = changes_and_candidates(*args)
    except TidelensError as exc:
        st.warning(md(exc), icon=":material/warning:")
        return
    if candidates:
        st.markdown("**Changes the data suggests** (none is recorded until you confirm it)")
        for i, cand in enumerate(candidates):
            row = st.columns([5, 1])
            row[0].markdown(md(f"{cand.change.describe()}: {cand.evidence}" + (" (recorded)" if cand.recorded else "")))
            if (may_record and not cand.recorded
                    and row[1].button("Record", key=f"w_change_cand_{i}_go", icon=":material/check:")):
                _record(who, src.path, replace(cand.change, source="a candidate the user confirmed"))
    if may_record:
        with st.popover("Record a change", icon=":material/add:"):
            _record_form(who, src.path)
    else:
        st.caption(f"{ACTION_WORDS['record_change'].capitalize()} needs the editor role"
                   f"{f'; you have the {who.role} role' if who.role else ''}.")
    if not recorded:
        st.caption("No change recorded: record one (or confirm a candidate) to compare before with after.")
        return
    chosen = choose("Change", list(range(len(recorded))), key="w_change_pick", widget="radio",
                    format_func=lambda i: recorded[i].describe(), default=len(recorded) - 1)
    change = recorded[chosen]
    # Their values live in the session (page_setup carries w_* keys across pages): a widget given
    # a default as well warned "created with a default value but also had its value set via the
    # Session State API" once a change was recorded. The defaults go in the session instead.
    ss = st.session_state
    for key, default in (("w_change_shift", 0), ("w_change_before", 7.0), ("w_change_after", 7.0),
                         ("w_change_score", False)):
        ss.setdefault(key, default)
    c = st.columns(4)
    shift_h = c[0].slider("Move the change (hours)", -72, 72, key="w_change_shift",
                          help="drag the change's time to see the periods either side of another moment")
    before = c[1].slider("Days before", 0.5, 28.0, step=0.5, key="w_change_before", help=CMP_HELP["before_days"])
    after = c[2].slider("Days after", 0.5, 28.0, step=0.5, key="w_change_after", help=CMP_HELP["after_days"])
    score = c[3].toggle("Score the what-if", key="w_change_score",
                        help="calibrate both periods and replay them (seconds the first time for a period)")
    at = change.at_ms + shift_h * 3_600_000
    basis = basis_for(*args)
    try:
        out = compare_change(basis, at, CompareConfig(before_days=before, after_days=after), change, score=score)
    except TidelensError as exc:
        st.warning(md(exc), icon=":material/warning:")
        return
    missed = out.score is not None and out.score.missed
    (st.warning if missed else st.info)(md(finding(out)), icon=":material/compare_arrows:")
    st.markdown("\n".join(f"- {md(s)}" for s in out.sentences))
    if shift_h:
        st.caption(md(f"Periods either side of {iso_utc(at)}, {shift_h:+d} h from the recorded change."))
    show_table(pl.DataFrame(measure_rows(out), schema=["measure", "before", "after"], orient="row"),
               key="w_change_table")
    if out.scored:
        show_table(pl.DataFrame(score_rows(out), schema=score_header(out), orient="row"), key="w_change_score_table")


def change_for_review(v: Any, src: Any) -> ChangeComparison | None:
    """The capacity review's before/after: the latest change recorded inside the view's range,
    compared and scored on the page's cached basis (None, without building it: no change
    recorded there)."""

    inside = [c for c in recorded_changes(src.path, src.version) if (v.start_ms is None or c.at_ms > v.start_ms)
              and (v.end_ms is None or c.at_ms < v.end_ms)]
    if not inside:
        return None
    basis = basis_for(src.path, src.version, v.step_s, v.slos, config_version())
    return compare_change(basis, inside[-1].at_ms, None, inside[-1])
