"""Chargeback: who caused the violation minutes, what a three-pool plan would cost, and what
each team would pay under each policy.

Reads the same scenario as the What-if page (its ``w_*`` URL keys: the start, the service,
the edited parameters), so a link from there opens the same bill.
"""

from __future__ import annotations

import streamlit as st

from analytics.text import md
from analytics.units import money
from analytics.charts.whatif import bills_figure
from analytics.errors import TidelensError
from analytics.measures import over_slo_label
from analytics.whatif import POLICIES, POLICY_HELP, PRESETS, capacity_plan, reservation
from analytics.whatif.agree import pool_agreement
from analytics.whatif.transforms import Transforms, apply_transforms, transforms_from, transforms_of
from analytics.whatif import form
from analytics.whatif.form import MODEL_DAYS
from analytics.whatif.ledger import bills, pool_ledger, summarise_ledger
from analytics.whatif.reuse import compare_reusing
from pages._caches import memo
from pages._queries import EventsQuery, pool_answer_for, store_pool_or_stop
from pages._show import choose, kpi_row, show_chart, show_table, show_table_with_notes
from pages._sidebar import keep_in_link, page_setup, seed_from_link, source

STORE = "store"
PRESET_DAYS = 7
PERIODS_H = {"day": 24.0, "week": 168.0}


v = page_setup()
st.title("Chargeback")
# The answer (the pool's best policy and who pays) above the controls, filled once it is known.
headline = st.container(key="headline")
ss = st.session_state
qp = st.query_params

src = source()
has_store = not src.problem and bool(src.path)
sources = ([STORE] if has_store else []) + sorted(PRESETS)
if "cb_seeded" not in ss:
    ss["cb_seeded"] = True
    want = qp.get("w_src")
    ss["cb_src"] = want if want in sources else sources[0]
    if qp.get("w_svc"):
        ss["cb_svc"] = qp.get("w_svc")
if ss.get("cb_src") not in sources:
    ss["cb_src"] = sources[0]

top = st.columns([2, 2, 2])
kind = top[0].radio("Scenario", sources, key="cb_src",
                    format_func=lambda s: "The store (calibrated)" if s == STORE
                    else f"Preset: {s}")
pool = cal = None
days = MODEL_DAYS
if kind == STORE:
    cal, pool = store_pool_or_stop(src, v, top[1], "cb_svc")
    # the What-if page's days (its w_days key): the same period, the same bill
    days = int(qp.get("w_days", MODEL_DAYS)) if str(qp.get("w_days", "")).isdigit() else MODEL_DAYS
    base = form.last_days(cal.scenario, days)
else:
    base = PRESETS[kind](PRESET_DAYS)

# The What-if page's edits (in the URL) apply to the same start.
chosen_t = Transforms()
try:
    if qp.get("w_src", sources[0]) == kind:
        chosen_t = transforms_from(qp.to_dict())
        scn = apply_transforms(form.apply(base, form.from_query(qp.to_dict())), chosen_t)
    else:
        scn = base
except TidelensError as exc:
    st.warning(f"Edited parameters in the link ignored: {md(exc)}", icon=":material/link_off:")
    scn, chosen_t = base, Transforms()
seed_from_link("cb_price", "cb_price", float, lambda x: x >= 0)
if "cb_price" not in ss:
    ss["cb_price"] = float(scn.pool.violation_price_per_min)
price = top[2].number_input("Price of a violation minute ($)", min_value=0.0, step=5.0,
                            key="cb_price",
                            help="Charged to the team whose workload caused the minute")
scn = form.apply(scn, {"pool.violation_price_per_min": price})
keep_in_link("cb_price", float(price), default=float(base.pool.violation_price_per_min))
qp["w_src"] = kind
if kind == STORE and ss.get("cb_svc"):
    qp["w_svc"] = ss["cb_svc"]

results = memo(("compare", scn.fingerprint(), tuple(POLICIES)), lambda: compare_reusing(scn, tuple(POLICIES)))
# The What-if page's answer: every service of the pool, from the same cached replays.
answer = pool_answer_for(v, src, pool, scn, results, days=days, policies=tuple(POLICIES), transforms=chosen_t)
headline.success(md(answer.sentence()), icon=":material/check_circle:")
st.caption(f"{md(scn.description)} · SLO p99 {scn.service.slo_ms:g} ms · {scn.pool.gpus} GPUs")
if transforms_of(scn):
    st.warning("Forward-looking what-if, not what happened: " + md("; ".join(transforms_of(scn))),
               icon=":material/trending_up:")
if kind == STORE:  # the What-if page's sentence, from the same function on the same replays
    asked = EventsQuery.from_view(v, src, ss)
    try:
        found = asked.run()
    except TidelensError:
        pass
    else:
        agreed = memo(("agree", scn.fingerprint(), tuple(POLICIES), asked, answer.pool, tuple(answer.services)),
                      lambda: pool_agreement(found, answer))
        st.info(md(agreed.sentence()), icon=":material/balance:")

st.subheader("Externality ledger")
c = st.columns(2)
seed_from_link("cb_policy", "cb_policy", valid=POLICIES.__contains__)
seed_from_link("cb_period", "cb_period", valid=PERIODS_H.__contains__)
policy = choose("Policy", POLICIES, key="cb_policy", where=c[0], widget="radio",
                help="; ".join(f"{p}: {h}" for p, h in POLICY_HELP.items()))
period = c[1].radio("Period", list(PERIODS_H), horizontal=True, key="cb_period")
keep_in_link("cb_policy", policy, default=list(POLICIES)[0])
keep_in_link("cb_period", period, default=list(PERIODS_H)[0])
# Every service of the pool, each its minutes over its own SLO (one service alone for a preset).
book = pool_ledger(((r.scenario, r.results) for r in answer.replays), policy, PERIODS_H[period])
summary = summarise_ledger(book, span_h=answer.period_days * 24, period_h=PERIODS_H[period])
k = kpi_row(3)
k[0].metric(over_slo_label("pool", modelled=True), f"{summary.violation_minutes:,.0f}",
            border=True, help=f"{md(answer.scope())}, under {policy}; the What-if page's backtest sets the "
                              "replay beside what was observed")
k[1].metric("Charged to other teams", money(summary.charged_to_others), border=True,
            help="Minutes caused by another team's workload holding or sharing the GPUs")
# The team is the metric's value and its bill the delta line: "team: $35,123" in one value was cut
# off on a projector.
k[2].metric("Billed the most", md(summary.top_payer) if summary.top_payer else "nobody else",
            delta=summary.top_payer_bill() if summary.top_payer else None,
            delta_color="off", delta_arrow="off", border=True,
            help="The team whose workloads caused the most violation minutes of other teams' services")
show_table(summary.table, key="cb_ledger", column_config={  # its download is a CSV
    "cost ($)": st.column_config.NumberColumn("cost", format="$%,.0f"),
    "minutes over the SLO, modelled": st.column_config.NumberColumn(format="%,.1f")})

name = scn.modelled_service()
st.subheader(f"Breakdown: what each team would pay in {md(name)}'s replay, by policy")
bill = bills(scn, results)
show_chart(lambda: bills_figure(bill, scope=f"{name}'s replay"), bill, "chargeback-bills", memo_key=scn.fingerprint())

st.subheader("Three-pool plan")
plan = capacity_plan(scn)
reserved, why = reservation(scn)
st.caption(f"Pool A is the inference reservation the What-if's partitioned and MIG policies use: "
           f"{reserved} GPUs ({'set on the What-if page' if why == 'set' else md(why)}). Change it, or its "
           "headroom, on the What-if page; this page reads the same link.")
show_table_with_notes(plan, label="pool", note="purpose", key="cb_plan", column_config={
    "pool": "Pool", "gpus": st.column_config.NumberColumn("GPUs", format="%,.0f"),
    "price_per_gpu_h": st.column_config.NumberColumn("Price per GPU-hour", format="dollar"),
    "cost_per_day": st.column_config.NumberColumn("Cost per day", format="dollar")})
st.caption(f"Plan: {int(plan['gpus'].sum())} GPUs against {scn.pool.gpus} today, "
           f"{money(plan['cost_per_day'].sum())} a day.")
