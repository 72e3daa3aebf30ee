"""The What-if page in Streamlit's AppTest: it launches on a preset, a parameter and the policy
choice change the numbers shown, and the URL carries the scenario so a copied link reopens it.
(The store-calibrated start is covered by tests/test_whatif_calibrate.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from streamlit.testing.v1 import AppTest  # noqa: E402

from analytics.whatif import PRESETS, form  # noqa: E402

from apptest_helpers import isolate, metric as _metric, open_page  # noqa: E402


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate(monkeypatch, tmp_path)


def _page(tmp_path: Path, **params: str) -> AppTest:
    # No store: the page starts from a preset (and the Overview has nothing heavy to build).
    return open_page("pages/whatif.py", tmp_path, **params)


def _num(text: str) -> float:
    return float(text.replace("$", "").replace(",", ""))


def test_launches_with_the_morning_story(tmp_path: Path) -> None:
    at = _page(tmp_path, w_src="morning-ramp")
    assert _num(_metric(at, "Shared pool: violation minutes, modelled")) > 300
    assert _num(_metric(at, "Shared pool: externality")) > 0
    table = at.dataframe[0].value
    assert list(table["policy"]) == ["shared", "polite", "preemption", "tidal", "partitioned",
                                     "mig", "timeslice"]
    assert table.set_index("policy").loc["partitioned", "violation_minutes"] == 0


def test_slider_and_policy_choice_change_the_numbers(tmp_path: Path) -> None:
    at = _page(tmp_path, w_src="morning-ramp")
    before = _num(_metric(at, "Shared pool: violation minutes, modelled"))
    at.session_state["w_grp_pool"] = True
    at.run()
    at.number_input(key="w_f.pool.gpus").set_value(80).run()
    assert not at.exception
    after = _num(_metric(at, "Shared pool: violation minutes, modelled"))
    assert after < before
    assert at.query_params["w_pool.gpus"] == "80"
    at.multiselect(key="w_pol").set_value(["shared", "tidal"]).run()
    assert list(at.dataframe[0].value["policy"]) == ["shared", "tidal"]
    assert at.query_params["w_pol"] == "shared,tidal"


def test_a_copied_link_reopens_the_scenario(tmp_path: Path) -> None:
    first = _page(tmp_path, w_src="morning-ramp")
    with pytest.raises(KeyError):  # the service group is folded: its widgets are not drawn
        first.number_input(key="w_f.service.warmup_min")
    first.session_state["w_grp_service"] = True
    first.run()
    first.number_input(key="w_f.service.warmup_min").set_value(20.0).run()
    first.multiselect(key="w_pol").set_value(["shared", "polite"]).run()
    link = dict(first.query_params.items())
    assert link["w_service.warmup_min"] == "20"
    again = _page(tmp_path, **link)
    # Folded, the group still applies the link's value; opened, its widget shows it.
    assert (again.dataframe[0].value["violation_minutes"].tolist()
            == first.dataframe[0].value["violation_minutes"].tolist())
    again.session_state["w_grp_service"] = True
    again.run()
    assert again.number_input(key="w_f.service.warmup_min").value == 20.0
    assert list(again.dataframe[0].value["policy"]) == ["shared", "polite"]
    assert (again.dataframe[0].value["violation_minutes"].tolist()
            == first.dataframe[0].value["violation_minutes"].tolist())


def test_preset_switch_and_tidal_story(tmp_path: Path) -> None:
    at = _page(tmp_path, w_src="tidal-a100", w_pol="partitioned,tidal,mig")
    util = at.dataframe[0].value.set_index("policy")["pool_utilization"]
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


def test_sweeps_draw_frontier_headroom_and_bands(tmp_path: Path) -> None:
    at = _page(tmp_path, w_src="morning-ramp", w_pol="shared,partitioned")
    charts = len(at.get("plotly_chart"))
    at.toggle(key="w_sweeps").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.get("plotly_chart")) == charts + 3
    assert at.query_params["w_sweeps"] == "1"


def test_a_folded_group_keeps_a_changed_value(tmp_path: Path) -> None:
    at = _page(tmp_path, w_src="morning-ramp")
    at.session_state["w_grp_pool"] = True
    at.run()
    at.number_input(key="w_f.pool.gpus").set_value(80).run()
    changed = _num(_metric(at, "Shared pool: violation minutes, modelled"))
    at.session_state["w_grp_pool"] = False
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert _num(_metric(at, "Shared pool: violation minutes, modelled")) == changed
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
    before = at.dataframe[0].value
    at.switch_page("pages/overview.py").run()
    at.switch_page("pages/whatif.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.radio(key="w_src").value == "morning-ramp"
    assert at.multiselect(key="w_pol").value == ["shared", "tidal"]
    assert at.number_input(key="w_f.pool.gpus").value == 80
    assert at.dataframe[0].value.equals(before)


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
    assert not at.metric and not at.dataframe  # no numbers at all
    assert not any("morning-ramp" in c.value for c in at.caption)
