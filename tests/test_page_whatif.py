"""The What-if page in Streamlit's AppTest: it launches on a preset, a parameter and the policy
choice change the numbers shown, and the URL carries the scenario so a copied link reopens it.
(The store-calibrated start is covered by tests/test_whatif_calibrate.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streamlit.testing.v1 import AppTest  # noqa: E402

from analytics.whatif import PRESETS, form  # noqa: E402

from apptest_helpers import drawn_table, isolate, metric as _metric, open_page, tables  # noqa: E402


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate(monkeypatch, tmp_path)


def _page(tmp_path: Path, **params: str) -> AppTest:
    # No store: the page starts from a preset (and the Overview has nothing heavy to build).
    return open_page("pages/whatif.py", tmp_path, **params)


SHARED = "Minutes over the SLO, pool, shared, modelled"  # the pool's answer: a preset's one service
MINUTES = "Minutes over the SLO, morning-ramp, modelled"  # the breakdown's column: the preset's service


def _num(text: str) -> float:
    return float(text.replace("$", "").replace(",", ""))


def _policies(at: AppTest):
    """The policies' numbers as the page draws them: its three static tables (the service's, the
    cost's, the batch's) side by side, by policy, under their headers; no grid on the page."""
    assert not at.dataframe
    drawn = {t.key: t for t in tables(at)}
    service, cost, batch = (drawn[k].value for k in ("w_table_service", "w_table_cost", "w_table_batch"))
    assert list(service["Policy"]) == list(cost["Policy"]) == list(batch["Policy"])
    return service.merge(cost, on="Policy").merge(batch, on="Policy").set_index("Policy")


def test_launches_with_the_morning_story(tmp_path: Path) -> None:
    at = _page(tmp_path, w_src="morning-ramp")
    assert _num(_metric(at, SHARED)) > 300
    # a preset is a pool of one: its answer is its own rows' best, and the batch team pays
    assert _metric(at, "Who pays, shared pool") == "ml-research"
    from analytics.measures import best_policy
    from analytics.whatif import compare

    rows = {n: r.summary for n, r in compare(PRESETS["morning-ramp"](7)).items()}
    assert _metric(at, "Best policy, pool 'morning-ramp'") == best_policy(rows)
    table = _policies(at)
    assert list(table.index) == ["shared", "polite", "preemption", "tidal", "partitioned",
                                 "mig", "timeslice"]
    assert table.loc["partitioned", MINUTES] == 0
    # drawn as the columns say: minutes and milliseconds with thousands, shares in percent, money in dollars
    drawn = {t.key: t for t in tables(at)}
    service, cost = drawn_table(drawn["w_table_service"]), drawn_table(drawn["w_table_cost"])
    assert all(re.fullmatch(r"\d{1,3}(,\d{3})*", x) for x in [*service[MINUTES], *service["p99 (ms)"]])
    assert all(re.fullmatch(r"\d{1,3}\.\d\d%", x) for x in [*service["Within SLO"], *cost["Pool allocated"]])
    assert all(re.fullmatch(r"\$\d{1,3}(,\d{3})*", x) for x in cost["GPU cost"])
    assert all(re.fullmatch(r"\$\d+\.\d\d", x) for x in cost["Per useful GPU-h"])


def test_slider_and_policy_choice_change_the_numbers(tmp_path: Path) -> None:
    at = _page(tmp_path, w_src="morning-ramp")
    before = _num(_metric(at, SHARED))
    at.session_state["w_grp_pool"] = True
    at.run()
    at.number_input(key="w_f.pool.gpus").set_value(80).run()
    assert not at.exception
    after = _num(_metric(at, SHARED))
    assert after < before
    assert at.query_params["w_pool.gpus"] == "80"
    at.pills(key="w_pol").set_value(["shared", "tidal"]).run()
    assert list(_policies(at).index) == ["shared", "tidal"]
    assert at.query_params["w_pol"] == "shared,tidal"


def test_a_copied_link_reopens_the_scenario(tmp_path: Path) -> None:
    first = _page(tmp_path, w_src="morning-ramp")
    with pytest.raises(KeyError):  # the service group is folded: its widgets are not drawn
        first.number_input(key="w_f.service.warmup_min")
    first.session_state["w_grp_service"] = True
    first.run()
    first.number_input(key="w_f.service.warmup_min").set_value(20.0).run()
    first.pills(key="w_pol").set_value(["shared", "polite"]).run()
    link = dict(first.query_params.items())
    assert link["w_service.warmup_min"] == "20"
    again = _page(tmp_path, **link)
    # Folded, the group still applies the link's value; opened, its widget shows it.
    assert (_policies(again)[MINUTES].tolist()
            == _policies(first)[MINUTES].tolist())
    again.session_state["w_grp_service"] = True
    again.run()
    assert again.number_input(key="w_f.service.warmup_min").value == 20.0
    assert list(_policies(again).index) == ["shared", "polite"]
    assert (_policies(again)[MINUTES].tolist()
            == _policies(first)[MINUTES].tolist())


def test_preset_switch_and_tidal_story(tmp_path: Path) -> None:
    at = _page(tmp_path, w_src="tidal-a100", w_pol="partitioned,tidal,mig")
    util = _policies(at)["Pool allocated"]
    assert util["mig"] > util["partitioned"] + 0.2  # the 55% -> 85% story


def test_form_round_trip() -> None:
    base = PRESETS["morning-ramp"](1)
    edited = form.apply(base, {"pool.gpus": "72", "service.decode_heavy": "false"})
    assert edited.pool.gpus == 72 and edited.service.decode_heavy is False
    assert edited.provenance["pool.gpus"] == "user"
    again = form.apply(base, form.changed(edited, base))
    assert form.editable(again) == form.editable(edited)
    with pytest.raises(Exception, match="unknown scenario parameter"):
        form.apply(base, {"pool.gpuz": "1"})


def test_sweeps_draw_headroom_and_bands(tmp_path: Path) -> None:
    at = _page(tmp_path, w_src="morning-ramp", w_pol="shared,partitioned")
    # one chart at a time, in tabs: a typical day first
    assert [t.label for t in at.tabs] == ["A typical day", "What the next GPUs buy", "Headroom and bursts"]
    assert [c.proto.id.split("chart_")[-1] for c in at.get("plotly_chart")] == ["whatif-typical-day"]
    at.session_state["w_view"] = "Headroom and bursts"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert [c.proto.id.split("chart_")[-1] for c in at.get("plotly_chart")] == ["whatif-headroom", "whatif-bands"]
    assert at.query_params["w_view"] == "sweeps"
    # and a link opens that tab (an older link's w_sweeps=1 too)
    for params in ({"w_view": "sweeps"}, {"w_sweeps": "1"}):
        again = _page(tmp_path, w_src="morning-ramp", w_pol="shared,partitioned", **params)
        assert [c.proto.id.split("chart_")[-1] for c in again.get("plotly_chart")] == ["whatif-headroom",
                                                                                     "whatif-bands"]


def test_what_the_next_gpus_buy_is_drawn_once_computed_in_the_background(tmp_path: Path) -> None:
    from pages import _queries

    at = _page(tmp_path, w_src="morning-ramp", w_pol="shared,partitioned")
    job = next(iter(reversed(_queries._JOBS.values())))
    front = job.result(timeout=120)  # computed off the page's run, before its tab is opened
    at.session_state["w_view"] = "What the next GPUs buy"
    at.run()
    assert not at.exception
    # the next run draws it (Streamlit's element ids end with the chart's key)
    assert any(c.proto.id.endswith("chart_whatif-next-gpus") for c in at.get("plotly_chart"))
    assert set(front["policy"]) == {"shared", "partitioned"} and front.filter(front["current"]).height == 2
    # the pool as it is sits on each policy's line, at the page's own numbers
    table = _policies(at)
    now = front.filter(front["current"])
    for pol, minutes in zip(now["policy"], now["violation_minutes"]):
        assert minutes == table.loc[pol, MINUTES]


def test_a_folded_group_keeps_a_changed_value(tmp_path: Path) -> None:
    at = _page(tmp_path, w_src="morning-ramp")
    at.session_state["w_grp_pool"] = True
    at.run()
    at.number_input(key="w_f.pool.gpus").set_value(80).run()
    changed = _num(_metric(at, SHARED))
    at.session_state["w_grp_pool"] = False
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert _num(_metric(at, SHARED)) == changed
    assert at.query_params["w_pool.gpus"] == "80"


def test_a_saved_scenario_loads_back(tmp_path: Path) -> None:
    from analytics.whatif import scenario_to_toml

    at = _page(tmp_path, w_src="morning-ramp")
    assert not at.get("file_uploader")  # "Save, load, export" is folded
    at.session_state["w_files"] = True
    at.run()
    labels = [b.proto.label for b in at.get("download_button")]
    assert "Scenario (TOML)" in labels and "Results (JSON)" in labels
    scn = form.apply(PRESETS["morning-ramp"](1), {"pool.gpus": "77"})
    at.file_uploader(key="w_upload").set_value(("mine.toml", scenario_to_toml(scn).encode(),
                                                 "application/toml")).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.radio(key="w_src").value == "file"
    assert any("77 GPUs" in c.value for c in at.caption)


def test_the_scenario_survives_a_visit_to_another_page(tmp_path: Path) -> None:
    at = _page(tmp_path, w_src="morning-ramp", w_pol="shared,tidal")
    at.session_state["w_grp_pool"] = True
    at.run()
    at.number_input(key="w_f.pool.gpus").set_value(80).run()
    before = _policies(at)
    at.switch_page("pages/overview.py").run()
    at.switch_page("pages/whatif.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.radio(key="w_src").value == "morning-ramp"
    assert at.pills(key="w_pol").value == ["shared", "tidal"]
    assert at.number_input(key="w_f.pool.gpus").value == 80
    assert _policies(at).equals(before)


@pytest.mark.parametrize("page", ["pages/whatif.py", "pages/chargeback.py"])
def test_a_store_without_latency_says_what_is_missing_and_shows_no_preset(tmp_path: Path, page: str) -> None:
    """Never a preset's numbers under the store's name: a store with GPUs but no request latency
    gets an error naming the missing signal, and no policy table or bill."""
    from analytics.ingest import ingest_bytes
    from analytics.store import Store

    lines = [f'DCGM_FI_DEV_GPU_UTIL{{gpu="{g}",UUID="GPU-{g}",Hostname="n1"}} 50 {1_764_316_800_000 + m * 60_000}'
             for m in range(90) for g in range(2)]
    db = tmp_path / "gpus-only.duckdb"
    with Store(db) as st_:
        assert ingest_bytes(st_, "gpus.prom", ("\n".join(lines) + "\n").encode()).status == "loaded"
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=120)
    at.query_params.update({"source": "duckdb", "db": str(db), "w_src": "store"})
    at.run()
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    assert any("no inference service with both traffic and latency" in e for e in errors), errors
    assert not at.metric and not at.dataframe and not tables(at)  # no numbers at all
    assert not any("morning-ramp" in c.value for c in at.caption)


DECISION_LABELS = ["GPUs in the pool", "Headroom", "Automatic reservation",
                   "GPUs reserved for inference", "Batch leaves at (polite)", "Tidal: batch from", "until",
                   "Time-slicing: pods per GPU", "MIG slice", "Batch checkpoints"]


def _main_labels(at: AppTest) -> list[str]:
    """Every widget label of the main area, in page order (the sidebar's left out)."""
    sidebar = {id(w) for w in at.sidebar}
    out = []
    for node in at.main:
        for w in _walk(node):
            label = getattr(w.proto, "label", None) if hasattr(w, "proto") else None
            if label and id(w) not in sidebar:
                out.append(label)
    return out


def _walk(node):
    yield node
    for child in getattr(node, "children", {}).values():
        yield from _walk(child)


def test_the_first_controls_are_the_decisions_with_units(tmp_path: Path) -> None:
    at = _page(tmp_path, w_src="morning-ramp")
    # a first render draws no selectbox, multiselect or grid (each adds ~0.6 s to a new tab)
    assert not at.selectbox and not at.multiselect and not at.dataframe
    labels = _main_labels(at)
    start = labels.index("GPUs in the pool")
    assert labels[start:start + len(DECISION_LABELS)] == DECISION_LABELS
    assert labels.index("Policies") < start  # the page's start and policies, then the decisions
    # the advanced panel does not draw a second widget for a decision
    at.session_state["w_grp_pool"] = True
    at.run()
    side = [w.proto.label for w in at.sidebar if hasattr(w, "proto") and hasattr(w.proto, "label")]
    assert "gpus (GPUs)" not in side and "headroom (share)" not in side and "split_b (share)" in side
    assert at.slider(key="w_f.pool.headroom").proto.format == "percent"
    release = at.select_slider(key="w_f.pool.polite_release_hour")
    assert release.format_func(release.value) == "09:00"
    assert release.options[release.options.index("09:00") + 1] == "09:15"  # a quarter hour a step


def test_the_reservation_decision_moves_partitioned_and_the_link(tmp_path: Path) -> None:
    at = _page(tmp_path, w_src="morning-ramp")
    preset = PRESETS["morning-ramp"](7).pool.reservation_gpus
    assert preset > 0  # the preset states its reservation: the manual slider shows it
    assert at.toggle(key="w_res_auto").value is False
    assert at.slider(key="w_f.pool.reservation_gpus").value == preset
    assert _policies(at).loc["partitioned", MINUTES] == 0
    at.toggle(key="w_res_auto").set_value(True).run()
    auto = [m for m in at.metric if m.label == "GPUs reserved for inference"]
    assert len(auto) == 1 and auto[0].value.endswith(" GPUs")
    assert at.query_params["w_pool.reservation_gpus"] == "-1"
    at.toggle(key="w_res_auto").set_value(False).run()
    slider = at.slider(key="w_f.pool.reservation_gpus")
    assert slider.value == preset
    slider.set_value(max(preset // 4, 1)).run()
    assert not at.exception
    starved = _policies(at)
    assert starved.loc["partitioned", MINUTES] > 0  # a quarter of it is too little
    assert at.query_params["w_pool.reservation_gpus"] == str(max(preset // 4, 1))
    # exactly one row is the best on violation minutes, one the cheapest
    assert starved["Best"].str.contains("best for the pool").sum() == 1
    assert starved["Best"].str.contains("cheapest").sum() == 1


def test_hours_read_as_a_clock() -> None:
    assert [form.hour_text(h) for h in (0.0, 9.0, 22.25, 23.75)] == ["00:00", "09:00", "22:15", "23:45"]
    assert form.mig_choices("H100-80GB")[:2] == ["auto", "1g.10gb"]
    assert form.mig_choices("no-such-gpu") == ["auto"]


def test_time_slicing_pods_and_checkpoints_are_decisions_with_an_effect(tmp_path: Path) -> None:
    at = _page(tmp_path, w_src="morning-ramp", w_pol="shared,timeslice,preemption")
    before = _policies(at)
    at.number_input(key="w_f.pool.timeslice_replicas").set_value(4).run()
    after = _policies(at)
    assert after.loc["timeslice", "p99 (ms)"] > before.loc["timeslice", "p99 (ms)"]
    assert after.loc["shared", "p99 (ms)"] == before.loc["shared", "p99 (ms)"]  # only time-slicing shares
    assert at.query_params["w_pool.timeslice_replicas"] == "4"
    box = at.segmented_control(key="w_f.pool.checkpoint_interval_min")
    assert box.format_func(box.value) == "each job's own"
    box.set_value(120.0).run()
    assert at.query_params["w_pool.checkpoint_interval_min"] == "120"
    rare = _policies(at)
    # checkpoints two hours apart lose more work at each preemption: the same work holds the
    # pool longer than at the job's own (Young/Daly) interval
    assert rare.loc["preemption", "Batch done (GPU-h)"] == after.loc["preemption", "Batch done (GPU-h)"]
    assert rare.loc["preemption", "Pool allocated"] > after.loc["preemption", "Pool allocated"]


def test_make_it_real_downloads_the_chosen_policys_manifests(tmp_path: Path) -> None:
    import io
    import zipfile

    import yaml

    at = _page(tmp_path, w_src="morning-ramp", w_pol="shared,partitioned")
    assert all(b.proto.label != "Manifests and README (zip)" for b in at.get("download_button"))  # folded
    at.session_state["w_make_real"] = True
    at.run()
    at.segmented_control(key="w_plan_policy").set_value("partitioned").run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(b.proto.label == "Manifests and README (zip)" for b in at.get("download_button"))
    # the numbers on the page are the scenario's: the reservation the What-if shows
    from apptest_helpers import shown

    caption = next(shown(c.value) for c in at.caption if "reservation_gpus" in shown(c.value))
    reserved = PRESETS["morning-ramp"](7).pool.reservation_gpus
    assert f"reservation_gpus {reserved}" in caption
    from analytics.plan import make_plan, plan_zip

    z = zipfile.ZipFile(io.BytesIO(plan_zip(make_plan(PRESETS["morning-ramp"](7), "partitioned"))))
    queues = list(yaml.safe_load_all(z.read("tidelens-plan-partitioned/30-kueue-clusterqueues.yaml")))
    inference = next(q for q in queues if q["metadata"]["name"] == "inference")
    assert inference["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == reserved
    at.radio(key="w_plan_scheduler").set_value("kai").run()  # the alternative scheduler
    assert not at.exception
    caption = next(shown(c.value) for c in at.caption if "reservation_gpus" in shown(c.value))
    assert "scheduler kai" in caption
