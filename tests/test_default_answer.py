"""One default answer (issue 52): a pool's policy is one decision for every service on it, so the
What-if page, Chargeback, the capacity review and ``tidelens whatif``/``review --json`` open on the
same answer: the best policy judged over every service of the pool (each against its own SLO),
its minutes over the SLO, the shared pool's minutes it removes, and who pays.

The store is the bundled sample's story (``morning``, 64 GPUs, seed 7) over three weekdays, the
suite's :func:`apptest_helpers.morning_store`: two services, chat-vllm (SLO 1 s) and recommender
(SLO 100 ms), whose own rows disagree (alone, chat-vllm's say tidal and recommender's
partitioned): before the pool's answer, the pages opened on one and the commands on the other.
Every surface computes the same calibrations, in this process once (the in-process calibration
cache, :func:`analytics.whatif.calibrate.calibrate_timelines`).
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from apptest_helpers import isolated_cli, metric, open_store_link, shown

from analytics.cli import main
from analytics.store import Store
from analytics.whatif.answer import answer_store

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def db(morning_db: Path) -> Path:
    return morning_db  # the session's one build of this store (tests/conftest.py), read only


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolated_cli(monkeypatch, tmp_path)


def _cli(capsys, *argv: str) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def _page(db: Path, page: str):
    return open_store_link(db, page, w_src="store")


def _sentence(at) -> str:
    said = [shown(s.value) for s in at.success if s.value.startswith("Best policy for pool")]
    assert len(said) == 1, [s.value for s in at.success]
    return said[0]


def test_every_surface_opens_on_the_pools_answer(db, capsys, tmp_path) -> None:
    whatif = _cli(capsys, "whatif", "--db", str(db), "--json")
    answer = whatif["pool"]
    # judged over every service of the pool, each against its own SLO, as one rule says
    assert answer["services"] == ["chat-vllm", "recommender"]
    assert answer["slo_ms"] == {"chat-vllm": 1000.0, "recommender": 100.0}
    minutes = {p: v["violation_minutes"] for p, v in answer["policies"].items()}
    for v in answer["policies"].values():
        assert v["violation_minutes"] == pytest.approx(sum(v["violation_minutes_by_service"].values()))
    assert whatif["best_policy"] == answer["best_policy"] == min(minutes, key=lambda p: round(minutes[p]))
    # the pool's answer is not one service's: alone, each service would pick another default
    alone = {s: min(minutes, key=lambda p: (round(answer["policies"][p]["violation_minutes_by_service"][s]), p))
             for s in answer["services"]}
    assert len(set(alone.values())) == 2, alone
    assert answer["removed_minutes"] == pytest.approx(minutes["shared"] - minutes[answer["best_policy"]])
    assert answer["payer"] == "ml-training" and answer["payer_cost"] > 0
    # a notebook's one call says it too
    with Store(db, read_only=True) as st:
        assert answer_store(st).as_dict() == answer

    # the breakdown's service changes the rows shown, never the answer
    other = whatif["scenario"]["name"].split(":", 1)[1]
    other = next(s for s in answer["services"] if s != other)
    again = _cli(capsys, "whatif", "--db", str(db), "--service", other, "--json")
    assert again["pool"] == answer and again["scenario"]["name"] == f"store:{other}"

    # the capacity review: its numbers and its HTML say the same answer
    out = tmp_path / "review.html"
    review = _cli(capsys, "review", "--db", str(db), "--json", "--out", str(out))
    assert review["whatif"]["best_policy"] == answer["best_policy"]
    assert review["whatif"]["pool"] == answer
    assert html.escape(answer["sentence"]) in re.sub(r"\s+", " ", out.read_text(encoding="utf-8"))

    # the What-if page: the same sentence and headline numbers, whichever service is the breakdown
    page = _page(db, "pages/whatif.py")
    assert _sentence(page) == answer["sentence"]
    assert metric(page, "Best policy, pool 'default'") == answer["best_policy"]
    assert metric(page, "Minutes over the SLO, pool, best policy, modelled") == f"{answer['violation_minutes']:,.0f}"
    assert metric(page, "Minutes over the SLO, pool, shared, modelled") == \
        f"{answer['shared_violation_minutes']:,.0f}"
    assert metric(page, "Who pays, shared pool") == answer["payer"]
    breakdown = page.radio(key="w_svc")
    breakdown.set_value(next(s for s in answer["services"] if s != breakdown.value)).run()
    assert not page.exception and _sentence(page) == answer["sentence"]

    # Chargeback: the same sentence, and under the shared pool its ledger bills the same payer
    bill = _page(db, "pages/chargeback.py")
    assert _sentence(bill) == answer["sentence"]
    assert bill.radio(key="cb_policy").value == "shared"
    assert metric(bill, "Billed the most") == answer["payer"]
    top = next(m for m in bill.metric if m.label == "Billed the most")
    assert top.delta.startswith(f"${answer['payer_cost']:,.0f} ")


def test_the_pools_decisions_move_every_service_and_a_service_keeps_its_own() -> None:
    """A slider is a decision for the pool: each service's scenario takes the edited one's pool
    edits (and its forward-looking transforms), never its service parameters."""
    from dataclasses import replace

    from analytics.whatif import PRESETS, form
    from analytics.whatif.answer import pool_scenarios
    from analytics.whatif.transforms import Transforms, apply_transforms

    a = replace(PRESETS["morning-ramp"](2), name="store:a")
    b = replace(a, name="store:b", traffic_rps=a.traffic_rps / 2,
                service=replace(a.service, slo_ms=250.0, warmup_min=3.0, team="recsys"))
    grow = Transforms(traffic_growth=1.5)
    edited = apply_transforms(form.apply(a, {"pool.gpus": 80, "pool.headroom": 0.5, "service.warmup_min": 20.0}), grow)
    both = pool_scenarios({"a": a, "b": b}, "a", edited, grow)
    assert both["a"] is edited
    assert (both["b"].pool.gpus, both["b"].pool.headroom) == (80, 0.5)
    assert both["b"].service == b.service  # its own warm-up, SLO and team
    assert both["b"].traffic_rps.tolist() == (b.traffic_rps * 1.5).tolist()


def test_a_service_that_cannot_be_calibrated_is_named_and_the_answer_is_over_the_rest() -> None:
    from dataclasses import replace
    from types import SimpleNamespace

    import polars as pl

    from analytics.errors import NotEnoughDataError
    from analytics.slo import SloTable
    from analytics.whatif import PRESETS
    from analytics.whatif.answer import answer_for, calibrate_pool

    services = pl.DataFrame({"service": ["a", "b"], "pool": ["p", "p"], "p99_ms": [500.0, 50.0], "rps": [5.0, 1.0]})
    why = "service 'b' has fewer than 60 steps with traffic in this range; widen the range"

    def calibration(name: str):
        if name == "b":
            raise NotEnoughDataError(why)
        return SimpleNamespace(scenario=replace(PRESETS["morning-ramp"](2), name="store:a"))

    slos = SloTable.from_ms({"a": 100.0, "b": 100.0})
    pool = calibrate_pool(services, slos, calibration)
    assert (pool.pool, list(pool.calibrations), pool.not_modelled) == ("p", ["a"], {"b": why})
    answer = answer_for(pool, days=2, policies=("shared", "partitioned"))
    assert answer.services == ["a"] and f"Not modelled: b ({why})." in answer.sentence()
    with pytest.raises(NotEnoughDataError, match="widen the range"):  # the one asked for: said as it failed
        calibrate_pool(services, slos, calibration, service="b")
