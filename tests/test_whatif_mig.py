"""MIG tables: valid placements, fitting models, the slice inference runs on."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from analytics.errors import ConfigError
from analytics.whatif import MIG_PROFILES, PRESETS, choose_layout, compare, placements
from analytics.whatif.mig import gpus_for_peak


@pytest.mark.parametrize("model", sorted(MIG_PROFILES))
def test_tables_are_consistent(model: str) -> None:
    profiles = MIG_PROFILES[model]
    names = {p.name for p in profiles}
    whole = max(profiles, key=lambda p: p.compute_slices)
    assert (whole.compute_slices, whole.memory_slices) == (7, 8)
    for p in profiles:
        assert p.max_instances * p.compute_slices <= 7
        assert p.max_instances * p.memory_slices <= 8
        assert p.memory_gb == pytest.approx(whole.memory_gb * p.memory_slices / 8, rel=0.15)
    for placement in placements(model):
        by = {p.name: p for p in profiles}
        assert set(placement) <= names
        assert sum(by[n].compute_slices for n in placement) <= 7
        assert sum(by[n].memory_slices for n in placement) <= 8


def test_known_profiles() -> None:
    assert {p.name for p in MIG_PROFILES["A100-40GB"]} >= {"1g.5gb", "3g.20gb", "7g.40gb"}
    assert {p.name for p in MIG_PROFILES["H100-80GB"]} >= {"1g.10gb", "3g.40gb", "7g.80gb"}
    assert {p.name for p in MIG_PROFILES["H200-141GB"]} >= {"1g.18gb", "7g.141gb"}


def test_auto_layout_fits_the_model_and_the_slo() -> None:
    # 16 GiB model, decode-heavy, 40 req/s per slot, 500 ms SLO on an A100-80GB.
    lay = choose_layout("A100-80GB", 16.0, True, 40.0, 500.0)
    assert lay.profile.memory_gb >= 16.0
    assert lay.profile.name == "3g.40gb" and lay.instances == 2
    assert lay.speed == pytest.approx(0.5)  # memory slices 4 of 8
    # Compute-bound serving scales with compute slices instead: 3g (3/7) misses half the
    # SLO (ln 100 / (40 x 3/7) = 269 ms > 250 ms), so 4g.40gb.
    lay = choose_layout("A100-80GB", 16.0, False, 40.0, 500.0)
    assert lay.profile.name == "4g.40gb" and lay.speed == pytest.approx(4 / 7)
    # A tiny model with a loose SLO goes on the smallest slice.
    assert choose_layout("A100-80GB", 4.0, True, 400.0, 1000.0).profile.name == "1g.10gb"


def test_a_model_that_does_not_fit_is_refused() -> None:
    with pytest.raises(ConfigError, match="does not fit"):
        choose_layout("A100-40GB", 60.0, True, 40.0, 500.0)
    with pytest.raises(ConfigError, match="1g.10gb"):
        choose_layout("A100-80GB", 16.0, True, 40.0, 500.0, profile="1g.10gb")


def test_auto_profile_counts_the_floor_and_what_the_latency_measures() -> None:
    # A slot held for seconds (an LLM generation) is not in a time-to-first-token latency:
    # the smallest slice the model fits is fine while the floor is within half the SLO.
    ttft = choose_layout("A100-80GB", 16.0, True, 0.2, 1000.0, latency_floor_ms=300.0,
                         service_in_latency=False)
    whole = choose_layout("A100-80GB", 16.0, True, 0.2, 1000.0)
    assert ttft.profile.compute_slices < whole.profile.compute_slices
    # A floor past half the SLO leaves only the largest profile.
    slow = choose_layout("A100-80GB", 16.0, True, 0.2, 1000.0, latency_floor_ms=600.0,
                         service_in_latency=False)
    assert slow.profile.compute_slices == whole.profile.compute_slices


def test_auto_profile_serves_the_peak_with_the_fewest_gpus() -> None:
    # Compute-bound, loose SLO: every profile is fast enough. The smallest slice the model
    # fits (1g.20gb: 4 x 1/7 of a GPU's compute) needs 35 GPUs for a 20-GPU peak; a whole
    # GPU needs 20.
    small = choose_layout("A100-80GB", 16.0, False, 400.0, 1000.0)
    assert small.profile.name == "1g.20gb"
    lay = choose_layout("A100-80GB", 16.0, False, 400.0, 1000.0, peak_replicas=20.0)
    profiles = [p for p in MIG_PROFILES["A100-80GB"] if p.memory_gb >= 16.0]
    assert gpus_for_peak(lay.profile, False, 20.0) == min(
        gpus_for_peak(p, False, 20.0) for p in profiles) == 20
    assert gpus_for_peak(small.profile, False, 20.0) == 35
    assert lay.profile.name == "7g.80gb"
    # Decode-heavy, 4 x 1g.20gb is a whole GPU's memory bandwidth: the small slice stays.
    assert choose_layout("A100-80GB", 16.0, True, 400.0, 1000.0,
                         peak_replicas=20.0).profile.name == "1g.20gb"


def test_mig_keeps_the_autoscaler_ceiling_in_capacity_not_replicas() -> None:
    # The calibrated sample's case: the autoscaler's maximum was seen on whole GPUs. On
    # 3g.40gb slices (half a GPU each) the same ceiling is twice the replicas; kept in
    # replicas, MIG served the daytime peak with half the capacity (p99 at the timeout).
    base = PRESETS["tidal-a100"]()
    svc = base.service
    peak = float(base.traffic_rps.max()) / (svc.service_rate_per_slot_rps * svc.concurrency
                                            * svc.target_utilization)
    capped = replace(base, service=replace(svc, max_replicas=int(math.ceil(peak))))
    res = compare(capped, ("tidal", "mig"))
    mig, tidal = res["mig"].summary, res["tidal"].summary
    assert mig.mig_profile == "3g.40gb"
    assert mig.violation_minutes <= tidal.violation_minutes + 10
    assert mig.p99_ms < svc.timeout_s * 1000.0 / 2
