"""The sample's export variants (analytics.sample.variants): each really carries its deviation and
changes nothing else; combinations work; the default run is what it was before variants existed;
every format of a variant ingests to what the store fast path loads."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import orjson
import polars as pl
import pytest

from analytics import signals as sg
from analytics.errors import ConfigError
from analytics.sample import SAMPLE_VERSION, load_into, simulate, truth, write_exports
from analytics.sample.export import _source_identity
from analytics.sample.series import SeriesSet, build_series, iter_series
from analytics.sample.variants import VARIANTS, parse_variants
from analytics.store import Store

SMALL = {"days": 2, "gpus": 32, "seed": 1}
STORY = {"days": 4, "gpus": 64, "seed": 1}  # the pool the morning story needs; 4 days plan a surge
TINY = {"days": 1, "gpus": 16, "seed": 1}
H8_MS = 8 * 3600_000

# What the default run (morning, 2 days, 32 GPUs, seed 1) exported before variants existed:
# series, samples, a sha256 of both frames as CSV, and of its truth (computed on the code before the change).
DEFAULT_COUNTS = (5152, 2295230)
DEFAULT_SERIES_SHA = "2758b458276c27ce8b0a875ad2577611713935a0c538808f33124dc45ef663ea"
DEFAULT_TRUTH_SHA = "a119f5599b75d23705a23bd2bea565dbeec67e26d78764db04be9f6b1c70455c"


class Runs:
    """Runs and their series, built once per module (each variant costs about a second)."""

    def __init__(self) -> None:
        self._runs: dict[tuple, object] = {}
        self._series: dict[tuple, SeriesSet] = {}

    def sim(self, *variants: str, size: dict = SMALL):
        key = (tuple(variants), tuple(sorted(size.items())))
        if key not in self._runs:
            self._runs[key] = simulate("morning", variants=tuple(variants), **size)
        return self._runs[key]

    def __call__(self, *variants: str, size: dict = SMALL) -> tuple:
        key = (tuple(variants), tuple(sorted(size.items())))
        if key not in self._series:
            self._series[key] = build_series(self.sim(*variants, size=size))
        return self.sim(*variants, size=size), self._series[key]


@pytest.fixture(scope="module")
def runs() -> Runs:
    return Runs()


def _frame(ss: SeriesSet) -> pl.DataFrame:
    return ss.samples.join(ss.series, on="skey")


def _labels(ss: SeriesSet, metric_prefix: str) -> list[dict[str, str]]:
    rows = ss.series.filter(pl.col("metric").str.starts_with(metric_prefix))["labels"].to_list()
    return [orjson.loads(x) for x in rows]


def _digest(ss: SeriesSet, keep: pl.Expr | None = None, *, with_labels: bool = True) -> pl.DataFrame:
    """Per series: metric, labels, sample count and a digest of its (ts, value) pairs, sorted."""
    series = ss.series if keep is None else ss.series.filter(keep)
    per = (ss.samples.join(series.select("skey"), on="skey", how="semi").group_by("skey")
           .agg(pl.len().alias("n"), (pl.struct("ts_ms", "value").hash(seed=1) % 2_147_483_647)
                .cast(pl.Int64).sum().alias("h")))
    cols = ["metric", "labels", "n", "h"] if with_labels else ["metric", "n", "h"]
    return series.join(per, on="skey").select(cols).sort(cols)


def _assert_same(a: SeriesSet, b: SeriesSet, keep: pl.Expr, *, with_labels: bool = True) -> None:
    da, db = _digest(a, keep, with_labels=with_labels), _digest(b, keep, with_labels=with_labels)
    assert da.height > 0 and da.equals(db)


HPA = pl.col("metric").str.starts_with("kube_horizontalpodautoscaler_")
DEPLOY = pl.col("metric").str.starts_with("kube_deployment_")
KSM_PODS = pl.col("metric").str.starts_with("kube_pod_") | pl.col("metric").str.starts_with("kube_node_")


# --- the default and the catalogue ---------------------------------------------------------------------

def test_default_output_is_unchanged(runs) -> None:
    r, ss = runs()
    h = hashlib.sha256()
    h.update(ss.series.write_csv().encode())
    h.update(ss.samples.sort(["skey", "ts_ms"]).write_csv().encode())
    assert (ss.series.height, ss.samples.height) == DEFAULT_COUNTS
    assert h.hexdigest() == DEFAULT_SERIES_SHA
    t = truth(r)
    # the truth's shares per cause (issue 37) are the one addition: without them, the same bytes
    assert t["events"] and all(set(e["shares"]) == {"batch_contention", "traffic_surge", "unexplained"}
                               for e in t["events"])
    before = {**t, "events": [{k: v for k, v in e.items() if k != "shares"} for e in t["events"]]}
    assert hashlib.sha256(orjson.dumps(before, option=orjson.OPT_SORT_KEYS)).hexdigest() == DEFAULT_TRUTH_SHA
    assert r.variants == () and not {"variants", "tz", "export_scrape_s"} & set(t)
    # the default's source is the one the cached sample stores were keyed by
    key = f"{SAMPLE_VERSION}/morning/2/32/1"
    assert _source_identity(r)[:2] == ("sample:morning:2d:32gpus:seed1", hashlib.sha256(key.encode()).hexdigest())


def test_parse_variants_orders_validates_and_refuses_contradictions() -> None:
    assert parse_variants(("utc8", "hpa-prefix", "utc8")) == ("hpa-prefix", "utc8")
    assert parse_variants(("tp2", "keda")) == parse_variants(("keda", "tp2")) == ("keda", "tp2")
    assert parse_variants("tp2") == ("tp2",) and parse_variants(()) == ()
    assert list(VARIANTS) == ["hpa-prefix", "hpa-info", "keda", "no-autoscaler", "no-ksm-pods", "exported-labels",
                              "e2e-only", "tp2", "scrape-15s", "scrape-30s", "utc8", "warmup-5-8", "surge-on-ramp",
                              "hold-outlasts-surge"]
    assert all(v.help.endswith(".") and v.changes for v in VARIANTS.values())
    with pytest.raises(ConfigError) as e:
        parse_variants(("tp2", "hpa-suffix"))
    assert "'hpa-suffix'" in str(e.value) and all(n in str(e.value) for n in VARIANTS)
    for a, b in (("scrape-15s", "scrape-30s"), ("hpa-prefix", "keda"), ("hpa-info", "hpa-prefix"),
                 ("keda", "no-autoscaler")):
        with pytest.raises(ConfigError) as e:
            parse_variants((b, a))
        assert a in str(e.value) and b in str(e.value)
    with pytest.raises(ConfigError):
        simulate("morning", days=1, gpus=16, seed=1, variants=("nope",))


# --- HPA naming -------------------------------------------------------------------------------------------

def _hpa_names(ss: SeriesSet) -> dict[str, str]:
    """namespace -> HPA name (one HPA per namespace here), from the HPA series."""
    out = {}
    for lab in _labels(ss, "kube_horizontalpodautoscaler_status_"):
        assert out.setdefault(lab["namespace"], lab["horizontalpodautoscaler"]) == lab["horizontalpodautoscaler"]
    return out


def _deployments(ss: SeriesSet) -> dict[str, str]:
    return {lab["namespace"]: lab["deployment"] for lab in _labels(ss, sg.KSM_DEPLOY_READY)}


@pytest.mark.parametrize("variant, expected", [
    ("hpa-prefix", {"inference": "chat", "recsys": "recommender-hpa"}),
    ("keda", {"inference": "keda-hpa-chat-vllm", "recsys": "keda-hpa-recommender-so"}),
    ("hpa-info", {"inference": "llm-frontend", "recsys": "recs-autoscaler"}),
])
def test_hpa_naming(runs, variant: str, expected: dict[str, str]) -> None:
    _, base = runs()
    _, ss = runs(variant)
    deploy = _deployments(ss)
    assert deploy == _deployments(base) == {"inference": "chat-vllm", "recsys": "recommender"}
    names = _hpa_names(ss)
    assert names == expected
    assert not set(names.values()) & set(deploy.values())  # no HPA is named after its Deployment
    for ns, hpa in names.items():
        related = deploy[ns].startswith(hpa) or hpa.startswith(deploy[ns])
        assert related == (variant == "hpa-prefix")
        assert hpa.startswith(sg.KEDA_HPA_PREFIX) == (variant == "keda")
    # the HPA series keep their values; the Deployment's and every other series are unchanged
    _assert_same(base, ss, pl.col("metric").str.starts_with("kube_horizontalpodautoscaler_status_"), with_labels=False)
    _assert_same(base, ss, ~HPA)
    info = _frame(ss).filter(pl.col("metric") == sg.KSM_HPA_INFO)
    if variant != "hpa-info":
        assert info.height == 0
        return
    # the only link: kube_horizontalpodautoscaler_info, value 1 at every scrape of its HPA
    info_labels = _labels(ss, sg.KSM_HPA_INFO)
    ksm = _labels(ss, sg.KSM_HPA_DESIRED)[0]
    assert sorted(info_labels, key=lambda d: d["namespace"]) == [
        {"horizontalpodautoscaler": expected[ns], "namespace": ns, "scaletargetref_api_version": "apps/v1",
         "scaletargetref_kind": "Deployment", "scaletargetref_name": deploy[ns],
         "instance": ksm["instance"], "job": "kube-state-metrics"} for ns in ("inference", "recsys")]
    assert (info["value"] == 1.0).all()
    desired = _frame(ss).filter(pl.col("metric") == sg.KSM_HPA_DESIRED)
    assert sorted(info["ts_ms"].to_list()) == sorted(desired["ts_ms"].to_list())


# --- missing exporters ------------------------------------------------------------------------------------

def test_no_autoscaler_drops_hpa_and_deployment_series_only(runs) -> None:
    _, base = runs()
    _, ss = runs("no-autoscaler")
    assert ss.series.filter(HPA | DEPLOY).height == 0 and base.series.filter(HPA | DEPLOY).height == 6
    _assert_same(base, ss, ~(HPA | DEPLOY))
    assert ss.samples.height == base.samples.height - _frame(base).filter(HPA | DEPLOY).height


def test_no_ksm_pods_drops_pod_and_node_series_only(runs) -> None:
    _, base = runs()
    _, ss = runs("no-ksm-pods")
    assert ss.series.filter(KSM_PODS).height == 0 and base.series.filter(KSM_PODS).height > 100
    assert ss.series.filter(HPA | DEPLOY).height == 6  # the autoscaler's series stay
    _assert_same(base, ss, ~KSM_PODS)
    # idle GPUs: dcgm series without pod labels, and now nothing says they are free
    idle = [lab for lab in _labels(ss, sg.DCGM_GPU_UTIL) if "pod" not in lab]
    assert idle and not ss.series.filter(pl.col("metric") == sg.KSM_NODE_GPU_ALLOCATABLE).height


def test_no_kube_state_metrics_at_all(runs) -> None:
    _, base = runs()
    _, ss = runs("no-autoscaler", "no-ksm-pods")
    jobs = {orjson.loads(x)["job"] for x in ss.series["labels"].to_list()}
    assert "kube-state-metrics" not in jobs and {"dcgm-exporter", "kueue-controller-manager"} <= jobs
    _assert_same(base, ss, ~(KSM_PODS | HPA | DEPLOY))


# --- ServiceMonitor without honorLabels -------------------------------------------------------------------

def test_exported_labels(runs) -> None:
    r, base = runs()
    _, ss = runs("exported-labels")
    assert ss.series["skey"].equals(base.series["skey"])  # the same series in the same order
    assert ss.samples.equals(base.samples)
    dcgm_pod_of_node: dict[str, set[str]] = {}
    n_idle = 0
    for metric, before, after in zip(base.series["metric"], base.series["labels"], ss.series["labels"]):
        b, a = orjson.loads(before), orjson.loads(after)
        if b["job"] == "dcgm-exporter":
            # the exporter's pod in pod/namespace/container; the GPU's holder only in exported_*
            assert a["pod"].startswith("dcgm-exporter-") and len(a["pod"]) == len("dcgm-exporter-") + 5
            assert (a["namespace"], a["container"], a["service"], a["endpoint"]) == (
                "gpu-operator", "nvidia-dcgm-exporter", "nvidia-dcgm-exporter", "gpu-metrics")
            assert a.get("exported_pod") == b.get("pod") and a.get("exported_namespace") == b.get("namespace")
            assert a.get("exported_container") == b.get("container")
            n_idle += "pod" not in b  # an idle GPU: the exporter's pod label and no exported_pod
            dcgm_pod_of_node.setdefault(b["Hostname"], set()).add((a["pod"], a["instance"]))
            assert a["instance"].endswith(":9400") and a["instance"] != b["instance"]
            rest = {k: v for k, v in a.items() if not k.startswith("exported_") and k not in (
                "pod", "namespace", "container", "service", "endpoint", "instance")}
            assert rest == {k: v for k, v in b.items() if k not in ("pod", "namespace", "container", "instance")}
        elif b["job"] == "kube-state-metrics":
            assert a["pod"].startswith("kube-state-metrics-") and a["namespace"] == "monitoring"
            assert (a["container"], a["service"], a["endpoint"]) == ("kube-state-metrics",) * 2 + ("http",)
            assert a.get("exported_pod") == b.get("pod") and a.get("exported_namespace") == b.get("namespace")
        else:  # vLLM/http pods (service discovery) and Kueue: untouched
            assert a == b, metric
    assert n_idle > 0
    # one exporter pod (and target address) per node, a different one on each node
    assert set(dcgm_pod_of_node) == set(r.topology.nodes)
    assert all(len(v) == 1 for v in dcgm_pod_of_node.values())
    assert len({next(iter(v)) for v in dcgm_pod_of_node.values()}) == len(r.topology.nodes)
    ksm_pods = {orjson.loads(x)["pod"] for x in ss.series["labels"].to_list()
                if orjson.loads(x)["job"] == "kube-state-metrics"}
    assert len(ksm_pods) == 1


# --- cluster shapes ----------------------------------------------------------------------------------------

def _weekday_morning_contention(t: dict, service: str) -> list[dict]:
    """The service's batch_contention events starting 08:00-12:00 on a weekday, in the truth's zone."""
    tz = t.get("tz", "UTC")
    offset = timedelta(hours=int(tz[3:6])) if tz != "UTC" else timedelta(0)
    out = []
    for e in t["events"]:
        local = datetime.fromisoformat(e["start"].replace("Z", "+00:00")) + offset
        if (e["service"] == service and e["cause"] == "batch_contention" and local.weekday() < 5
                and 8 <= local.hour < 12):
            out.append(e)
    return out


def test_e2e_only(runs) -> None:
    from analytics.sample.latency import request_weights, weighted_p99

    r, ss = runs("e2e-only", size=STORY)
    r0 = runs.sim(size=STORY)
    fams = set(ss.series["family"].to_list())
    assert sg.VLLM_TTFT not in fams and sg.VLLM_E2E in fams
    t = truth(r)
    assert t["slos"]["chat-vllm"] == {"metric": sg.VLLM_E2E, "p99_ms": 2500.0}
    assert t["slos"]["recommender"] == truth(r0)["slos"]["recommender"]
    assert 2.5 in sg.VLLM_E2E_BUCKETS_S
    chat = next(s for s in r.scenario.services if s.name == "chat-vllm")
    assert chat.slo_latency == "e2e" and chat.decode_median_s < 0.5
    # the truth's p99 is the end-to-end one, of exactly the exported requests
    lat, n_req = r.full.latency["chat-vllm"], r.full.requests["chat-vllm"]
    w = request_weights(n_req, lat.e2e_s.shape[1])
    assert np.allclose(weighted_p99(lat.e2e_s, w) * 1000.0, r.p99_variants["full"]["chat-vllm"], equal_nan=True)
    inc = (_frame(ss).filter(pl.col("metric") == f"{sg.VLLM_E2E}_bucket")
           .with_columns(pl.col("labels").str.json_path_match("$.le").alias("le"))
           .filter(pl.col("le").is_in(["2.5", "+Inf"])).sort(["skey", "ts_ms"])
           .with_columns(pl.col("value").diff().fill_null(pl.col("value")).over("skey").alias("inc"))
           .group_by("ts_ms").agg(pl.col("inc").filter(pl.col("le") == "2.5").sum().alias("le"),
                                  pl.col("inc").filter(pl.col("le") == "+Inf").sum().alias("all")).sort("ts_ms"))
    minute = ((inc["ts_ms"] - r.start_ms) // 60_000).to_numpy()
    served = (r.full.pool.serving["chat-vllm"][minute] >= 0).any(axis=1) & (minute > 0)
    above = (inc["all"] - inc["le"]).to_numpy() > 0.01 * inc["all"].to_numpy()
    assert served.sum() > 4000
    assert np.array_equal(above[served], np.nan_to_num(r.p99_variants["full"]["chat-vllm"][minute[served]]) > 2500)
    # uncontended, the e2e p99 stays under 2.5 s; contention on weekday mornings breaks it
    neither = np.nan_to_num(r.p99_variants["neither"]["chat-vllm"])
    assert (neither > 2500).mean() < 0.002
    assert len(_weekday_morning_contention(t, "chat-vllm")) >= 2
    assert all(e["misattributable_by_dashboard"] for e in _weekday_morning_contention(t, "chat-vllm"))
    assert Counter(e["cause"] for e in t["events"])["scaling_lag"] == 0


def test_tp2_replicas_hold_two_gpus_of_one_node(runs) -> None:
    r, ss = runs("tp2", size=STORY)
    chat = next(s for s in r.scenario.services if s.name == "chat-vllm")
    assert chat.gpus_per_replica == 2
    util = (_frame(ss).filter(pl.col("metric") == sg.DCGM_GPU_UTIL)
            .with_columns(pl.col("labels").str.json_path_match("$.pod").alias("pod"),
                          pl.col("labels").str.json_path_match("$.UUID").alias("uuid"),
                          pl.col("labels").str.json_path_match("$.Hostname").alias("host"))
            .filter(pl.col("pod").is_not_null())
            .group_by("ts_ms", "pod").agg(pl.col("uuid").n_unique().alias("gpus"), pl.col("host").n_unique().alias("nodes")))
    chat_rows = util.filter(pl.col("pod").str.starts_with("chat-vllm-"))
    assert chat_rows.height > 10_000
    assert (chat_rows["gpus"] == 2).all() and (chat_rows["nodes"] == 1).all()
    assert (util.filter(pl.col("pod").str.starts_with("recommender-"))["gpus"] == 1).all()
    req = (_frame(ss).filter(pl.col("metric") == sg.KSM_POD_GPU_REQUEST)
           .with_columns(pl.col("labels").str.json_path_match("$.pod").alias("pod")))
    assert set(req.filter(pl.col("pod").str.starts_with("chat-vllm-"))["value"].unique()) == {2.0}
    assert set(req.filter(~pl.col("pod").str.starts_with("chat-vllm-"))["value"].unique()) == {1.0}
    # the pool: bound together, released together, never shared
    for p in r.full.pool.pods:
        if p.service == "chat-vllm" and p.gpu >= 0:
            assert len(p.gpus) == 2 and len({r.topology.gpus[g].node for g in p.gpus}) == 1
            held = r.full.pool.holders[p.scheduled_min:p.end_min][:, list(p.gpus)]
            assert (held == p.idx).all()
    # the story holds: the fine-tune collides with the weekday ramps, the afternoon surge is a surge
    t = truth(r)
    assert len(_weekday_morning_contention(t, "chat-vllm")) >= 2
    surges = [e for e in t["events"] if e["cause"] == "traffic_surge"]
    assert surges and all(12 <= int(e["start"][11:13]) < 20 for e in surges)


def test_compound_story_variants_warm_up_land_and_hold_as_told() -> None:
    # issue 55: the compound story as an independent simulator told it
    r = simulate("compound", days=4, gpus=48, seed=1, variants=("warmup-5-8", "surge-on-ramp", "hold-outlasts-surge"))
    chat = r.scenario.services[0]
    assert (chat.warmup_min, chat.warmup_max_min) == (5, 8)
    warm = [p.ready_min - p.scheduled_min for p in r.full.pool.pods if p.service == "chat-vllm" and p.scheduled_min > 0]
    assert set(warm) == {5, 6, 7, 8}
    ramp = int(r.scenario.ramp_hour_utc * 60)
    assert r.surges and all(15 <= s.start_min % 1440 - ramp <= 20 and 25 <= s.end_min - s.start_min <= 40
                            and 1.8 <= s.factor <= 2.5 for s in r.surges)
    finetunes = [j for j in r.full.pool.jobs if j["workload"] == "nightly-finetune"]
    assert finetunes and all(j["end_min"] - j["start_min"] >= 8.5 * 60 for j in finetunes)
    held = [j for j in finetunes if any(j["start_min"] < s.start_min < j["end_min"] for s in r.surges)]
    assert held and all(j["end_min"] > s.end_min for j in held for s in r.surges if j["start_min"] < s.start_min)


def test_utc8_is_the_same_story_eight_hours_earlier(runs) -> None:
    r0, base = runs()
    r, ss = runs("utc8")
    assert r.start_ms == r0.start_ms - H8_MS
    assert ss.series.equals(base.series)
    a, b = base.samples.sort(["skey", "ts_ms"]), ss.samples.sort(["skey", "ts_ms"])
    assert a["value"].equals(b["value"]) and (a["ts_ms"] - b["ts_ms"] == H8_MS).all()
    t0, t = truth(r0), truth(r)
    assert t["tz"] == "UTC+08:00" and t["start"] == "2026-10-04T16:00:00Z" and t["variants"] == ["utc8"]
    shift = timedelta(hours=8)
    for e0, e in zip(t0["events"], t["events"], strict=True):
        assert (e["service"], e["cause"], e["minutes"], e["misattributable_by_dashboard"]) == (
            e0["service"], e0["cause"], e0["minutes"], e0["misattributable_by_dashboard"])
        assert datetime.fromisoformat(e["start"][:-1]) == datetime.fromisoformat(e0["start"][:-1]) - shift
    assert [j["id"] for j in t["batch_jobs"]] == [j["id"] for j in t0["batch_jobs"]]  # local dates
    ft = next(j for j in t["batch_jobs"] if j["workload"] == "nightly-finetune")
    assert ft["start"][11:16] == "18:00"  # 02:00 local
    assert _weekday_morning_contention(t, "chat-vllm")  # on the local morning ramp


# --- scrape interval ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("variant, per_min", [("scrape-15s", 4), ("scrape-30s", 2)])
def test_scrape_interval(runs, variant: str, per_min: int) -> None:
    r0, base = runs(size=TINY)
    r, ss = runs(variant, size=TINY)
    interval_ms = 60_000 // per_min
    assert ss.series.equals(base.series) and ss.samples.height == per_min * base.samples.height
    assert truth(r)["export_scrape_s"] == interval_ms // 1000 and truth(r)["scrape_s"] == 60
    df = ss.samples.join(ss.series.select("skey", "metric", "labels"), on="skey").with_columns(
        # the step each scrape belongs to: (t - 60 s, t]
        (r.start_ms + ((pl.col("ts_ms") - r.start_ms + 59_999) // 60_000) * 60_000).alias("step"))
    per_step = df.group_by("skey", "step").agg(pl.len().alias("n"), pl.col("ts_ms").max().alias("last"),
                                               pl.col("ts_ms").min().alias("first"))
    assert (per_step["n"] == per_min).all()
    # inside the step, one interval apart, at one offset per scrape target (job, instance)
    assert ((per_step["last"] - per_step["first"]) == (per_min - 1) * interval_ms).all()
    offsets = df.with_columns(((pl.col("step") - pl.col("ts_ms")) % interval_ms).alias("offset_ms"),
                              pl.col("labels").str.json_path_match("$.job").alias("job"),
                              pl.col("labels").str.json_path_match("$.instance").alias("instance"))
    by_target = offsets.group_by("job", "instance").agg(pl.col("offset_ms").n_unique().alias("k"),
                                                        pl.col("offset_ms").first())
    assert (by_target["k"] == 1).all() and by_target["offset_ms"].n_unique() > 10
    assert by_target.filter(pl.col("job") == "dcgm-exporter").height == len(r.topology.nodes)
    assert by_target.filter(pl.col("job").is_in(["kube-state-metrics", "kueue-controller-manager"])).height == 2
    # the last scrape of each step is the 60 s export's sample; gauges hold it at every scrape
    last = (df.sort("ts_ms").group_by("skey", "step").agg(pl.col("value").last(), pl.col("value").min().alias("lo"))
            .rename({"step": "ts_ms"}))
    joined = base.samples.join(last, on=["skey", "ts_ms"])
    assert joined.height == base.samples.height and (joined["value"] == joined["value_right"]).all()
    kinds = ss.series.select("skey", pl.col("family").is_in(
        [sg.VLLM_TTFT, sg.VLLM_E2E, sg.HTTP_DURATION, sg.VLLM_SUCCESS, sg.KUEUE_ADMITTED, sg.KUEUE_EVICTED])
        .alias("counter"), "metric")
    g = joined.join(kinds, on="skey")
    assert (g.filter(~pl.col("counter"))["lo"] == g.filter(~pl.col("counter"))["value"]).all()
    counters = df.join(kinds.filter("counter"), on="skey").sort(["skey", "ts_ms"])
    # counters: monotone over time, integer counts stay integers, buckets monotone in le
    assert (counters.group_by("skey").agg((pl.col("value").diff() < 0).sum().alias("neg"))["neg"] == 0).all()
    ints = counters.filter(~pl.col("metric").str.ends_with("_sum"))
    assert (ints["value"] == ints["value"].floor()).all()
    # ...and really interpolated: within some minutes a counter's sub-scrapes differ
    within = counters.group_by("skey", "step").agg(pl.col("value").n_unique().alias("u"))
    assert (within["u"] == per_min).sum() > 1000
    buckets = (ints.filter(pl.col("metric") == f"{sg.VLLM_TTFT}_bucket")
               .with_columns(pl.col("labels").str.json_path_match("$.le").alias("le"),
                             pl.col("labels").str.json_path_match("$.pod").alias("pod"))
               .with_columns(pl.col("le").replace("+Inf", "inf").cast(pl.Float64).alias("le_f"))
               .sort(["pod", "ts_ms", "le_f"]))
    assert (buckets.group_by("pod", "ts_ms").agg((pl.col("value").diff() < 0).sum().alias("neg"))["neg"] == 0).all()
    # a counter's first minute: its value at every sub-scrape (nothing invented before it existed)
    first = counters.group_by("skey").agg(pl.col("step").min().alias("s0"))
    head = counters.join(first, on="skey").filter(pl.col("step") == pl.col("s0"))
    assert (head.group_by("skey").agg(pl.col("value").n_unique().alias("u"))["u"] == 1).all()
    assert r0.events == r.events  # the simulation is the default's


# --- combinations, chunks, round trip, source identity, CLI --------------------------------------------------

COMBOS = [("hpa-prefix", "no-ksm-pods", "exported-labels", "scrape-30s"), ("tp2", "utc8", "hpa-info")]


@pytest.mark.parametrize("combo", COMBOS + [("no-autoscaler", "no-ksm-pods")])
def test_combinations_carry_every_deviation_in_any_order(combo: tuple[str, ...]) -> None:
    a = simulate("morning", variants=combo, **TINY)
    b = simulate("morning", variants=tuple(reversed(combo)), **TINY)
    assert a.variants == b.variants == parse_variants(combo)
    ssa = build_series(a)
    assert _digest(ssa).equals(_digest(build_series(b)))
    assert truth(a)["variants"] == list(a.variants)
    labels = [orjson.loads(x) for x in ssa.series["labels"].to_list()]
    metrics = set(ssa.series["metric"].to_list())
    if "hpa-prefix" in combo:
        assert {d["horizontalpodautoscaler"] for d in labels if "horizontalpodautoscaler" in d} == {
            "chat", "recommender-hpa"}
        assert not any(m.startswith(("kube_pod_", "kube_node_")) for m in metrics)
        dcgm = [d for d in labels if d["job"] == "dcgm-exporter"]
        assert all(d["pod"].startswith("dcgm-exporter-") for d in dcgm)
        at_60s = simulate("morning", variants=("hpa-prefix", "no-ksm-pods", "exported-labels"), **TINY)
        assert ssa.samples.height == 2 * build_series(at_60s).samples.height
    if "tp2" in combo:
        assert sg.KSM_HPA_INFO in metrics and truth(a)["tz"] == "UTC+08:00"
        assert ssa.samples["ts_ms"].min() == a.start_ms == simulate("morning", **TINY).start_ms - H8_MS
        req = [(d["pod"], m) for d, m in zip(labels, ssa.series["metric"]) if m == sg.KSM_POD_GPU_REQUEST]
        assert any(p.startswith("chat-vllm-") for p, _ in req)
    if combo == ("no-autoscaler", "no-ksm-pods"):
        assert not any(m.startswith("kube_") for m in metrics)


def test_chunked_pieces_concatenate_to_the_whole() -> None:
    r = simulate("morning", variants=("hpa-info", "no-ksm-pods", "scrape-15s"), **TINY)
    whole = build_series(r)
    pieces = list(iter_series(r, chunk_samples=200_000))
    assert len(pieces) > 5
    cat = SeriesSet(series=pl.concat([p.series for p in pieces]), samples=pl.concat([p.samples for p in pieces]))
    assert cat.series.equals(whole.series)
    assert cat.samples.sort(["skey", "ts_ms"]).equals(whole.samples.sort(["skey", "ts_ms"]))
    with Store(":memory:") as a, Store(":memory:") as b:
        one, many = load_into(a, r), load_into(b, r, chunk_samples=200_000)
        assert (one.series, one.samples) == (many.series, many.samples)
        # exact and order-free per series (a float sum depends on the order DuckDB adds in)
        per_series = ("SELECT s.key, count(*), sum(hash(x.ts_ms, x.value)) FROM samples x "
                      "JOIN series s ON s.id = x.series_id GROUP BY s.key ORDER BY s.key")
        assert one.samples == whole.samples.height
        assert a.con.execute(per_series).fetchall() == b.con.execute(per_series).fetchall()


def _store_rows(st: Store) -> set[tuple]:
    return set(st.con.execute(
        "SELECT s.key, x.ts_ms, x.value FROM samples x JOIN series s ON s.id = x.series_id").fetchall())


@pytest.mark.parametrize("fmt", ["prom-text", "prom-json"])
@pytest.mark.parametrize("combo", COMBOS)
def test_exports_ingest_to_what_load_into_loads(tmp_path: Path, fmt: str, combo: tuple[str, ...]) -> None:
    from analytics import ingest
    r = simulate("morning", variants=combo, days=2, gpus=16, seed=1)
    ss = build_series(r, minutes=slice(1410, 1470))  # across midnight: the scrapes stay in their day's file
    paths = write_exports(r, tmp_path, formats=(fmt,), series=ss)
    assert len([p for p in paths if fmt in p.parts]) == 2
    with Store(":memory:") as a, Store(":memory:") as b:
        res = load_into(a, r, series=ss)
        assert res.status == "loaded" and res.samples == ss.samples.height
        loaded = ingest.ingest_path(b, tmp_path / fmt)
        assert loaded and all(x.status == "loaded" for x in loaded), [x.error for x in loaded]
        assert sum(x.samples for x in loaded) == ss.samples.height
        assert _store_rows(a) == _store_rows(b)


def test_variants_are_other_sources_of_the_same_seed(runs) -> None:
    r0 = runs.sim(size=TINY)
    ra = simulate("morning", variants=("utc8", "keda"), **TINY)
    rb = simulate("morning", variants=("keda", "utc8"), **TINY)
    name, hash_, _ = _source_identity(ra)
    assert name == "sample:morning:1d:16gpus:seed1:keda+utc8"
    assert _source_identity(rb)[:2] == (name, hash_) and hash_ != _source_identity(r0)[1]
    with Store(":memory:") as st:
        assert load_into(st, r0).status == "loaded"
        assert load_into(st, ra).status == "loaded"
        assert load_into(st, rb).status == "skipped"
        assert st.sources()["name"].to_list() == [_source_identity(r0)[0], name]


def test_cli_variants(tmp_path: Path, capsys) -> None:
    from analytics.cli import main

    assert main(["sample", "--variant", "list"]) == 0
    out = capsys.readouterr().out
    assert all(v.name in out and v.help in out for v in VARIANTS.values())
    assert main(["sample", "--variant", "list", "--json"]) == 0
    assert [v["name"] for v in json.loads(capsys.readouterr().out)] == list(VARIANTS)
    assert main(["sample", "--out", str(tmp_path), "--variant", "hpa-sufix"]) == 2
    assert "hpa-sufix" in capsys.readouterr().err
    assert main(["sample", "--out", str(tmp_path), "--variant", "scrape-15s", "--variant", "scrape-30s"]) == 2
    assert main(["sample", "--excerpts", str(tmp_path), "--variant", "utc8"]) == 2
    capsys.readouterr()
    rc = main(["sample", "--days", "1", "--gpus", "16", "--seed", "2", "--out", str(tmp_path), "--formats",
               "prom-text", "--variant", "utc8", "--variant", "keda", "--json"])
    assert rc == 0 and json.loads(capsys.readouterr().out)["variants"] == ["keda", "utc8"]
    t = json.loads((tmp_path / "truth.json").read_text())
    assert t["variants"] == ["keda", "utc8"] and t["tz"] == "UTC+08:00" and t["export_scrape_s"] == 60
    # the run's one day starts at local midnight: 16:00 UTC the day before
    assert (tmp_path / "prom-text" / "scrape-2026-10-04.prom.gz").exists()
    start = datetime(2026, 10, 5, tzinfo=timezone(timedelta(hours=8)))
    assert t["start"] == start.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
