"""Verdicts on exports written independently of the project's simulator.

``tests/independent_export.py`` writes a 4-day story of a 16-GPU pool (an HPA not named after its
Deployment, a nightly fine-tune withholding 10 GPUs at the 09:30 ramp, two afternoon surges) as
one ``query_range`` JSON per metric, from the exporters' documented output and its own model: it
imports nothing of ``analytics``. Each case is ingested through the real ingest path into a real
DuckDB file and analysed as a user's store would be; the events are scored against the story's
truth (:func:`truth_scoring.score`) with the issue's targets. The hand-written
``tests/fixtures/independent/*.prom`` files check the two diagnosed causes one rule at a time.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from independent_export import write_story

from analytics.events import EventsConfig
from analytics.events.pipeline import analyse_store
from analytics.timeline import store_timelines
from truth_scoring import score
from analytics.ingest import ingest_path
from analytics.store import Store
from analytics.timeline import TimelineConfig, autoscaler_links, pool_timeline, service_timeline
from analytics.slo import SloTable

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("independent")]
FIXTURES = Path(__file__).parent / "fixtures" / "independent"
CASES = ("hpa-renamed", "hpa-info", "idle-unlabelled", "both")


@pytest.fixture(scope="module")
def stories(tmp_path_factory):
    out = {}
    for case in CASES:
        d = tmp_path_factory.mktemp(case)
        tr = write_story(d / "export", case=case, days=4, seed=1)
        db = d / "store.duckdb"
        with Store(db) as st:
            for f in tr["files"]:
                assert all(r.status == "loaded" for r in ingest_path(st, d / "export" / f)), f
            slos = {k: v["p99_ms"] for k, v in tr["slos"].items()}
            analysis = analyse_store(st, EventsConfig(), slos=SloTable.from_ms(slos))
            tl = store_timelines(st, EventsConfig().timeline_config())
            links = autoscaler_links(st)
        out[case] = {"truth": tr, "analysis": analysis, "pool": tl.pool, "services": tl.services,
                     "links": links}
    return out


@pytest.mark.parametrize("case", CASES)
def test_verdicts_meet_the_targets(stories, case):
    r = stories[case]
    sc = score(r["truth"], r["analysis"].events)
    print(f"\n{case}: {sc.line()}\n  {sc.confusion}")
    assert sc.n_true == 5 and sc.detection_f1 >= 0.95
    assert sc.cause_accuracy >= 0.90 and sc.misattribution_f1 >= 0.90
    assert sc.naive_cause_accuracy < sc.cause_accuracy and sc.naive_misattribution_f1 < sc.misattribution_f1


def test_hpa_links_by_prefix_and_by_info(stories):
    for case, rule in (("hpa-renamed", "name prefix"), ("both", "name prefix"),
                       ("hpa-info", "kube_horizontalpodautoscaler_info scale target"),
                       ("idle-unlabelled", "same name")):
        hpa = stories[case]["links"].filter(kind="hpa")
        assert hpa.select("service", "rule", "status").rows() == [("chat-api-vllm", rule, "linked")], case
        svc = stories[case]["services"]
        assert svc["desired_replicas"].drop_nulls().len() > 0.9 * svc.height


def test_idle_unlabelled_gpus_are_free_on_the_control_morning_and_none_at_a_contended_ramp(stories):
    for case in ("idle-unlabelled", "both"):
        r = stories[case]
        pool = r["pool"].with_columns(pl.col("ts").dt.strftime("%a %H:%M").alias("when"))
        assert pool.select((pl.col("gpus_total") - 16).abs().max()).item() < 1e-9
        assert pool["gpus_unknown"].max() == 0.0
        ramp = pool.filter(pl.col("when") == "Mon 09:30").row(0, named=True)
        assert (ramp["gpus_batch"], ramp["gpus_idle"]) == (10.0, 0.0)
        night = pool.filter(pl.col("when") == "Mon 01:00").row(0, named=True)
        assert night["gpus_idle"] >= 12.0
        control = [e["start"][:10] for e in r["truth"]["batch_jobs"]]
        assert len(control) == 3  # three fine-tune mornings; the fourth weekday is the control


def test_no_event_is_blamed_on_users_wrongly_and_the_evidence_says_where_desired_came_from(stories):
    for case in CASES:
        for ev in stories[case]["analysis"].events:
            assert ev.evidence["desired_replicas_source"] == "autoscaler"
            if ev.cause == "batch_contention":
                assert ev.misattributed and ev.evidence["naive_reading"]["blames_users"]


# --- hand-written scrapes, one rule each --------------------------------------------------------
def _load(name: str) -> Store:
    st = Store(":memory:")
    assert [r.status for r in ingest_path(st, FIXTURES / name)] == ["loaded"]
    return st


@pytest.mark.parametrize("name,hpa,rule", [
    ("hpa_prefix.prom", "chat-api", "name prefix"),
    ("hpa_info.prom", "frontend-autoscaler", "kube_horizontalpodautoscaler_info scale target"),
    ("keda.prom", "keda-hpa-chat-api-vllm", "KEDA ScaledObject, same name")])
def test_hand_written_hpa_links(name, hpa, rule):
    with _load(name) as st:
        links = autoscaler_links(st)
        got = links.filter(kind="hpa").select("name", "service", "rule", "status").rows()
        assert got == [(hpa, "chat-api-vllm", rule, "linked")]
        svc = service_timeline(st, TimelineConfig(step_s=60))
        assert svc["desired_replicas"].drop_nulls().len() == svc.height


def test_hand_written_tie_is_ambiguous_and_links_nothing():
    with _load("ambiguous.prom") as st:
        hpa = autoscaler_links(st).filter(kind="hpa")
        assert hpa["status"].to_list() == ["ambiguous", "ambiguous"]
        assert hpa["service"].null_count() == 2 and all("tidelens.toml" in n for n in hpa["note"])
        svc = service_timeline(st, TimelineConfig(step_s=60))
        assert set(svc["service"]) == {"chat-api-a", "chat-api-b"}
        assert svc["desired_replicas"].null_count() == svc.height


@pytest.mark.parametrize("name,expect", [
    ("idle_unlabelled.prom", {"inference": 2, "batch": 1, "idle": 3, "unmanaged": 2, "unknown": 0, "total": 8}),
    ("never_labelled.prom", {"inference": 1, "idle": 1, "unknown": 4, "unmanaged": 0, "total": 6})])
def test_hand_written_unlabelled_gpu_classes(name, expect):
    with _load(name) as st:
        pool = pool_timeline(st, TimelineConfig(step_s=60))
    assert pool.height == 3
    for cls, n in expect.items():
        assert pool[f"gpus_{cls}"].to_list() == [float(n)] * 3, cls
