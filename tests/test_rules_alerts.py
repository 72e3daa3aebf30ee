"""Live alerts (`tidelens export alerts`): batch-blocked inference vs a traffic surge, held to Tail events.

Two small simulated stores: the mixed story (2 days, 24 GPUs: batch contention every morning,
one of them with a surge on the ramp, ``mixed``) and the partitioned control (3 days, 32 GPUs:
one afternoon surge, ``traffic_surge``, and batch that never holds inference's GPUs). On each,
the alerts the rules fire (``tests/alert_scoring.py``, their definitions read in Python on the
store's timelines) are scored against the events ``tidelens events`` finds, and ``promtool test
rules`` holds the rules to that reading at every step of the events' windows, labels and pages'
text included: the file's input is the simulator's series as the recording rules record them
(GPUs by pool, class, team and workload, the SLO histograms' increases, the autoscalers'
gauges). One more promtool test feeds the raw series to both files, recording rules and alerts.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from alert_scoring import AlertRun, recorded_inputs, run_store, window_test
from plugins.prometheus import promtool  # noqa: F401 (a fixture)
from analytics import signals as sg
from analytics.cli import main
from analytics.grafana import dashboard_model
from analytics.rules.alerts import ALERT_GROUP, BLOCKED, SURGE, alerts_yaml, compile_alerts
from analytics.rules.compile import GROUP, RulesConfig, map_digest, rules_yaml
from analytics.rules.unittests import labels_text
from analytics.sample import load_into, simulate
from analytics.sample.series import build_series
from analytics.store import Store
from analytics.workloads import WorkloadMap

WMAP = WorkloadMap()
HOUR_MS = 3_600_000
RAW = (sg.DCGM_FB_USED, sg.DCGM_GR_ENGINE_ACTIVE, sg.KSM_POD_INFO, sg.KSM_HPA_DESIRED, sg.KSM_DEPLOY_READY,
       *(f"{h}{x}" for h in (sg.VLLM_TTFT, sg.HTTP_DURATION) for x in ("_bucket", "_count")))


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """The mixed story in a store file (the CLI reads it), its simulation and what the alerts do on it."""
    path = tmp_path_factory.mktemp("alerts") / "mixed.duckdb"
    res = simulate("mixed", days=2, gpus=24, seed=1)
    with Store(path) as st:
        load_into(st, res)
    with Store(path, read_only=True) as st:
        yield path, res, st, run_store(st, WMAP)


@pytest.fixture(scope="module")
def partitioned():
    with Store(":memory:") as st:
        load_into(st, simulate("partitioned", days=3, gpus=32, seed=1))
        yield st, run_store(st, WMAP)


def _promtool(promtool: str, path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=300)


def _windows(run: AlertRun) -> list[tuple[int, int]]:
    """Per day, from the whole hour an hour before its first event to 30 minutes after its last."""
    days: dict[int, list] = {}
    for e in run.analysis.events:
        days.setdefault(e.start_ms // 86_400_000, []).append(e)
    return [((min(e.start_ms for e in evs) - HOUR_MS) // HOUR_MS * HOUR_MS, max(e.end_ms for e in evs) + 1_800_000)
            for evs in days.values()]


def test_export_alerts_writes_rules_and_a_prometheusrule_promtool_accepts(promtool, mixed, tmp_path, capsys) -> None:
    path, _, _, _ = mixed
    out, manifest = tmp_path / "tidelens.alerts.yml", tmp_path / "tidelens.prometheusrule.yml"
    argv = ["export", "alerts", "--db", str(path), "--out", str(out), "--manifest", str(manifest),
            "--rule-label", "release=prometheus", "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert main(["export", "rules", "--out", str(tmp_path / "tidelens.rules.yml")]) == 0
    capsys.readouterr()
    # the same digest as the recording rules it reads, on every series it records and every alert
    assert report["map_digest"] == map_digest(WMAP, RulesConfig())
    doc = yaml.safe_load(out.read_text(encoding="utf-8"))
    rules = doc["groups"][0]["rules"]
    assert [g["name"] for g in doc["groups"]] == [ALERT_GROUP] and report["alerts"] == [BLOCKED, SURGE]
    assert all(r["labels"]["tidelens_map_digest"] == report["map_digest"] for r in rules)
    alerts = {r["alert"]: r for r in rules if "alert" in r}
    for alert in alerts.values():
        assert alert["labels"]["severity"] == "page" and alert["keep_firing_for"] == "600s"
        assert set(alert["annotations"]) == {"summary", "description", "action", "tail_events"}
    # the store's services, their autoscalers linked, and a norm for every hour of the day
    services = {s["service"]: s for s in report["services"]}
    assert set(services) == {"chat-vllm", "recommender"}
    assert all(s["hpa"] == s["deployment"] == name and s["warmup_steps"] > 0 for name, s in services.items())
    assert sorted((n["service"], n["hour"]) for n in report["norms"]) == [(s, h) for s in sorted(services)
                                                                           for h in range(24)]
    assert all(n["upper_rps"] > n["expected_rps"] > 0 for n in report["norms"])
    files = [str(tmp_path / "tidelens.rules.yml"), str(out)]
    # the PrometheusRule holds both groups, labelled for the operator's ruleSelector
    kube = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    assert (kube["kind"], kube["metadata"]["labels"]) == ("PrometheusRule", {"release": "prometheus"})
    assert [g["name"] for g in kube["spec"]["groups"]] == [GROUP, ALERT_GROUP]
    (tmp_path / "spec.yml").write_text(yaml.safe_dump(kube["spec"]), encoding="utf-8")
    check = subprocess.run([promtool, "check", "rules", *files, str(tmp_path / "spec.yml")], capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0 and "duplicate" not in check.stdout + check.stderr, check.stdout + check.stderr


def test_export_alerts_refuses_what_it_cannot_use(mixed, tmp_path, capsys) -> None:
    path, _, _, _ = mixed
    out = tmp_path / "a.yml"
    assert main(["export", "alerts", "--db", str(tmp_path / "none.duckdb"), "--out", str(out)]) == 2
    assert "no such store" in capsys.readouterr().err
    assert main(["export", "alerts", "--db", str(path), "--out", str(out), "--rule-label", "release"]) == 2
    assert "--rule-label 'release': write KEY=VALUE" in capsys.readouterr().err
    assert main(["export", "alerts", "--db", str(path), "--out", str(out), "--step", "90s"]) == 2
    assert "--step 90s: give a multiple of --interval 1m" in capsys.readouterr().err
    assert not out.exists()


def test_blocked_alert_pages_every_batch_tail_within_3_minutes_and_promtool_agrees(promtool, mixed, tmp_path) -> None:
    _, _, store, run = mixed
    causes = {e.cause for e in run.analysis.events}
    assert {"batch_contention", "mixed"} <= causes
    blocked, surge = run.scores[BLOCKED], run.scores[SURGE]
    # every batch_contention and mixed event paged within 3 minutes, by the alert naming batch
    assert (blocked.required, blocked.recall, blocked.precision, blocked.forbidden) == (
        sum(e.cause in ("batch_contention", "mixed") for e in run.analysis.events), 1.0, 1.0, 0), blocked.missed
    assert surge.forbidden == 0 and surge.precision == 1.0, surge.wrong
    # the rules fire exactly that, at every step of each morning's events
    for i, (lo, hi) in enumerate(_windows(run)):
        folder = tmp_path / f"w{i}"
        folder.mkdir()
        test = window_test(run, store, WMAP, lo, hi, folder)
        done = _promtool(promtool, test)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    # the check has teeth: one page less at one step fails it
    doc = yaml.safe_load(test.read_text(encoding="utf-8"))
    check = next(c for c in doc["tests"][0]["alert_rule_test"] if c["alertname"] == BLOCKED and c["exp_alerts"])
    check["exp_alerts"].pop()
    test.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100_000), encoding="utf-8")
    assert _promtool(promtool, test).returncode != 0


def test_surge_alert_pages_the_partitioned_surge_and_never_blames_batch(promtool, partitioned, tmp_path) -> None:
    store, run = partitioned
    surges = [e for e in run.analysis.events if e.cause == "traffic_surge"]
    assert surges and all(e.cause != "batch_contention" for e in run.analysis.events)
    s = run.scores[SURGE]
    assert (s.required, s.recall, s.precision, s.forbidden) == (len(surges), 1.0, 1.0, 0), s.missed + s.wrong
    # the partitioned control: batch never holds what inference waits for, so no page blames it
    assert not any(a == BLOCKED for a, _ in run.expected.by_service)
    e = surges[0]
    test = window_test(run, store, WMAP, (e.start_ms - HOUR_MS) // HOUR_MS * HOUR_MS, e.end_ms + 1_800_000, tmp_path)
    done = _promtool(promtool, test)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]


def test_alerts_read_what_the_recording_rules_record_from_raw_series(promtool, mixed, tmp_path) -> None:
    """Raw dcgm-exporter, vLLM, http and kube-state-metrics series through both files: the
    blocked pages at an event's third minute are the ones the recorded series give."""
    _, res, _, run = mixed
    active = run.expected.active
    at = next(e.start_ms + 180_000 for e in run.analysis.events if e.cause in ("batch_contention", "mixed")
              and all(e.start_ms + 180_000 in active.get(k, ()) for k, v in run.expected.by_service.items()
                      if e.start_ms + 180_000 in v))
    lo = at - 12 * 60_000  # more than any warm-up back: every condition's window inside the series
    pages = run.expected.firing[at][BLOCKED]
    assert pages
    step_ms = run.acfg.step_s * 1000
    ss = build_series(res, minutes=slice((lo - res.start_ms) // step_ms, (at - res.start_ms) // step_ms + 1))
    keep = ss.series.filter(ss.series["metric"].is_in(list(RAW)))
    samples = ss.samples.join(keep.select("skey"), on="skey")
    inputs = []
    for row in keep.iter_rows(named=True):
        pts = samples.filter(samples["skey"] == row["skey"])
        values = {(ts - lo) // step_ms: v for ts, v in zip(pts["ts_ms"], pts["value"])}
        inputs.append({"series": labels_text(json.loads(row["labels"]), row["metric"]),
                       "values": " ".join(repr(values[i]) if i in values else "_" for i in range((at - lo) // step_ms + 1))})
    (tmp_path / "rules.yml").write_text(rules_yaml(WMAP), encoding="utf-8")
    doc = compile_alerts(WMAP, run.targets, run.norms, RulesConfig(), run.acfg)
    (tmp_path / "alerts.yml").write_text(alerts_yaml(doc, run.digest), encoding="utf-8")
    by_service: dict[str, int] = {}
    for page in pages:
        by_service[page["labels"]["service"]] = by_service.get(page["labels"]["service"], 0) + 1
    test = {"rule_files": ["rules.yml", "alerts.yml"], "evaluation_interval": "1m", "group_eval_order": [GROUP, ALERT_GROUP],
            "tests": [{"interval": "1m", "input_series": inputs, "promql_expr_test": [{
                "expr": f'count by (service) (ALERTS{{alertname="{BLOCKED}", alertstate="firing"}})',
                "eval_time": f"{(at - lo) // 1000}s",
                "exp_samples": [{"labels": labels_text({"service": s}), "value": n} for s, n in sorted(by_service.items())]}]}]}
    (tmp_path / "raw.test.yml").write_text(yaml.safe_dump(test, sort_keys=False, width=100_000), encoding="utf-8")
    done = _promtool(promtool, tmp_path / "raw.test.yml")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]


def test_recorded_inputs_carry_what_the_alerts_read(mixed) -> None:
    """The promtool tests' input: GPUs by pool and class summing to the pool, the SLO histograms'
    increases and the autoscalers' gauges, every series stamped with the map's digest."""
    _, _, store, run = mixed
    inputs = recorded_inputs(store, run.timelines, WMAP, run.targets, run.digest, run.acfg.step_s * 1000)
    names = {m for m, _, _ in inputs}
    assert {"pool_class_team_workload:tidelens_gpus:sum", "service_le:vllm_time_to_first_token_seconds_bucket:increase",
            "service:http_server_request_duration_seconds_count:increase",
            f"namespace_horizontalpodautoscaler:{sg.KSM_HPA_DESIRED}:last"} <= names
    assert all(lab["tidelens_map_digest"] == run.digest for _, lab, _ in inputs)
    gpus: dict[int, float] = {}
    for m, _, pts in inputs:
        if m == "pool_class_team_workload:tidelens_gpus:sum":
            for ts, v in pts.items():
                gpus[ts] = gpus.get(ts, 0.0) + v
    assert {round(v, 6) for v in gpus.values()} == {24.0}


def test_dashboard_shows_the_alerts_state(mixed) -> None:
    _, _, store, _ = mixed
    model = dashboard_model(store, wmap=WMAP)
    exprs = {t["expr"] for p in model["panels"] for t in p.get("targets", [])}
    assert any('ALERTS{alertname=~"InferenceBlockedByBatch|InferenceTrafficSurge", alertstate="firing"}' in x
               for x in exprs), exprs
