"""The workload map: defaults on real label sets, user rules, TOML round trip, classify over a store."""

from __future__ import annotations

from pathlib import Path

import orjson
import polars as pl
import pytest
from prometheus_client.parser import text_string_to_metric_families

from analytics.errors import ConfigError
from analytics.labels import normalise_labels
from analytics.workloads import (Rule, WorkloadMap, classify, classify_workloads, load_map, pool_of_host, save_map,
                                 workload_of_pod)

ROOT = Path(__file__).resolve().parent.parent


def real_label_sets(fixtures: Path) -> list[dict[str, str]]:
    text = (fixtures / "datadog_dcgm_t4_scrape.prom").read_text()
    out = []
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.append(dict(s.labels))
    return out


def test_real_scrape_devices_have_no_pod_and_classify_as_other(fixtures):
    sets = real_label_sets(fixtures)
    assert len(sets) > 20 and all("UUID" in s for s in sets)
    for raw in sets:
        norm = normalise_labels(raw)
        assert norm["pod"] is None and norm["hostname"]
        d = classify(WorkloadMap(), {k: norm[k] for k in ("namespace", "pod", "container", "hostname")})
        assert (d.workload, d.cls, d.team, d.rule) == (None, "other", None, "default: other")


def test_exported_pod_behind_service_monitor_and_mig_without_pod(fixtures):
    base = real_label_sets(fixtures)[0]
    # behind a ServiceMonitor: `pod` is the exporter's own pod, the workload's moved to exported_pod
    sm = {**base, "pod": "dcgm-exporter-x7z2k", "namespace": "gpu-operator", "container": "nvidia-dcgm-exporter",
          "exported_pod": "nightly-finetune-worker-3", "exported_namespace": "ml-training",
          "exported_container": "trainer"}
    norm = normalise_labels(sm)
    d = classify(WorkloadMap(), {k: norm[k] for k in ("namespace", "pod", "container", "hostname")})
    assert (d.workload, d.cls, d.team, d.latency_class) == ("nightly-finetune", "batch", "ml-training", "C")
    # a MIG instance with no pod label: nothing to classify, the device is unknown (see pool timeline)
    mig = {**base, "GPU_I_PROFILE": "1g.10gb", "GPU_I_ID": "13"}
    norm = normalise_labels(mig)
    assert (norm["mig_profile"], norm["mig_id"], norm["pod"]) == ("1g.10gb", "13", None)
    assert classify(WorkloadMap(), {"pod": norm["pod"], "hostname": norm["hostname"]}).cls == "other"


@pytest.mark.parametrize("pod, ns, prio, cls, rule", [
    ("chat-vllm-7d9c8b6f5-x2k4q", "inference", "inference-high", "inference", "default: inference priority class"),
    ("recommender-5f6d7c8b9-zzq2w", "recsys", "inference-high", "inference", "default: inference priority class"),
    ("nightly-finetune-0", "ml-training", "training-low", "batch", "default: batch priority class"),
    ("train-resnet-worker-1", "research", None, "batch", "default: batch name"),
    ("llama-ft-run-2", "team-a", None, "batch", "default: batch name"),
    ("batch-inference-7", "x", None, "batch", "default: batch name"),
    ("nightly-job-28391040-x7z2k", "x", None, "batch", "default: batch name"),
    ("triton-bert-6b7c9d8f5-zzq2w", "x", None, "inference", "default: inference name"),
    ("tgi-llama-0", "x", None, "inference", "default: inference name"),
    ("search-api-6b7c9d8f5-zzq2w", "x", None, "inference", "default: inference name"),
    ("embedder-0", "online-serving", None, "inference", "default: inference namespace"),
    ("observer-0", "default", None, "other", "default: other"),
    ("dev-notebook-3", "dev", None, "other", "default: interactive name"),
    ("dev-notebook-alice-03", "dev", "dev-low", "other", "default: interactive priority class"),
    ("jupyter-train-0", "research", None, "other", "default: interactive name"),
])
def test_defaults_classify_common_names(pod, ns, prio, cls, rule):
    d = classify(WorkloadMap(), {"pod": pod, "namespace": ns, "priority_class": prio})
    assert (d.cls, d.rule) == (cls, rule)
    assert d.team == ns
    assert d.latency_class == {"inference": "A", "other": "B", "batch": "C"}[cls]


def test_workload_of_pod_strips_controller_suffixes():
    assert workload_of_pod("chat-vllm-7d9c8b6f5-x2k4q") == "chat-vllm"
    assert workload_of_pod("train-llm-worker-12") == "train-llm"
    assert workload_of_pod("nightly-finetune-3") == "nightly-finetune"
    assert workload_of_pod("eval-run-2-x7z2k") == "eval-run"
    assert workload_of_pod("plain") == "plain"
    assert workload_of_pod(None) is None


def test_user_rules_win_per_field_and_pools_come_from_hostnames():
    wmap = WorkloadMap(rules=[
        Rule("recsys serves", {"namespace": "recsys"}, cls="inference", team="recsys-team"),
        Rule("serving nodes", {"hostname": "gpu-node-0[0-3]"}, pool="serving"),
        Rule("research team", {"namespace": "ml-.*"}, team="research"),
    ])
    d = classify(wmap, {"pod": "ranker-0", "namespace": "recsys"})
    assert (d.cls, d.team, d.rule) == ("inference", "recsys-team", "recsys serves")
    d = classify(wmap, {"pod": "nightly-finetune-0", "namespace": "ml-training"})
    assert (d.cls, d.team, d.rule) == ("batch", "research", "default: batch name")  # team by rule, class by default
    assert pool_of_host(wmap, "gpu-node-02") == "serving" and pool_of_host(wmap, "gpu-node-04") == "default"


def test_toml_round_trip_and_example_file(tmp_path):
    wmap = load_map(ROOT / "tidelens.example.toml")
    assert wmap.rules and wmap.default_pool == "default"
    assert classify(wmap, {"pod": "recommender-5f6d7c8b9-zzq2w", "namespace": "recsys"}).cls == "inference"
    assert classify(wmap, {"pod": "chat-vllm-0", "namespace": "inference"}).team == "serving"
    out = tmp_path / "tidelens.toml"
    save_map(wmap, out)
    again = load_map(out)
    assert [(r.match, r.cls, r.team, r.pool, r.latency_class, r.slo_metric) for r in again.rules] == \
        [(r.match, r.cls, r.team, r.pool, r.latency_class, r.slo_metric) for r in wmap.rules]
    assert [r.name for r in again.rules] == [r.name for r in wmap.rules]
    assert load_map(tmp_path / "missing.toml").rules == []


@pytest.mark.parametrize("text, words", [
    ("[[rule]\nname=1", "not valid TOML"),
    ('[[rule]]\nname = "x"\nnamespce = "a"\nclass = "batch"', "unknown keys ['namespce']"),
    ('[[rule]]\nname = "x"\npod = "("\nclass = "batch"', "is not a pattern Tidelens accepts"),
    ('[[rule]]\nname = "x"\npod = "a"\nclass = "training"', "class 'training' is not one of"),
])
def test_bad_toml_names_file_rule_and_fix(tmp_path, text, words):
    p = tmp_path / "tidelens.toml"
    p.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_map(p)
    assert str(p) in str(err.value) and words in str(err.value)


def test_classify_workloads_over_a_store(store):
    series = [
        (0, "DCGM_FI_DEV_GPU_UTIL", {"UUID": "G1", "Hostname": "n1", "pod": "chat-vllm-7d9c8b6f5-x2k4q",
                                     "namespace": "inference"}),
        (1, "DCGM_FI_DEV_GPU_UTIL", {"UUID": "G1", "Hostname": "n1", "pod": "chat-vllm-7d9c8b6f5-b2k4q",
                                     "namespace": "inference"}),
        (2, "DCGM_FI_DEV_GPU_UTIL", {"UUID": "G2", "Hostname": "n1", "pod": "dcgm-exporter-x7z2k",
                                     "exported_pod": "nightly-finetune-0", "exported_namespace": "ml-training"}),
        (3, "kube_pod_info", {"namespace": "recsys", "pod": "recommender-5f6d7c8b9-zzq2w", "node": "n2",
                              "priority_class": "inference-high"}),
        (4, "DCGM_FI_DEV_GPU_UTIL", {"UUID": "G3", "Hostname": "n1"}),
    ]

    def parse(sink):
        sink.add_series(pl.DataFrame([(k, m, orjson.dumps(l).decode()) for k, m, l in series],
                                     schema={"skey": pl.Int64, "metric": pl.Utf8, "labels": pl.Utf8}, orient="row"))
        sink.add_samples(pl.DataFrame([(k, 1000, 1.0) for k, _, _ in series],
                                      schema={"skey": pl.Int64, "ts_ms": pl.Int64, "value": pl.Float64}, orient="row"))

    store.load("w", "test", "w", parse)
    out = classify_workloads(store, WorkloadMap())
    got = {r["workload"]: (r["namespace"], r["pods"], r["cls"], r["rule"]) for r in out.iter_rows(named=True)}
    assert got == {
        "chat-vllm": ("inference", 2, "inference", "default: inference name"),
        "nightly-finetune": ("ml-training", 1, "batch", "default: batch name"),
        "recommender": ("recsys", 1, "inference", "default: inference priority class"),
    }


def test_a_catastrophic_pattern_runs_in_linear_time_and_re2_refusals_name_the_line(tmp_path):
    """``(a+)+$`` against a 41-character name is exponential in Python's ``re`` (it froze the app's
    server); RE2 answers at once. A pattern RE2 cannot compile is refused at load, with its line."""
    import time

    cfg = tmp_path / "tidelens.toml"
    cfg.write_text('[[rule]]\nname = "slow"\npod = "(a+)+$"\nclass = "batch"\n', encoding="utf-8")
    wmap = load_map(cfg)
    t = time.perf_counter()
    d = classify(wmap, {"pod": "a" * 41 + "!", "namespace": "x"})
    assert time.perf_counter() - t < 0.5 and d.rule != "slow"
    cfg.write_text('[map]\ndefault_pool = "p"\n\n[[rule]]\nname = "look"\nworkload = "(?!train).*"\nclass = "other"\n',
                   encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        load_map(cfg)
    assert f"{cfg}:6:" in str(exc.value) and "lookarounds" in str(exc.value)
