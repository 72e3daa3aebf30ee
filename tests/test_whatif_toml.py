"""Scenarios round-trip through TOML; bad files fail with the key named."""

from __future__ import annotations

import numpy as np
import pytest

from analytics.errors import ConfigError
from analytics.whatif import (PRESETS, BatchJob, PoolParams, ServiceParams, field_specs,
                            scenario_from_toml, scenario_to_toml, simulate)


def test_round_trip_keeps_everything() -> None:
    scn = PRESETS["tidal-a100"](2)
    back = scenario_from_toml(scenario_to_toml(scn))
    assert np.array_equal(back.traffic_rps, scn.traffic_rps)
    assert back.service == scn.service
    assert back.pool == scn.pool
    assert back.batch == scn.batch
    assert (back.name, back.start_ts_ms, back.step_s) == (scn.name, scn.start_ts_ms, scn.step_s)
    assert back.provenance == scn.provenance
    assert simulate(back, "tidal").summary == simulate(scn, "tidal").summary


def test_round_trip_keeps_what_others_held() -> None:
    from dataclasses import replace

    scn = PRESETS["morning-ramp"](1)
    scn = replace(scn, others_gpus=np.where(np.arange(scn.steps) % 2, 3.0, 0.0))
    back = scenario_from_toml(scenario_to_toml(scn))
    assert np.array_equal(back.others_gpus, scn.others_gpus)
    assert simulate(back, "shared").summary == simulate(scn, "shared").summary


def test_hand_written_minimal_toml() -> None:
    text = """
traffic_rps = [100, 200, 300, 200]
[service]
slo_ms = 150
[pool]
gpus = 8
[[batch.jobs]]
name = "ft"
gpus = 4
duration_h = 1
"""
    scn = scenario_from_toml(text)
    assert scn.service.slo_ms == 150.0 and scn.pool.gpus == 8
    assert scn.batch.jobs[0].gpus == 4 and scn.batch.jobs[0].team == "ml-research"


@pytest.mark.parametrize("text,match", [
    ("traffic_rps = [1, 2]\n[pool]\ngpuz = 3\n", "gpuz"),
    ("traffic_rps = [1, 2]\n[service]\ndecode_heavy = 1\n", "decode_heavy"),
    ("traffic_rps = [1, 2]\n[pool]\ngpus = 'many'\n", "pool.gpus"),
    ("[pool]\ngpus = 3\n", "traffic_rps is missing"),
    ("traffic_rps = [1, 2\n", "syntax"),
    ("traffic_rps = [1, 2]\n[pool]\ngpus = 10\nreservation_gpus = 8\nsplit_b = 0.3\n", "split_b"),
    ("traffic_rps = [1, 2]\n[pool]\ngpus = 10\nreservation_gpus = 11\n", "reservation_gpus=11"),
    ("traffic_rps = [1, 2]\n[pool]\nsplit_a = 0.9\n", "replaced by reservation_gpus"),
    ("traffic_rps = [1, 2]\nothers_gpus = [1]\n", "others_gpus needs one"),
])
def test_bad_toml_names_the_problem(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        scenario_from_toml(text)


@pytest.mark.parametrize("cls", [ServiceParams, BatchJob, PoolParams])
def test_every_parameter_carries_help_and_numbers_carry_bounds(cls) -> None:
    for spec in field_specs(cls):
        assert spec["help"], spec["name"]
        if spec["type"] in ("int", "float"):
            assert spec["min"] <= spec["default"] <= spec["max"], spec["name"]
            assert spec["step"] > 0


def test_round_trip_keeps_the_fitted_service_shape() -> None:
    from dataclasses import replace
    scn = PRESETS["morning-ramp"](1)
    scn = replace(scn, service=replace(scn.service, latency_floor_ms=85.5, busy_slowdown=4.5,
                                       service_cv=0.25, max_replicas=20))
    back = scenario_from_toml(scenario_to_toml(scn))
    assert back.service == scn.service
    assert back.service.max_replicas == 20 and back.service.busy_slowdown == 4.5
    assert simulate(back, "shared").summary == simulate(scn, "shared").summary
