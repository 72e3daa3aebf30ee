"""The workload map as recording rules: `tidelens export rules`, checked by promtool itself.

`promtool check rules` accepts the file; `promtool test rules`, fed the simulator's holders (and
hostile names: quotes, backslashes, regex metacharacters, newlines, unicode digits and case
folding), finds every holder classed, teamed and pooled as analytics.workloads does, for
tidelens.example.toml and the built-in map; and the GPUs held by pool, class, team and workload
equal the pool timeline's holdings on the live fleet (time-slicing, MIG, holder changes, idle
and unmanaged devices).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import polars as pl
import pytest
import yaml

import live_data as d
import prom_server
from plugins.prometheus import promtool  # noqa: F401 (a fixture)
from analytics.cli import main
from analytics.ingest import ingest_bytes
from analytics.rules import DIGEST_LABEL, RulesConfig, map_digest, rules_yaml
from analytics.rules.unittests import Holder, classification_tests, decided_rules, holdings_tests
from analytics.store import Store
from analytics.timeline import TimelineConfig, holdings
from analytics.workloads import WorkloadMap, classify, load_map

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "tidelens.example.toml"
# Hostile-ish holders, and ones that make every rule of both maps decide some holder.
HOSTILE = [
    Holder("ml-training", 'train"quote-0', "c", "gpu-node-01"),
    Holder("infer\\ence", "a.b*c-serve-7d9c8b6f5-x2k4q", hostname="gpu-node-0[0-3]"),
    Holder("dev", "nöteboök-ünïcode-x7z2k", hostname="gpu-node-03"),
    Holder("", "ſerve-long-s-1"),  # U+017F folds to s in both engines
    Holder("ns", "line\nbreak-train-0", hostname="gpu-node-02"),  # `.` stops at a newline in both
    Holder("ns", "trail-train-1\n"),  # Python's `$` matched before a final newline; RE2's does not
    Holder("x", "some-thing-٣"),  # an Arabic-Indic digit: not \d in RE2
    Holder("batch-ns", "plain", priority_class="best-effort"),
    Holder("x", "api", serves=True, service="svc"),
    Holder("x", "nothing-at-all"), Holder("x", "TRAIN-UPPER-0"),
    Holder("x", "foo-bar-$1-0", priority_class="Inference-HIGH"),
    Holder("research", "ft-llama-worker-0-abcde"), Holder("batch-jobs", "xyz"),
    Holder("x", "qwerty", serves=True), Holder("lab", "zzz", priority_class="notebook-low"),
    Holder("recsys", "recommender-7d9c8b6f5-x2k4q", serves=True, service="recommender"),
    Holder("inference-prod", "x"), Holder("y", "sandbox", hostname="GPU-NODE-00"),
]


@pytest.fixture(scope="module")
def sim_holders() -> list[Holder]:
    """The holders of a small simulated day, with their labels as the simulator exports them."""
    from analytics.sample import simulate
    from analytics.sample.series import build_series

    series = build_series(simulate("morning", days=1, gpus=16, seed=3)).series
    dev, info, serves = {}, {}, {}
    for row in series.iter_rows(named=True):
        lab, metric = json.loads(row["labels"]), row["metric"]
        key = (lab.get("namespace", ""), lab.get("pod", ""))
        if metric.startswith("DCGM_") and lab.get("pod"):
            dev[key] = (lab.get("container", ""), lab.get("Hostname", ""))
        elif metric == "kube_pod_info":
            info[key] = lab.get("priority_class", "")
        elif metric.endswith("_count") and lab.get("pod"):
            serves[key] = lab.get("service", "")
    return [Holder(ns, pod, cont, host, info.get((ns, pod), ""), (ns, pod) in serves, serves.get((ns, pod), ""))
            for (ns, pod), (cont, host) in dev.items()]


def _promtool_test(promtool: str, tmp: Path, wmap: WorkloadMap, doc: dict) -> subprocess.CompletedProcess:
    (tmp / "tidelens.rules.yml").write_text(rules_yaml(wmap), encoding="utf-8")
    doc["rule_files"] = ["tidelens.rules.yml"]
    test = tmp / "tidelens.test.yml"
    test.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100_000), encoding="utf-8")
    return subprocess.run([promtool, "test", "rules", str(test)], capture_output=True, text=True, timeout=120)


def test_export_rules_writes_a_rules_file_promtool_accepts(promtool, tmp_path, capsys) -> None:
    out = tmp_path / "tidelens.rules.yml"
    assert main(["export", "rules", "--out", str(out), "--config", str(EXAMPLE), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    wmap = load_map(EXAMPLE)
    assert report["map_digest"] == map_digest(wmap) != map_digest(WorkloadMap())
    doc = yaml.safe_load(out.read_text(encoding="utf-8"))
    rules = [r for g in doc["groups"] for r in g["rules"]]
    assert [g["name"] for g in doc["groups"]] == report["groups"] and len(rules) > 40
    for r in rules:  # level:metric:operations, every series stamped with the map's digest
        assert re.fullmatch(r"[a-z_]+:[A-Za-z0-9_]+:[a-z0-9_]+", r["record"]), r["record"]
        assert r["labels"][DIGEST_LABEL] == report["map_digest"]
    # one class match per rule of the map that sets a class, in the map's order (its rank)
    classed = [r["labels"]["tidelens_rule"] for r in rules if r["record"] == "namespace_pod:tidelens_class_match:rank"]
    assert classed == [r.name for r in wmap.all_rules() if r.cls]
    check = subprocess.run([promtool, "check", "rules", str(out)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    # another interval is another digest: a pull can tell the rules apart
    assert map_digest(wmap, RulesConfig(interval_s=30)) != report["map_digest"]


def test_export_rules_names_a_file_promtools_backfill_keeps_every_evaluation_of(tmp_path, capsys) -> None:
    from analytics.rules.compile import backfill_drops_evaluations

    bad = next(p for p in (tmp_path / f"r{i}.yml" for i in range(2000))
               if backfill_drops_evaluations(str(p), "tidelens", 60))
    assert main(["export", "rules", "--out", str(bad)]) == 0
    said = capsys.readouterr().out
    good = said.split("give it as ", 1)[1].split(":", 1)[0]
    assert good != str(bad) and not backfill_drops_evaluations(good, "tidelens", 60), said
    ok = tmp_path / "ok.yml"
    while backfill_drops_evaluations(str(ok), "tidelens", 60):
        ok = ok.with_name("k" + ok.name)
    assert main(["export", "rules", "--out", str(ok), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["backfill_name"] == str(ok)


@pytest.mark.parametrize("which", ["example", "builtin"])
def test_promql_map_classifies_every_holder_as_the_python_map(promtool, sim_holders, tmp_path, which) -> None:
    wmap = load_map(EXAMPLE) if which == "example" else WorkloadMap()
    no_priority = [Holder(h.namespace, h.pod, h.container, h.hostname, "", h.serves, h.service) for h in sim_holders]
    cases = {"simulator": sim_holders, "simulator without priority classes": no_priority, "hostile": HOSTILE}
    # every rule that sets a class decides some holder: no rule goes untested
    assert decided_rules(wmap, cases) == {r.name for r in wmap.all_rules() if r.cls}
    doc = classification_tests(wmap, cases, "tidelens.rules.yml")
    run = _promtool_test(promtool, tmp_path, wmap, doc)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]

    # the check has teeth: one holder expected in another class fails it
    first = doc["tests"][0]["promql_expr_test"][0]["exp_samples"][0]
    first["labels"] = first["labels"].replace('class="inference"', 'class="batch"').replace(
        'class="other"', 'class="inference"')
    bad = _promtool_test(promtool, tmp_path, wmap, doc)
    assert bad.returncode != 0 and "FAILED" in bad.stdout + bad.stderr


def test_hostile_names_are_classed_by_the_same_reading_in_both_engines() -> None:
    wmap = WorkloadMap()
    # Python reads these as RE2 does: ASCII \d, `$` only at the very end
    assert classify(wmap, {"pod": "some-thing-٣"}).workload == "some-thing-٣"
    assert classify(wmap, {"pod": "line\nbreak-train-0"}).workload == "line\nbreak-train-0"
    assert classify(wmap, {"pod": "trail-train-1\n"}).workload == "trail-train-1\n"
    assert classify(wmap, {"pod": "ſerve-1"}).cls == "inference"


def _without_honor_labels(samples: list) -> list:
    """The fleet scraped through a ServiceMonitor without ``honorLabels``: dcgm-exporter's holder
    labels become ``exported_*`` and every series carries the exporter's own pod."""
    out = []
    for metric, labels, ts, value in samples:
        if metric.startswith("DCGM_"):
            labels = {k: v for k, v in labels.items() if k not in ("pod", "namespace", "container")} | {
                f"exported_{k}": labels[k] for k in ("pod", "namespace", "container") if k in labels} | {
                "pod": f"dcgm-exporter-{labels['Hostname']}", "namespace": "gpu-operator"}
        out.append((metric, labels, ts, value))
    return out


@pytest.mark.parametrize("exported", [False, True], ids=["labels as written", "exported_* labels"])
def test_gpus_held_by_the_rules_equal_the_pool_timelines_holdings(promtool, tmp_path, exported) -> None:
    samples = _without_honor_labels(d.fleet_samples()) if exported else d.fleet_samples()
    store = Store(":memory:")
    try:
        ingest_bytes(store, "fleet.om", prom_server.write_openmetrics(samples, tmp_path / "fleet.om").read_bytes())
        wmap = load_map(EXAMPLE)
        held = holdings(store, TimelineConfig(step_s=d.SCRAPE_S, start_ms=d.T0_MS, end_ms=d.END_MS), wmap)
    finally:
        store.close()
    at = {d.T0_MS + k * d.STEP_MS for k in (2, 30, 59, 61, 70, 85, 119)}  # shared, missed scrape, changes
    rows = (held.group_by("ts", "pool", "cls", "team", "workload").agg(pl.col("gpus").sum())
            .with_columns(pl.col("ts").dt.epoch("ms").alias("ts_ms")).filter(pl.col("ts_ms").is_in(list(at))))
    assert set(rows["cls"]) >= {"inference", "batch", "other", "idle", "unmanaged"}
    expected = [(r["ts_ms"], r["pool"], r["cls"], r["team"], r["workload"], r["gpus"]) for r in rows.iter_rows(named=True)]
    run = _promtool_test(promtool, tmp_path, wmap, holdings_tests(samples, d.T0_MS, expected, "tidelens.rules.yml"))
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
