"""Service timeline on hand-made stores: rps, quantiles over pods, replicas, autoscaler, SLO metric."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from test_timeline_pool import MIN, Builder  # tests/ is on sys.path (rootdir conftest)

from analytics.timeline import TimelineConfig, service_timeline, signal_report
from analytics.timeline.counters import histogram_quantile
from analytics.workloads import Rule, WorkloadMap

LES = ["0.01", "0.05", "0.1", "0.5", "+Inf"]


def cumulative(counts_per_minute: list[list[int]]) -> list[list[float]]:
    """Per-bucket (non-cumulative) counts per minute -> cumulative bucket counters over time."""
    total = np.zeros(len(LES))
    out = []
    for c in counts_per_minute:
        total += np.cumsum(c)
        out.append(total.tolist())
    return out


def add_hist(b: Builder, metric: str, labels: dict[str, str], minutes: list[int], per_min: list[list[int]]) -> None:
    cum = cumulative(per_min)
    for i, le in enumerate(LES):
        b.add(f"{metric}_bucket", {**labels, "le": le}, [(m * MIN, v[i]) for m, v in zip(minutes, cum)])
    b.add(f"{metric}_count", labels, [(m * MIN, v[-1]) for m, v in zip(minutes, cum)])


def test_vllm_service_quantiles_rps_replicas_and_autoscaler(store):
    b = Builder()
    lab = {"model_name": "llama", "namespace": "inference", "job": "vllm"}
    # pod A serves minutes 0..4 (minute 0 is the baseline); pod B starts at minute 2 (baseline) and serves 3..4
    a_counts = [[0, 0, 0, 0, 0], [10, 20, 10, 0, 0], [10, 20, 10, 0, 0], [0, 0, 0, 30, 10], [5, 5, 0, 0, 0]]
    add_hist(b, "vllm:time_to_first_token_seconds", {**lab, "pod": "chat-vllm-7d9c8b6f5-x2k4q"},
             [0, 1, 2, 3, 4], a_counts)
    b_counts = [[0, 0, 0, 0, 0], [0, 0, 20, 0, 0], [5, 5, 0, 0, 0]]
    add_hist(b, "vllm:time_to_first_token_seconds", {**lab, "pod": "chat-vllm-7d9c8b6f5-b2k4q"}, [2, 3, 4], b_counts)
    # e2e exists too but TTFT is the SLO histogram for vLLM
    add_hist(b, "vllm:e2e_request_latency_seconds", {**lab, "pod": "chat-vllm-7d9c8b6f5-x2k4q"},
             [0, 1, 2, 3, 4], [[0] * 5] + [[0, 0, 0, 0, 40]] * 4)
    b.add("vllm:num_requests_running", {**lab, "pod": "chat-vllm-7d9c8b6f5-x2k4q"}, [(m * MIN, 3.0) for m in range(5)])
    b.add("vllm:num_requests_running", {**lab, "pod": "chat-vllm-7d9c8b6f5-b2k4q"}, [(m * MIN, 2.0) for m in (3, 4)])
    b.add("kube_horizontalpodautoscaler_status_desired_replicas",
          {"horizontalpodautoscaler": "chat-vllm", "namespace": "inference"}, [(m * MIN, 2.0 + (m >= 3)) for m in range(5)])
    b.add("kube_deployment_status_replicas_ready", {"deployment": "chat-vllm", "namespace": "inference"},
          [(m * MIN, 1.0 + (m >= 3)) for m in range(5)])
    b.load(store)
    tl = service_timeline(store, TimelineConfig(step_s=60))
    assert tl["service"].unique().to_list() == ["chat-vllm"]
    assert tl["slo_metric"].unique().to_list() == ["vllm:time_to_first_token_seconds"]
    by = {r["ts"].minute: r for r in tl.iter_rows(named=True)}
    assert by[1]["rps"] == pytest.approx(40 / 60)
    # minute 1: 40 requests: cum (10, 30, 40, 40, 40): p50 rank 20 in (0.01, 0.05]
    assert by[1]["p50_ms"] == pytest.approx((0.01 + 0.04 * 10 / 20) * 1000)
    # minute 3: pod A (0,0,0,30,10) + pod B (0,0,20,0,0) -> cum (0,0,20,50,60); p99 rank 59.4 in +Inf -> 0.5 s
    assert by[3]["rps"] == pytest.approx(60 / 60)
    assert by[3]["p99_ms"] == pytest.approx(500.0)
    assert by[3]["p50_ms"] == pytest.approx((0.1 + 0.4 * 10 / 30) * 1000)
    # minute 2: pod B appeared (its counters at zero): only pod A's 40 requests count
    assert by[2]["rps"] == pytest.approx(40 / 60)
    assert [by[m]["replicas"] for m in range(5)] == [1, 1, 2, 2, 2]
    assert by[0]["p99_ms"] is None  # no requests in the baseline step: missing, not zero
    assert by[3]["running"] == 5.0 and by[1]["running"] == 3.0 and by[1]["waiting"] is None
    assert (by[1]["desired_replicas"], by[1]["ready_replicas"]) == (2.0, 1.0)
    assert (by[4]["desired_replicas"], by[4]["ready_replicas"]) == (3.0, 2.0)


def test_http_service_label_and_slo_metric_override(store):
    b = Builder()
    per = [[0] * 5, [50, 30, 10, 5, 5], [50, 30, 10, 5, 5]]
    for pod in ("recommender-5f6d7c8b9-zzq2w", "recommender-5f6d7c8b9-zzq2x"):
        add_hist(b, "http_server_request_duration_seconds",
                 {"service": "recommender", "pod": pod, "namespace": "recsys"}, [0, 1, 2], per)
        add_hist(b, "vllm:e2e_request_latency_seconds",
                 {"service": "recommender", "pod": pod, "namespace": "recsys"}, [0, 1, 2], [[0] * 5, [0, 0, 0, 0, 9], [0, 0, 0, 0, 9]])
    b.load(store)
    tl = service_timeline(store, TimelineConfig(step_s=60))
    row = tl.filter(pl.col("ts").dt.minute() == 1).row(0, named=True)
    assert row["slo_metric"] == "http_server_request_duration_seconds"
    assert row["rps"] == pytest.approx(200 / 60)
    # cum (100,160,180,190,200): p95 rank 190 -> exactly 0.5 s; p99 rank 198 -> +Inf bucket -> 0.5 s
    assert row["p95_ms"] == pytest.approx(500.0) and row["p99_ms"] == pytest.approx(500.0)
    assert row["replicas"] == 2 and row["pool"] == "default"
    wmap = WorkloadMap(rules=[Rule("recsys e2e", {"service": "recommender"}, slo_metric="vllm:e2e_request_latency_seconds")])
    tl2 = service_timeline(store, TimelineConfig(step_s=60), wmap)
    assert tl2["slo_metric"].unique().to_list() == ["vllm:e2e_request_latency_seconds"]
    assert tl2.filter(pl.col("ts").dt.minute() == 1)["p99_ms"][0] == pytest.approx(500.0)


def test_quantile_matches_numpy_truth_within_bucket_width(store):
    """Simulated per-minute latencies: the timeline's p99 is within the width of the bucket holding the true p99."""
    rng = np.random.default_rng(7)
    edges = [0.01, 0.05, 0.1, 0.5, math.inf]
    b = Builder()
    truth = {}
    per_pod = {p: [[0] * 5] for p in ("a", "b")}
    for m in range(1, 6):
        both = []
        for p in ("a", "b"):
            lat = rng.lognormal(mean=math.log(0.04), sigma=0.6, size=300)
            both.append(lat)
            per_pod[p].append(np.histogram(lat, bins=[0, *edges[:-1], np.inf])[0].tolist())
        truth[m] = float(np.quantile(np.concatenate(both), 0.99))
    for p, counts in per_pod.items():
        add_hist(b, "http_server_request_duration_seconds", {"service": "svc", "pod": f"svc-{p}", "namespace": "x"},
                 list(range(6)), counts)
    b.load(store)
    tl = service_timeline(store, TimelineConfig(step_s=60))
    for r in tl.filter(pl.col("ts").dt.minute() >= 1).iter_rows(named=True):
        t = truth[r["ts"].minute]
        i = next(k for k, e in enumerate(edges) if t <= e)
        lo, hi = (0.0 if i == 0 else edges[i - 1]), edges[i]
        width = (hi if math.isfinite(hi) else lo) - lo
        assert abs(r["p99_ms"] / 1000 - t) <= width + 1e-9


def test_signal_report_found_and_missing(store):
    b = Builder()
    add_hist(b, "vllm:time_to_first_token_seconds", {"pod": "chat-vllm-0", "namespace": "x"}, [0, 1], [[0] * 5, [1] * 5])
    b.add("DCGM_FI_DEV_GPU_UTIL", {"UUID": "GPU-1", "Hostname": "h"}, [(MIN, 1.0)])
    b.load(store)
    rep = signal_report(store)
    found = dict(zip(rep["signal"], rep["found"]))
    assert found["request_latency"] and found["gpu_holders"] and found["gpu_activity"]
    assert not found["autoscaler"] and not found["queue"]
    missing = rep.filter(~pl.col("found"))
    assert missing["cost_if_missing"].str.len_chars().min() > 0
    # A found signal costs nothing: no "what it costs if missing" text beside it (page and CLI).
    assert rep.filter(pl.col("found"))["cost_if_missing"].null_count() == int(rep["found"].sum())


def test_empty_store(store):
    tl = service_timeline(store)
    assert tl.height == 0 and {"ts", "service", "rps", "p50_ms", "p95_ms", "p99_ms", "replicas"} <= set(tl.columns)
    assert histogram_quantile(0.5, pl.DataFrame(schema={"le": pl.Float64, "value": pl.Float64})).height == 0


def test_deprecated_vllm_spellings_are_recognised(store):
    """Colon-less vLLM names (as some remote-write pipelines rename them) land as the canonical family."""
    b = Builder()
    add_hist(b, "vllm_time_to_first_token_seconds", {"pod": "chat-vllm-7d9c8b6f5-x2k4q", "namespace": "inference"},
             [0, 1], [[0] * 5, [0, 10, 0, 0, 0]])
    b.add("vllm_num_requests_waiting", {"pod": "chat-vllm-7d9c8b6f5-x2k4q", "namespace": "inference"},
          [(0, 1.0), (MIN, 4.0)])
    b.load(store)
    tl = service_timeline(store, TimelineConfig(step_s=60))
    row = tl.filter(pl.col("ts").dt.minute() == 1).row(0, named=True)
    assert row["slo_metric"] == "vllm:time_to_first_token_seconds"
    assert row["p50_ms"] == pytest.approx(30.0) and row["waiting"] == 4.0


def test_summary_quantiles_where_no_histogram_exists(store):
    """Triton's latency summary: per-pod quantiles, the highest over pods; rps from its _count."""
    b = Builder()
    for pod, p99_us, count in (("triton-bert-6b7c9d8f5-zzq2w", 80_000.0, [0, 120]),
                               ("triton-bert-6b7c9d8f5-zzq2x", 95_000.0, [0, 60])):
        lab = {"model": "bert", "version": "1", "pod": pod, "namespace": "nlp"}
        for q, v in (("0.5", p99_us / 4), ("0.9", p99_us / 2), ("0.95", p99_us * 0.8), ("0.99", p99_us)):
            b.add("nv_inference_request_summary_us", {**lab, "quantile": q}, [(0, v), (MIN, v)])
        b.add("nv_inference_request_summary_us_count", lab, [(0, count[0]), (MIN, count[1])])
    b.load(store)
    tl = service_timeline(store, TimelineConfig(step_s=60))
    row = tl.filter(pl.col("ts").dt.minute() == 1).row(0, named=True)
    assert (row["service"], row["slo_metric"]) == ("triton-bert", "nv_inference_request_summary_us")
    assert row["p99_ms"] == pytest.approx(95.0) and row["p50_ms"] == pytest.approx(95.0 / 4)
    assert row["rps"] == pytest.approx(180 / 60) and row["replicas"] == 2
