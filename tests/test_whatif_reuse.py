"""A What-if slider step replays only the policies the moved parameter changes
(analytics.whatif.reuse): the table of which policy reads which parameter holds against the model
(a parameter changed for a policy that does not read it leaves that policy's result equal), and a
step replays the readers alone."""

from __future__ import annotations

import dataclasses

import pytest

from analytics.whatif import POLICIES, PRESETS, compare, reuse

# A value each parameter of the table moves to.
MOVED = {"polite_release_hour": 11.0, "tidal_start_hour": 20.0, "tidal_end_hour": 7.0,
         "mig_profile": "2g.20gb", "mig_resplit_drain_min": 30.0, "gpu_model": "H100-80GB",
         "reservation_gpus": 20, "headroom": 0.6, "split_b": 0.2, "spot_interruptions_per_h": 0.5,
         "timeslice_replicas": 4, "timeslice_interference": 0.9}


@pytest.fixture(scope="module")
def scenario():
    scn = PRESETS["morning-ramp"](2)
    return scn, {p: r.summary.as_dict() for p, r in compare(scn, POLICIES).items()}


def test_every_parameter_of_the_table_is_moved() -> None:
    assert set(MOVED) == set(reuse.READ_ONLY_BY)


@pytest.mark.parametrize("name", sorted(MOVED))
def test_a_policy_that_does_not_read_a_parameter_is_not_moved_by_it(scenario, name: str) -> None:
    scn, before = scenario
    moved = dataclasses.replace(scn, pool=dataclasses.replace(scn.pool, **{name: MOVED[name]}))
    after = {p: r.summary.as_dict() for p, r in compare(moved, POLICIES).items()}
    for policy in POLICIES:
        if policy not in reuse.READ_ONLY_BY[name]:
            assert after[policy] == before[policy], (name, policy)
            assert reuse.policy_fingerprint(moved, policy) == reuse.policy_fingerprint(scn, policy)
        else:
            assert reuse.policy_fingerprint(moved, policy) != reuse.policy_fingerprint(scn, policy)


def test_a_slider_step_replays_only_its_readers(scenario, monkeypatch: pytest.MonkeyPatch) -> None:
    scn, before = scenario
    monkeypatch.setattr(reuse, "_KEPT", type(reuse._KEPT)())
    assert {p: r.summary.as_dict() for p, r in reuse.compare_reusing(scn, POLICIES).items()} == before
    replayed: list[tuple[str, ...]] = []
    real = reuse.compare

    def counted(s, policies):
        replayed.append(tuple(policies))
        return real(s, policies)

    monkeypatch.setattr(reuse, "compare", counted)
    moved = dataclasses.replace(scn, pool=dataclasses.replace(scn.pool, tidal_start_hour=20.0))
    got = reuse.compare_reusing(moved, POLICIES)
    assert replayed == [("tidal", "mig")]
    assert {p: r.summary.as_dict() for p, r in got.items()} == {
        p: r.summary.as_dict() for p, r in compare(moved, POLICIES).items()}
    reuse.compare_reusing(scn, POLICIES)  # back where it was: nothing replayed
    assert replayed == [("tidal", "mig")]
