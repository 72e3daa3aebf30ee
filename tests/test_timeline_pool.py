"""Pool timeline on hand-made stores: MIG, time-slicing, unlabelled devices, idle vs unmanaged vs unknown."""

from __future__ import annotations

import orjson
import polars as pl
import pytest

from analytics.ingest import ingest_bytes
from analytics.ingest.mapping import load_mapping
from analytics.store import Store
from analytics.timeline import TimelineConfig, shared_gpu_keys
from analytics.timeline.pool import CLASS_COLUMNS, class_rules, holdings, pool_timeline
from analytics.workloads import Rule, WorkloadMap

MIN = 60_000


class Builder:
    """Series and samples for one source, written through the store's Sink."""

    def __init__(self) -> None:
        self.series: list[tuple[int, str, str]] = []
        self.samples: list[tuple[int, int, float]] = []
        self._keys: dict[str, int] = {}

    def add(self, metric: str, labels: dict[str, str], points: list[tuple[int, float]]) -> None:
        key = metric + orjson.dumps(labels, option=orjson.OPT_SORT_KEYS).decode()
        if key not in self._keys:
            self._keys[key] = len(self._keys)
            self.series.append((self._keys[key], metric, orjson.dumps(labels).decode()))
        self.samples += [(self._keys[key], ts, float(v)) for ts, v in points]

    def load(self, store, name: str = "b") -> None:
        def parse(sink):
            sink.add_series(pl.DataFrame(self.series, schema={"skey": pl.Int64, "metric": pl.Utf8, "labels": pl.Utf8},
                                         orient="row"))
            sink.add_samples(pl.DataFrame(self.samples, schema={"skey": pl.Int64, "ts_ms": pl.Int64,
                                                                "value": pl.Float64}, orient="row"))
        store.load(name, "test", name, parse)


def gpu_labels(host: str, i: int, pod: str | None = None, ns: str | None = None, **extra) -> dict[str, str]:
    lab = {"gpu": str(i), "UUID": f"GPU-{host}-{i}", "device": f"nvidia{i}", "modelName": "NVIDIA H100 80GB HBM3",
           "Hostname": host, **extra}
    if pod:
        lab.update(pod=pod, namespace=ns or "default", container="main")
    return lab


def dcgm(b: Builder, lab: dict[str, str], minutes: range, util: float = 50.0, fb_mib: float = 1024.0,
         mig: bool = False) -> None:
    pts = [m * MIN for m in minutes]
    if not mig:
        b.add("DCGM_FI_DEV_GPU_UTIL", lab, [(t, util) for t in pts])
    b.add("DCGM_FI_PROF_GR_ENGINE_ACTIVE", lab, [(t, util / 100) for t in pts])
    b.add("DCGM_FI_DEV_FB_USED", lab, [(t, fb_mib) for t in pts])


def mixed_node(b: Builder, minutes: range) -> None:
    """One node of 4 GPUs: inference, batch->unlabelled handover, MIG 3g(batch)+2g(no pod)+1g(no pod), time-sliced x3."""
    h = "gpu-node-00"
    dcgm(b, gpu_labels(h, 0, "chat-vllm-7d9c8b6f5-x2k4q", "inference"), minutes, util=80)
    first, rest = range(minutes.start, minutes.start + 3), range(minutes.start + 3, minutes.stop)
    dcgm(b, gpu_labels(h, 1, "nightly-finetune-0", "ml-training"), first, util=100)
    dcgm(b, gpu_labels(h, 1), rest, util=0)  # the job ended: device unlabelled
    for gi, prof, pod in (("1", "3g.40gb", "train-llm-worker-0"), ("5", "2g.20gb", None), ("13", "1g.10gb", None)):
        dcgm(b, gpu_labels(h, 2, pod, "ml-training", GPU_I_PROFILE=prof, GPU_I_ID=gi), minutes, util=30, mig=True)
    for k in range(3):
        dcgm(b, gpu_labels(h, 3, f"dev-notebook-{k}", "dev"), minutes, util=10)


def test_classes_add_up_with_mig_time_slicing_and_unlabelled(store):
    b = Builder()
    mixed_node(b, range(1, 7))
    b.load(store)
    tl = pool_timeline(store, TimelineConfig(step_s=60))
    assert tl.height == 6 and tl["pool"].unique().to_list() == ["default"]
    parts = tl.select(pl.sum_horizontal(*(f"gpus_{c}" for c in CLASS_COLUMNS)))
    assert parts.to_series().to_list() == pytest.approx(tl["gpus_total"].to_list())
    assert tl["gpus_total"].to_list() == pytest.approx([4.0] * 6)
    first, last = tl.row(0, named=True), tl.row(-1, named=True)
    # minute 1: GPU0 inference; GPU1 batch + MIG 3g batch; dev pods share GPU3; 2g+1g no pod; 1/7 unconfigured
    assert first["gpus_inference"] == pytest.approx(1.0)
    assert first["gpus_batch"] == pytest.approx(1 + 3 / 7)
    assert first["gpus_other"] == pytest.approx(1.0)
    # no kube-state-metrics, but the exporter labels pods elsewhere (Kubernetes mode): the 2g+1g
    # instances without a pod label are 30% busy, so somebody outside Kubernetes uses them
    assert first["gpus_unmanaged"] == pytest.approx(3 / 7)
    assert first["gpus_unknown"] == pytest.approx(0.0)
    assert first["gpus_idle"] == pytest.approx(1 / 7)     # MIG slices no instance uses
    # minute 6: the finetune left; its GPU has no pod label, 0% active and 1 GiB used: idle
    assert last["gpus_batch"] == pytest.approx(3 / 7)
    assert last["gpus_idle"] == pytest.approx(1 + 1 / 7)
    assert last["gpus_unmanaged"] == pytest.approx(3 / 7)
    assert first["activity_pct"] == pytest.approx((80 + 100 + 30 * 6 / 7 + 10) / (3 + 6 / 7))
    assert first["mem_used_gib"] == pytest.approx((1024 * (3 + 3)) / 1024)
    assert first["pending_pods"] is None


def test_unlabelled_gpus_by_exporter_mode_activity_and_memory(store):
    """Kubernetes mode is the exporter deployment's (its ``job``): one that labels pods on some GPU
    makes its unlabelled GPUs idle or unmanaged by activity and memory; one that never labels
    pods leaves its GPUs unknown. The thresholds are the map's."""
    b = Builder()
    k8s = {"job": "dcgm-exporter"}
    mins = range(1, 4)
    dcgm(b, gpu_labels("n1", 0, "chat-vllm-7d9c8b6f5-x2k4q", "inference", **k8s), mins, util=60, fb_mib=70000)
    dcgm(b, gpu_labels("n1", 1, **k8s), mins, util=0, fb_mib=0)          # idle
    dcgm(b, gpu_labels("n1", 2, **k8s), mins, util=3, fb_mib=600)        # idle: under both thresholds
    dcgm(b, gpu_labels("n1", 3, **k8s), mins, util=90, fb_mib=40000)     # unmanaged: busy
    dcgm(b, gpu_labels("n1", 4, **k8s), mins, util=0, fb_mib=30000)      # unmanaged: memory held
    bare = {"job": "gpu-bare-metal"}
    dcgm(b, gpu_labels("n2", 0, **bare), mins, util=0, fb_mib=0)         # unknown: never labels pods
    dcgm(b, gpu_labels("n2", 1, **bare), mins, util=90, fb_mib=40000)    # unknown
    b.load(store)
    tl = pool_timeline(store, TimelineConfig(step_s=60))
    assert tl["gpus_total"].to_list() == pytest.approx([7.0] * 3)
    assert tl["gpus_inference"].to_list() == pytest.approx([1.0] * 3)
    assert tl["gpus_idle"].to_list() == pytest.approx([2.0] * 3)
    assert tl["gpus_unmanaged"].to_list() == pytest.approx([2.0] * 3)
    assert tl["gpus_unknown"].to_list() == pytest.approx([2.0] * 3)
    # a stricter map: GPU 2 (3% busy) is somebody's
    strict = pool_timeline(store, TimelineConfig(step_s=60), WorkloadMap(idle_activity_pct=1.0))
    assert strict["gpus_idle"].to_list() == pytest.approx([1.0] * 3)
    assert strict["gpus_unmanaged"].to_list() == pytest.approx([3.0] * 3)
    rules = class_rules(store)
    assert rules.select("job", "gpus", "kubernetes_mode", "ksm_nodes").rows() == [
        ("dcgm-exporter", 5, True, 0), ("gpu-bare-metal", 2, False, 0)]
    assert "activity" in rules["rule"][0] and "unknown" in rules["rule"][1]


def test_servicemonitor_without_honor_labels_exporter_pod_is_no_holder(store):
    """Behind a ServiceMonitor without honorLabels the holder is ``exported_pod`` and ``pod`` is
    dcgm-exporter's own: an idle GPU carries only the exporter's pod, and holds nothing."""
    b = Builder()
    mins = range(1, 3)
    target = {"pod": "nvidia-dcgm-exporter-x7k2p", "namespace": "gpu-operator", "job": "dcgm"}
    held = {**gpu_labels("n1", 0), **target, "exported_pod": "nightly-finetune-worker-0",
            "exported_namespace": "ml-training", "exported_container": "trainer"}
    dcgm(b, held, mins, util=95, fb_mib=70000)
    dcgm(b, {**gpu_labels("n1", 1), **target}, mins, util=0, fb_mib=0)
    b.load(store)
    tl = pool_timeline(store, TimelineConfig(step_s=60))
    assert tl["gpus_batch"].to_list() == pytest.approx([1.0, 1.0])
    assert tl["gpus_idle"].to_list() == pytest.approx([1.0, 1.0])
    assert tl["gpus_other"].to_list() == pytest.approx([0.0, 0.0])
    h = holdings(store, TimelineConfig(step_s=60))
    assert "nvidia-dcgm-exporter" not in set(h["workload"].drop_nulls())


def test_holdings_by_team_and_workload_time_sliced_shares(store):
    b = Builder()
    mixed_node(b, range(1, 4))
    b.load(store)
    h = holdings(store, TimelineConfig(step_s=60))
    at1 = h.filter(pl.col("ts").dt.epoch("ms") == MIN)
    dev = at1.filter(pl.col("workload") == "dev-notebook")
    assert dev["gpus"].sum() == pytest.approx(1.0) and dev["team"].to_list() == ["dev"]
    train = at1.filter(pl.col("workload") == "train-llm")
    assert train["gpus"].to_list() == pytest.approx([3 / 7]) and train["cls"].to_list() == ["batch"]
    assert set(at1["cls"]) == {"inference", "batch", "other", "unmanaged", "idle"}


def test_kube_state_metrics_make_unrequested_unlabelled_devices_idle(store):
    b = Builder()
    h = "gpu-node-00"
    mins = range(1, 4)
    dcgm(b, gpu_labels(h, 0, "chat-vllm-7d9c8b6f5-x2k4q", "inference"), mins)
    dcgm(b, gpu_labels(h, 1), mins)
    dcgm(b, gpu_labels(h, 2), mins)
    dcgm(b, gpu_labels(h, 3), mins)
    pts = [(m * MIN, 1.0) for m in mins]
    b.add("kube_node_status_allocatable", {"node": h, "resource": "nvidia_com_gpu", "unit": "integer"},
          [(t, 4.0) for t, _ in pts])
    # running pods request 2 GPUs (one of them's device is unlabelled: a pod label gap)
    for pod in ("chat-vllm-7d9c8b6f5-x2k4q", "train-a-0"):
        b.add("kube_pod_container_resource_requests", {"namespace": "x", "pod": pod, "container": "c", "node": h,
                                                       "resource": "nvidia_com_gpu", "unit": "integer"}, pts)
    # a pod requesting one more GPU is Pending at minute 3 only; before that its phase is unknown
    b.add("kube_pod_container_resource_requests", {"namespace": "x", "pod": "train-b-0", "node": h,
                                                   "container": "c", "resource": "nvidia_com_gpu",
                                                   "unit": "integer"}, pts)
    b.add("kube_pod_status_phase", {"namespace": "x", "pod": "train-b-0", "phase": "Pending"},
          [(MIN, 0.0), (2 * MIN, 0.0), (3 * MIN, 1.0)])
    b.load(store)
    tl = pool_timeline(store, TimelineConfig(step_s=60))
    # minutes 1-2: 4 allocatable - 3 requested = 1 idle of the 3 unlabelled; minute 3: train-b pending -> 2 idle
    assert tl["gpus_idle"].to_list() == pytest.approx([1.0, 1.0, 2.0])
    assert tl["gpus_unknown"].to_list() == pytest.approx([2.0, 2.0, 1.0])
    assert tl["pending_pods"].to_list() == [0, 0, 1]


def test_pools_from_hostname_rules_and_gpu_counted_once_on_holder_change(store):
    b = Builder()
    mins = range(1, 3)
    dcgm(b, gpu_labels("serve-node-1", 0, "chat-vllm-7d9c8b6f5-x2k4q", "inference"), mins)
    dcgm(b, gpu_labels("gpu-node-01", 0, "train-a-0", "ml"), mins)
    # holder changes inside minute 2 on gpu-node-01/1: old pod at 61 s, new at 100 s
    b.add("DCGM_FI_DEV_GPU_UTIL", gpu_labels("gpu-node-01", 1, "train-a-1", "ml"), [(MIN, 1.0), (MIN + 1000, 1.0)])
    b.add("DCGM_FI_DEV_GPU_UTIL", gpu_labels("gpu-node-01", 1, "chat-vllm-7d9c8b6f5-b2k4q", "inference"),
          [(MIN + 40_000, 1.0), (2 * MIN, 1.0)])
    b.load(store)
    wmap = WorkloadMap(rules=[Rule("serving nodes", {"hostname": "serve-node-.*"}, pool="serving")])
    tl = pool_timeline(store, TimelineConfig(step_s=60), wmap)
    got = {(r["pool"], r["ts"].minute): (r["gpus_total"], r["gpus_inference"], r["gpus_batch"])
           for r in tl.iter_rows(named=True)}
    assert got[("serving", 1)] == (1.0, 1.0, 0.0)
    assert got[("default", 1)] == (2.0, 0.0, 2.0)
    assert got[("default", 2)] == (2.0, 1.0, 1.0)  # the later holder only, never both


def test_empty_store_gives_empty_frame_with_columns(store):
    tl = pool_timeline(store)
    assert tl.height == 0
    for c in ("ts", "pool", "gpus_total", *(f"gpus_{c}" for c in CLASS_COLUMNS)):
        assert c in tl.columns


def test_unused_time_sliced_gpu_is_idle_in_shared_replicas(store):
    b = Builder()
    h = "gpu-node-00"
    for k in range(2):  # two notebooks share GPU 0 in minutes 1-2; nobody in minute 3
        dcgm(b, gpu_labels(h, 0, f"dev-notebook-{k}", "dev"), range(1, 3))
    dcgm(b, gpu_labels(h, 0), range(3, 4))
    dcgm(b, gpu_labels(h, 1), range(1, 4))  # a whole GPU nobody holds
    b.add("kube_node_status_allocatable", {"node": h, "resource": "nvidia_com_gpu_shared", "unit": "integer"},
          [(m * MIN, 4.0) for m in range(1, 4)])
    b.add("kube_node_status_allocatable", {"node": h, "resource": "nvidia_com_gpu", "unit": "integer"},
          [(m * MIN, 1.0) for m in range(1, 4)])
    for k in range(2):
        b.add("kube_pod_container_resource_requests", {"namespace": "dev", "pod": f"dev-notebook-{k}", "node": h,
                                                       "container": "c", "resource": "nvidia_com_gpu_shared",
                                                       "unit": "integer"}, [(m * MIN, 1.0) for m in range(1, 3)])
    b.load(store)
    tl = pool_timeline(store, TimelineConfig(step_s=60))
    assert tl["gpus_other"].to_list() == pytest.approx([1.0, 1.0, 0.0])
    assert tl["gpus_idle"].to_list() == pytest.approx([1.0, 1.0, 2.0])  # the whole GPU, then also the shared one
    assert tl["gpus_unknown"].to_list() == pytest.approx([0.0, 0.0, 0.0])


@pytest.mark.parametrize("k8s,ksm,nodes", [(True, 0, 4), (True, 2, 4), (True, 4, 4), (False, 0, 4),
                                           (False, 2, 4), (False, 4, 4)])
def test_the_unlabelled_gpu_rule_says_one_thing_long_and_short(k8s, ksm, nodes) -> None:
    """The Overview's caption and `tidelens classify` word the same rule (they disagreed where
    kube-state-metrics covers only some nodes): the same classes, kube-state-metrics named in
    both or neither, activity and memory in both or neither."""
    from analytics.timeline.pool import unlabelled_gpu_rule

    long, short = unlabelled_gpu_rule(k8s, ksm, nodes)
    words = ("idle", "unknown", "unmanaged", "kube-state-metrics requests", "activity and memory")
    assert [w in long for w in words] == [w in short for w in words], (long, short)


def test_a_gpu_is_its_host_and_index_as_a_pair_never_one_joined_text(tmp_path):
    """Issue 50 (the timeline's own key): host ``a/b`` GPU ``c`` and host ``a`` GPU ``b/c`` were both
    ``a/b/c``, one GPU of twelve pods; a UUID ``n/0`` (a mapping's ``[device]`` writes such) was
    host ``n`` GPU ``0``. Through a DuckDB file, a mapped table's load and the Builder's: four GPUs,
    none shared by more pods than time-slicing gives, in the pool timeline, the classing rules,
    the load's note and ``tidelens signals``' shared keys."""
    t0 = 1_767_571_200
    rows = [f"{t0 + 60 * m},10.1.0.{i},{10 + i},{'a/b' if i < 6 else 'a'},{'c' if i < 6 else 'b/c'}"
            for m in range(1, 4) for i in range(12)]
    table = ("timestamp,ip,duty,node,gpu_index\n" + "\n".join(rows) + "\n").encode()
    mapping = tmp_path / "duty.columns.toml"
    mapping.write_text('[time]\ncolumn = "timestamp"\n[values]\ncolumns = ["duty"]\n[metric]\nname = "duty"\n'
                       '[labels]\nip = "pod"\nnode = "Hostname"\ngpu_index = "gpu"\n'
                       '[signals.duty]\nmetric = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"\nscale = 0.01\n')
    with Store(tmp_path / "keys.duckdb") as store:
        loaded = ingest_bytes(store, "duty.csv", table, columns=load_mapping(mapping))
        assert loaded.status == "loaded" and "share one GPU key" not in (loaded.note or ""), loaded.note
        b = Builder()
        for lab in ({"UUID": "n/0"}, {"Hostname": "n", "gpu": "0"}):
            b.add("DCGM_FI_PROF_GR_ENGINE_ACTIVE", lab, [(t0 * 1000 + m * MIN, 0.5) for m in range(1, 4)])
        b.load(store)
        tl = pool_timeline(store, TimelineConfig(step_s=60))
        assert tl["gpus_total"].to_list() == [4.0] * 3, tl
        assert class_rules(store)["gpus"].sum() == 4
        assert shared_gpu_keys(store).height == 0
