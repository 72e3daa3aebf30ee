"""What-if: one demand replayed under each pool policy, with every parameter editable.

The scenario starts from the store (calibrated, with its backtest) or a preset; the
parameters that differ from that start travel in the URL (``w_*``), so a copied link
reopens the same what-if. Calibration is cached; a slider move only re-runs the model.
"""

from __future__ import annotations

import uuid

import orjson
import streamlit as st

from analytics.text import md
from analytics.charts.whatif import (backtest_figure, bands_figure, headroom_figure, next_gpus_figure,
                                     typical_day_figure)
from analytics.errors import TidelensError
from analytics.measures import over_slo_label
from analytics.whatif import (POLICIES, POLICY_HELP, PRESETS, PoolParams, ServiceParams,
                            burst_bands, field_specs, headroom_by_hour, next_gpus,
                            scenario_from_toml, scenario_to_toml)
from analytics.whatif import form, reservation
from analytics.whatif.form import MODEL_DAYS
from analytics.whatif.answer import PoolCalibration
from analytics.whatif.calibrate import Calibration
from analytics.whatif.agree import pool_agreement
from analytics.whatif.transforms import apply_transforms, transform_specs, transforms_from, transforms_of
from analytics.whatif.ledger import policy_table, typical_day
from analytics.whatif.reuse import compare_reusing
from analytics.plan import make_plan, plan_zip
from pages._caches import memo
from pages._change import change_section
from pages._queries import EventsQuery, in_background, pool_answer_for, rerun_when_done, store_pool_or_stop
from pages._show import choose, kpi_row, show_chart, show_table
from pages._sidebar import page_setup, source

STORE = "store"
FILE = "file"
PRESET_DAYS = 7
BAND_SEEDS = 6
# The charts under the policy tables, one tab each; the link holds the key (w_view).
VIEWS = {"day": "A typical day", "next": "What the next GPUs buy", "sweeps": "Headroom and bursts"}


@st.cache_data(show_spinner=False, max_entries=16)
def cached_preset(name: str, days: int):
    return PRESETS[name](days)


v = page_setup()
st.title("What-if: pool policies")
# The answer first (the pool's best policy and what it removes), filled once the replays below
# have run: on a projector the controls took the whole first screen.
answer_box = st.container(key="headline")
ss = st.session_state
qp = st.query_params

src = source()
has_store = not src.problem and bool(src.path)
sources = ([STORE] if has_store else []) + sorted(PRESETS) + ([FILE] if "w_file" in ss else [])
if "w_seeded" not in ss:
    ss["w_seeded"] = True
    ss["w_url"] = form.from_query(qp.to_dict())
    want = qp.get("w_src")
    ss["w_src"] = want if want in sources else sources[0]
    pols = [p for p in qp.get("w_pol", ",".join(POLICIES)).split(",") if p in POLICIES]
    ss["w_pol"] = pols or list(POLICIES)
    if qp.get("w_svc"):
        ss["w_svc"] = qp.get("w_svc")
    view = qp.get("w_view") or ("sweeps" if qp.get("w_sweeps") == "1" else "day")  # w_sweeps: older links
    ss["w_view"] = VIEWS.get(view, VIEWS["day"])
if ss.get("w_next_src") in sources:
    ss["w_src"] = ss.pop("w_next_src")
if ss.get("w_src") not in sources:
    ss["w_src"] = sources[0]

labels = {STORE: "The store (calibrated)", FILE: "Loaded TOML file"}
top = st.columns([2, 2, 3])
kind = top[0].radio("Start from", sources, key="w_src",
                    format_func=lambda s: labels.get(s, f"Preset: {s}"),
                    help="The store's own traffic and pool, calibrated; or a preset story")

cal: Calibration | None = None
pool: PoolCalibration | None = None
if kind == STORE:
    cal, pool = store_pool_or_stop(src, v, top[1], "w_svc")
if kind == STORE and cal is not None:
    if "w_days" not in ss:
        ss["w_days"] = int(qp.get("w_days", MODEL_DAYS)) if str(qp.get("w_days", "")).isdigit() \
            else MODEL_DAYS
    days = top[1].number_input("Days modelled (the period's last)", min_value=1, max_value=366,
                               step=1, key="w_days",
                               help="The what-ifs replay this many days of the store's traffic "
                                    "(the backtest uses the whole range)")
    base = form.last_days(cal.scenario, int(days))
elif kind == FILE:
    base = ss["w_file"]
else:
    base = cached_preset(kind, PRESET_DAYS)

# A new starting point resets the controls to its values.
base_id = f"{kind}|{base.name}"
if ss.get("w_base_id") != base_id:
    first = "w_base_id" not in ss
    for key in [k for k in ss if isinstance(k, str) and k.startswith("w_f.")]:
        del ss[key]
    ss.pop("w_res_auto", None)
    ss["w_base_id"] = base_id
    if not first:
        ss["w_url"] = {}

policies = top[2].pills("Policies", list(POLICIES), selection_mode="multi", key="w_pol", wrap=True,
                         help="; ".join(f"{p}: {h}" for p, h in POLICY_HELP.items())) or []
if not policies:
    st.info("Choose at least one policy.", icon=":material/info:")
    st.stop()

values = form.editable(base)
url = ss.get("w_url", {})
changes: dict[str, object] = {}
# Streamlit forgets an undrawn widget's value: carry every parameter across folded groups.
for key in [k for k in ss if isinstance(k, str) and k.startswith("w_f.")]:
    ss[key] = ss[key]
with st.sidebar:
    st.subheader("Advanced: model parameters")
    st.caption("Calibrated from the store or the preset (each with its source); the decisions "
               "are on the page")
    for group, cls in (("service", ServiceParams), ("pool", PoolParams)):
        # Folded groups run no widgets (a page with every parameter drawn opens a second slower).
        shown = [spec for spec in field_specs(cls) if f"{group}.{spec['name']}" not in form.DECISIONS]
        panel = st.expander(f"{group.title()} ({len(shown)})", key=f"w_grp_{group}",
                            on_change="rerun")
        for spec in field_specs(cls):
            key = f"{group}.{spec['name']}"
            wkey = f"w_f.{key}"
            default = values[key]
            if wkey not in ss:
                try:
                    ss[wkey] = form.parse_value(url.get(key, default), default, key)
                except TidelensError:
                    ss[wkey] = default
            if not panel.open or key in form.DECISIONS:  # decisions: drawn on the page
                changes[key] = ss[wkey]
                continue
            label = f"{spec['name']} ({spec['unit']})" if spec.get("unit") else spec["name"]
            help_ = form.param_help(key, base)
            if isinstance(default, bool):
                changes[key] = panel.checkbox(label, key=wkey, help=help_)
            elif isinstance(default, (int, float)):
                num = int if isinstance(default, int) else float
                changes[key] = panel.number_input(
                    label, min_value=num(spec.get("min", 0)),
                    max_value=num(spec["max"]) if "max" in spec else None,
                    step=num(spec.get("step", 1)), key=wkey, help=help_)
            elif spec.get("choices"):
                changes[key] = panel.selectbox(label, list(spec["choices"]), key=wkey, help=help_)
            else:
                changes[key] = panel.text_input(label, key=wkey, help=help_)

# The decisions a review takes, first and with units: the same parameters (and URL keys) as the
# advanced panel, drawn once, here.
decide = st.container(border=True)
decide.markdown("**Decisions**")
d = decide.columns([1, 1, 2])  # what the pool is and what inference owns
changes["pool.gpus"] = d[0].number_input("GPUs in the pool", min_value=1, max_value=100000, step=1,
                                         key="w_f.pool.gpus", help=form.param_help("pool.gpus", base))
if ss["w_f.pool.headroom"] > 1.0:
    ss["w_f.pool.headroom"] = 1.0
changes["pool.headroom"] = d[1].slider("Headroom", 0.0, 1.0, step=0.05, format="percent",
                                       key="w_f.pool.headroom", help=form.param_help("pool.headroom", base))
if "w_res_auto" not in ss:
    ss["w_res_auto"] = int(ss["w_f.pool.reservation_gpus"]) < 0
auto_gpus, _ = reservation(form.apply(base, {**changes, "pool.reservation_gpus": -1}))
with d[2]:
    if st.toggle("Automatic reservation", key="w_res_auto",
                 help="What the observed peak needed (desired replicas at peak x GPUs per replica) "
                      "plus the headroom"):
        changes["pool.reservation_gpus"] = -1
        st.metric("GPUs reserved for inference", f"{auto_gpus:,} GPUs", border=False,
                  help="The partitioned, MIG and three-pool plans all use this one reservation")
    else:
        top_gpus = int(changes["pool.gpus"])
        if not 0 <= int(ss["w_f.pool.reservation_gpus"]) <= top_gpus:
            ss["w_f.pool.reservation_gpus"] = min(auto_gpus, top_gpus)
        changes["pool.reservation_gpus"] = st.slider(
            "GPUs reserved for inference", 0, top_gpus, step=1, key="w_f.pool.reservation_gpus",
            format="%d GPUs", help=form.param_help("pool.reservation_gpus", base))
h = decide.columns(4)  # when batch may run (hours in quarters), and how GPUs are shared
for col, (key, label) in zip(h, (("pool.polite_release_hour", "Batch leaves at (polite)"),
                                 ("pool.tidal_start_hour", "Tidal: batch from"),
                                 ("pool.tidal_end_hour", "until"))):
    changes[key] = col.select_slider(label, form.hour_choices(ss[f"w_f.{key}"]), format_func=form.hour_text,
                                     key=f"w_f.{key}", help=form.param_help(key, base))
changes["pool.timeslice_replicas"] = h[3].number_input(
    "Time-slicing: pods per GPU", min_value=2, max_value=16, step=1, key="w_f.pool.timeslice_replicas",
    help=form.param_help("pool.timeslice_replicas", base))
mig = form.mig_choices(str(ss["w_f.pool.gpu_model"]))
if ss["w_f.pool.mig_profile"] not in mig:
    mig.append(ss["w_f.pool.mig_profile"])
changes["pool.mig_profile"] = choose("MIG slice", mig, key="w_f.pool.mig_profile", where=decide,
                                     help=form.param_help("pool.mig_profile", base))
checkpoints = list(form.CHECKPOINT_CHOICES_MIN)
if ss["w_f.pool.checkpoint_interval_min"] not in checkpoints:
    checkpoints = sorted({*checkpoints, float(ss["w_f.pool.checkpoint_interval_min"])})
changes["pool.checkpoint_interval_min"] = choose(
    "Batch checkpoints", checkpoints, key="w_f.pool.checkpoint_interval_min", where=decide,
    format_func=form.checkpoint_text, help=form.param_help("pool.checkpoint_interval_min", base))

# Forward-looking what-ifs: chosen here, named above the tables and in the JSON; never the default.
specs = transform_specs()
for spec in specs:
    tkey = f"w_x.{spec['name']}"
    if tkey not in ss:
        try:
            ss[tkey] = form.parse_value(qp.get(tkey, spec["default"]), spec["default"], spec["name"])
        except TidelensError:
            ss[tkey] = spec["default"]
    ss[tkey] = ss[tkey]  # kept while the panel is folded
ahead = st.expander("Forward-looking what-ifs (traffic growth, larger or more jobs, a typical day)",
                    icon=":material/trending_up:", key="w_ahead", on_change="rerun")
if ahead.open:
    cols = ahead.columns(len(specs))
    for col, spec in zip(cols, specs):
        label, tkey = spec["name"].replace("_", " ").capitalize(), f"w_x.{spec['name']}"
        if isinstance(spec["default"], bool):
            col.toggle(label, key=tkey, help=spec["help"])
        else:
            num_t = type(spec["default"])
            col.number_input(label, min_value=num_t(spec["min"]), max_value=num_t(spec["max"]),
                             step=num_t(spec["step"]), key=tkey, help=spec["help"])
chosen_t = transforms_from(ss)

try:
    scn = apply_transforms(form.apply(base, changes), chosen_t)
except TidelensError as exc:
    st.error(md(exc), icon=":material/error:")
    st.stop()

# The URL carries the start, the policies and what differs from the start.
want = {"w_src": kind, "w_pol": ",".join(policies)}
if kind == STORE and ss.get("w_svc"):
    want["w_svc"] = ss["w_svc"]
if kind == STORE and int(ss.get("w_days", MODEL_DAYS)) != MODEL_DAYS:
    want["w_days"] = str(int(ss["w_days"]))
view = next((k for k, label in VIEWS.items() if label == ss.get("w_view")), "day")
if view != "day":
    want["w_view"] = view
want.update({f"w_{k}": val for k, val in form.changed(scn, base).items()})
want.update({f"w_x.{spec['name']}": str(ss[f"w_x.{spec['name']}"]).lower() for spec in specs
             if ss[f"w_x.{spec['name']}"] != spec["default"]})
for key in [k for k in qp.keys() if k.startswith("w_") and k not in want]:
    del qp[key]
for key, val in want.items():
    if qp.get(key) != val:
        qp[key] = val

reserved, reserved_why = reservation(scn)
if transforms_of(scn):
    st.warning("Forward-looking what-if, not what happened: " + md("; ".join(transforms_of(scn))),
               icon=":material/trending_up:")
st.caption(f"{md(scn.description)} · {scn.steps} steps of {scn.step_s} s · SLO p99 "
           f"{scn.service.slo_ms:g} ms · {scn.pool.gpus} GPUs · inference reservation {reserved} GPUs "
           f"({'set' if reserved_why == 'set' else md(reserved_why)})")
if scn.others_gpus is not None and scn.others_gpus.max() > 0:
    held_note = scn.provenance.get("others_gpus", "")
    st.caption(f"Every policy leaves what other services and unmodelled work held where it was, step by "
               f"step as observed (up to {scn.others_gpus.max():.0f} GPUs)."
               + (f" Assumed: {md(held_note.split('; ', 1)[1])}." if "; " in held_note else ""))

if cal is not None:
    bt = cal.backtest
    svc = cal.observation.service
    st.subheader(f"Backtest of {md(svc)}: the observed period replayed under the observed policy")
    if not bt["within"]:
        st.error("The replay does not reproduce what happened on this store: " + md("; ".join(bt["misses"]))
                 + ". The policies below are a model the store does not confirm.", icon=":material/error:")
    k = kpi_row(4)
    k[0].metric(over_slo_label(md(svc), modelled=False), f"{bt['observed_violation_minutes']:,.0f}",
                border=True, help=f"Minutes {md(svc)}'s p99 was over its SLO in the store (a step without "
                                  "requests is not over), over the whole range")
    k[1].metric(over_slo_label(md(svc), modelled=True), f"{bt['model_violation_minutes']:,.0f}",
                delta=f"{bt['violation_minutes_error']:+.0%}", delta_color="off", border=True,
                help="The same period replayed by the model under the shared policy, with the batch "
                     "runs that really ran, each step counted with the chance its p99 would read over "
                     "the SLO: its relative error against the store")
    k[2].metric("Batch GPU-hours, observed", f"{bt['observed_batch_gpu_hours']:,.0f}", border=True,
                help="GPUs batch held at each step, over the range")
    k[3].metric("Batch GPU-hours, replayed", f"{bt['model_batch_gpu_hours']:,.0f}",
                delta=f"{bt['batch_gpu_hours_error']:+.0%}", delta_color="off", border=True)
    st.caption(f"Period p99: {bt['observed_p99_ms']:,.0f} ms observed, {bt['model_p99_ms']:,.0f} ms "
               f"replayed ({bt['p99_error']:+.0%}). The policies below move the batch runs that happened "
               f"over the period's last {int(ss.get('w_days', MODEL_DAYS))} days, each by its rule; their "
               "shared row is this replay of those days (the same minutes when they cover the range).")
    detail = st.expander("Backtest over time, and where each parameter came from",
                         key="w_bt_detail", on_change="rerun")
    if detail.open:
        with detail:
            show_chart(backtest_figure(bt["frame"], base.service.slo_ms, v.tz), bt["frame"],
                       "whatif-backtest")
            show_table([{"parameter": p, "source": s} for p, s in sorted(scn.provenance.items())],
                       key="w_provenance")

# One replay per scenario and policies for every session (Chargeback's too): pages._caches.memo;
# a slider step replays only the policies that read what it moved (analytics.whatif.reuse).
replayed = (scn.fingerprint(), tuple(policies))
results = memo(("compare", *replayed), lambda: compare_reusing(scn, tuple(policies)))
answer = pool_answer_for(v, src, pool, scn, results, days=int(ss.get("w_days", MODEL_DAYS)),
                         policies=tuple(policies), transforms=chosen_t)  # every service of the pool
with answer_box:
    st.success(md(answer.sentence()), icon=":material/check_circle:")
    heads = answer.headlines()
    for col, h in zip(kpi_row(len(heads)), heads):
        col.metric(md(h.label), md(h.value), delta=h.delta, delta_color="off", delta_arrow="off", border=True,
                   help=md(h.help))  # it names the services: labels are data
st.caption("Every policy moves the batch runs that happened (each arriving when it did, with its GPUs "
           "and its work), by its rule; a run that waits, is evicted or deferred carries its work into "
           "the next day, and what is left at the end is counted unfinished.")
if cal is not None:  # the Tail events page's attribution, over the same days, beside the model's
    asked = EventsQuery.from_view(v, src, ss)  # the Tail events page's question, for this view
    try:
        found = asked.run()
    except TidelensError as exc:  # the table stands without the sentence
        st.caption(f"Tail events could not be compared: {md(exc)}")
    else:
        agreed = memo(("agree", *replayed, asked, answer.pool, tuple(answer.services)),
                      lambda: pool_agreement(found, answer))
        st.info(md(agreed.sentence()), icon=":material/balance:")
breakdown = answer.breakdown()
show_table(breakdown, key="w_table_pool", column_config={
    "policy": st.column_config.TextColumn("Policy", pinned=True),
    "best": st.column_config.TextColumn("Best", width=160),
    "violation_minutes": st.column_config.NumberColumn(over_slo_label(f"pool '{answer.pool}'", modelled=True),
                                                       format="%,.0f", help=md(answer.scope())),
    **{c: st.column_config.NumberColumn(c.capitalize(), format="%,.0f") for c in breakdown.columns
       if c.startswith("minutes, ")},
    "batch_forgone_gpu_hours": st.column_config.NumberColumn(
        "Batch forgone (GPU-h)", format="%,.0f", help="Batch work lost and left unfinished (the rule's first tie-break)"),
    "cost_total": st.column_config.NumberColumn("GPU cost", format="$%,.0f")})
table = policy_table(results, best=answer.best_policy)
name = scn.modelled_service()
st.subheader(f"Breakdown: {md(name)} alone, the policies side by side")
num = st.column_config.NumberColumn
columns = {
    "policy": st.column_config.TextColumn("Policy", pinned=True),
    # Sized for its longest value: a column of mostly empty cells is sized by its typical cell.
    "best": st.column_config.TextColumn("Best", width=200, help="The pool's best policy (every service, by "
                                        "the one rule), and the lowest total cost for this service's replay"),
    "p99_ms": num("p99 (ms)", format="%,.0f", help="The period's p99 latency, modelled"),
    "worst_minute_p99_ms": num("Worst minute (ms)", format="%,.0f", help="The worst minute's p99, modelled"),
    "slo_compliance": num("Within SLO", format="percent", help="Share of requests within the SLO"),
    "violation_minutes": num(over_slo_label(name, modelled=True), format="%,.0f",
                             help=f"Minutes {md(name)}'s p99 would read over its SLO, modelled: each "
                             "step counted with its chance (the reading noise under Advanced)"),
    "pool_utilization": num("Pool allocated", format="percent", help="GPU-hours held / the pool's"),
    "pool_utilization_active": num("Pool busy", format="percent", help="GPU-hours doing work / the pool's"),
    "batch_goodput_gpu_hours": num("Batch done (GPU-h)", format="%,.0f",
                                   help="Batch GPU-hours that advanced a run (lost work excluded)"),
    "batch_lost_gpu_hours": num("Lost (GPU-h)", format="%,.0f",
                                help="Work thrown away by evictions and interruptions (since the last "
                                     "checkpoint), redone later"),
    "batch_unfinished_gpu_hours": num("Unfinished (GPU-h)", format="%,.0f",
                                      help="Work the runs asked for and had not done by the period's end"),
    "batch_runs_unfinished": num("Runs not finished", format="%d",
                                 help="Runs still waiting or running at the period's end"),
    "queue_delay_median_h": num("Median wait (h)", format="%.1f",
                                help="Hours from a run's arrival (when it started in fact) to its start "
                                     "under the policy; a run never started waited until the period's end"),
    "queue_delay_max_h": num("Worst wait (h)", format="%.1f", help="The longest of those waits"),
    "cost_total": num("GPU cost", format="$%,.0f", help="The pool's GPUs for the period, each at its "
                      "price (reserved, spot, on-demand)"),
    "cost_per_useful_gpu_hour": num("Per useful GPU-h", format="dollar",
                                    help="GPU cost per GPU-hour that did useful work (inference or batch goodput)"),
    "externality_cost": num("Externality", format="$%,.0f",
                            help="Violation minutes priced and charged to the team that caused them")}
# Two tables of one frame, each narrow enough for a 1280x720 projector (twelve columns were not).
show_table(table, column_config=columns, key="w_table_service",
           column_order=("policy", "best", "violation_minutes", "slo_compliance", "p99_ms",
                         "worst_minute_p99_ms"))
show_table(table, column_config=columns, key="w_table_cost",
           column_order=("policy", "cost_total", "externality_cost", "cost_per_useful_gpu_hour",
                         "pool_utilization", "pool_utilization_active"))
show_table(table, column_config=columns, key="w_table_batch",
           column_order=("policy", "batch_goodput_gpu_hours", "batch_lost_gpu_hours",
                         "batch_unfinished_gpu_hours", "batch_runs_unfinished", "queue_delay_median_h",
                         "queue_delay_max_h"))
# One chart at a time: a tab runs (and draws) only when it is picked; a second chart on the
# first render cost a new tab ~0.12 s (bench/elements.py --base).
day_tab, next_tab, sweep_tab = st.tabs(list(VIEWS.values()), key="w_view", on_change="rerun")
next_key = (ss["w_base_id"], src.version, int(ss.get("w_days", 0)),
            tuple(sorted(form.changed(scn, base).items())), tuple(policies))
if "w_session" not in ss:  # a slot of this browser session's own: another user's drag cancels nothing here
    ss["w_session"] = uuid.uuid4().hex
# Started whichever tab is open: the chart is ready by the time its tab is picked.
job = in_background(f"whatif-next-gpus-{ss['w_session']}", next_key, lambda: next_gpus(scn, tuple(policies)))
if day_tab.open:
    with day_tab:
        day = memo(("typical_day", *replayed), lambda: typical_day(scn, results))
        show_chart(lambda: typical_day_figure(day, scn.service.slo_ms, scope=f"{name}'s p99"), day, "whatif-typical-day",
                   memo_key=replayed)
if next_tab.open:
    with next_tab:
        if not job.done():
            rerun_when_done(job, "Replaying every policy at half to 1.5x the pool, in the background: the "
                                 "controls above answer meanwhile.")
        elif job.exception() is not None:
            st.warning(f"What the next GPUs buy: {md(job.exception())}", icon=":material/warning:")
        else:
            front = job.result()
            show_chart(lambda: next_gpus_figure(front, scope=name), front, "whatif-next-gpus", memo_key=next_key)
            st.caption("Each point is the pool at another size (the reservation as set, or automatic at "
                       "each size), replayed under each policy; a pool too small for the batch job shows "
                       "few violation minutes only because batch never ran: its goodput is in the hover.")
if sweep_tab.open:
    with sweep_tab:
        st.caption("Burst headroom by hour, and p99 bands over random bursts: each replays the scenario "
                   "many times (a second or more), so they run only while this tab is open.")
        focus = choose("Policy for headroom and bursts", policies, key="w_focus")
        head = headroom_by_hour(scn, focus)
        show_chart(headroom_figure(head, focus), head, "whatif-headroom")
        bands = burst_bands(scn, focus, seeds=BAND_SEEDS)
        show_chart(bands_figure(bands, scn.service.slo_ms, v.tz), bands, "whatif-bands")

# From the chosen policy to the cluster: folded, and made only when opened.
real = st.expander("Make it real: the manifests that enforce a policy", icon=":material/deployed_code:",
                   key="w_make_real", on_change="rerun")
if real.open:
    with real:
        c = st.columns([2, 1])
        chosen = choose("Policy to enforce", policies, key="w_plan_policy", where=c[0], default=answer.best_policy,
                        help="Kueue queues, quotas and preemption; the batch window's CronJobs; "
                                     "the MIG or time-slicing config: with the numbers modelled above")
        scheduler = c[1].radio("Scheduler", ["kueue", "kai"], horizontal=True, key="w_plan_scheduler",
                               format_func={"kueue": "Kueue", "kai": "KAI Scheduler"}.__getitem__)
        try:
            plan = make_plan(scn, chosen, scheduler=scheduler)
        except TidelensError as exc:
            st.warning(md(exc), icon=":material/warning:")
        else:
            st.caption(md(", ".join(f"{k} {v}" for k, v in plan.numbers.items())))
            st.download_button("Manifests and README (zip)", data=plan_zip(plan),
                               file_name=f"tidelens-plan-{chosen}-{scheduler}.zip", mime="application/zip",
                               on_click="ignore", icon=":material/download:", key="w_plan_download")
            show_table([{"file": name, "objects": ", ".join(sorted({o["kind"] for o in objs}))}
                        for name, objs in plan.files.items()], key="w_plan_files")

# Before and after a recorded change, the what-if scored on what followed: folded, read when opened.
if has_store:
    changed = st.expander("Before and after a change: the what-if scored", icon=":material/compare_arrows:",
                          key="w_change", on_change="rerun")
    if changed.open:
        with changed:
            change_section(v, src)

# Folded, and run only when opened: saving and loading are occasional.
files = st.expander("Save, load, export", icon=":material/save:", key="w_files", on_change="rerun")
if files.open:
    with files:
        c = st.columns(3)
        c[0].download_button("Scenario (TOML)", data=scenario_to_toml(scn),
                             file_name=f"tidelens-{scn.name.replace(':', '-')}.toml",
                             mime="application/toml", icon=":material/save:", on_click="ignore")
        c[1].download_button("Results (JSON)", on_click="ignore", icon=":material/download:",
                             data=orjson.dumps({"scenario": {"name": scn.name, "transforms": transforms_of(scn)},
                                                "policies": {name: {**r.summary.as_dict(), "externality": r.externality}
                                                             for name, r in results.items()}},
                                               option=orjson.OPT_INDENT_2, default=str),
                             file_name="tidelens-whatif.json", mime="application/json")
        up = c[2].file_uploader("Load a scenario (TOML)", type=["toml"], key="w_upload")
        if up is not None and ss.get("w_upload_seen") != up.file_id:
            ss["w_upload_seen"] = up.file_id
            try:
                ss["w_file"] = scenario_from_toml(up.getvalue().decode("utf-8"))
            except (TidelensError, UnicodeDecodeError) as exc:
                st.error(md(f"{up.name}: {exc}"), icon=":material/error:")
            else:
                ss["w_next_src"] = FILE
                st.rerun()
