"""An export of a GPU pool written independently of Tidelens' own simulator.

Tidelens was tested against ``analytics/sample`` and then failed on an export written by someone
else, because of two ordinary facts of real clusters: the HPA is not named after its Deployment,
and dcgm-exporter in Kubernetes mode labels only GPUs allocated to a pod (an idle GPU's series
carry no pod labels, and an export may hold no kube-state-metrics pod/node series to say it is
free). This module writes such exports from the exporters' documented output, with its own small
model of the pool. It imports nothing from ``analytics`` (numpy and the standard library only),
so an analysis cannot pass by agreeing with its own generator.

    write_story(out_dir, case="both", days=4, seed=1) -> truth (also written as truth.json)
    python tests/independent_export.py OUT --case both [--days 4] [--seed 1]   # prints the events

Output: one Prometheus HTTP API ``query_range`` response per metric name, exactly as
``curl 'http://prom:9090/api/v1/query_range?query=<metric>&start=..&end=..&step=60'`` saves it
(``{"status":"success","data":{"resultType":"matrix","result":[...]}}``; timestamps are JSON
numbers in unix seconds, integral like Prometheus writes them at an aligned step; values are
strings). Files are named after the metric, ``:`` replaced by ``_``.

The story
---------
One pool of 16 H100 80GB GPUs on two nodes, ``node-a`` (GPUs 0-7) and ``node-b`` (8-15), scraped
every minute; the run starts on Monday 2025-03-03 00:00 UTC. Minute ``m`` is the interval
``[start + 60 m, start + 60 (m + 1))``; the scrape at ``t = start + 60 k`` reports minute ``k - 1``
(a step's timestamp is its END), and the first scrape (``k = 0``) reports the initial state.

* Inference: Deployment ``chat-api-vllm`` (namespace ``llm``), pods
  ``chat-api-vllm-6f7c9d8b4-<5 chars>``, 1 GPU each, HPA min 2 / max 10. The HPA's desired
  replicas for minute ``m`` are ``ceil(arrivals in minute m-1 / 60 / 2.0 req/s)``, clipped to
  [2, 10]; scale-down is stabilised over 10 minutes (the maximum recommendation of the last 10).
  A new pod waits (Pending) for a free GPU, then warms up 6 minutes holding its GPU (labelled
  with the pod in dcgm, low activity, memory rising) and serves from the 7th minute. Scale-down
  deletes Pending pods first, then warming ones, then the newest serving ones.
* Traffic (weekday): night trough 15% of the day level (28 req/s), a slow rise 05:00-09:00 to
  40%, the morning ramp 09:00-09:30 to 100%, a small lunchtime bump, a decline 17:00-23:00 back
  to 15%. Weekends (only for ``days > 5``) run at half with a gentle 08:00-12:00 rise. Each day's
  level varies by ~3%, a slow AR(1) factor by ~3%, and each minute's count is Poisson-like
  (normal approximation). Two genuine surges, x2.5 for 40-50 min starting 14:00-16:00, on two
  weekday afternoons (no batch job runs in the afternoon).
* Batch: PyTorchJob ``nightly-sft`` (namespace ``ml-train``), 5 pods
  ``nightly-sft-worker-<i>`` of 2 GPUs each (10 GPUs, both of a pod on one node), submitted at
  02:00 UTC every weekday night and gang-scheduled on free GPUs; it leaves whatever else free
  (3 GPUs, inference holding 3 at night) and runs until 10:30-11:30 (drawn per day). On one
  weekday other than the first (the control morning, drawn by the seed; none when the run has a
  single weekday) there is no fine-tune. While it runs,
  inference can get at most 16 - 10 = 6 replicas (24 req/s of capacity) while the day's traffic
  asks for 10 (28 req/s); the ramp therefore overloads the service until the job ends and the
  freed GPUs have warmed up.
* Latency, per minute, with ``R`` serving replicas of 16 slots each, a slot held 4 s per
  request (capacity ``4 R`` req/s): a fluid backlog ``B`` carried across minutes while arrivals
  exceed capacity (a request arriving at time ``s`` in the minute waits ``B(s) / capacity``),
  capped by client patience (20 s of backlog; arrivals beyond it abandon and are exported only
  as ``finished_reason="abort"``), plus an M/M/c waiting time (Erlang C with ``c = 16 R``,
  ``mu = 0.25/s``; waiting ones wait Exp(c mu - lambda), with the load capped at 0.97) and a
  log-normal prefill (median 70 ms x (1 + 1.2 occupancy^2), sigma 0.3). TTFT = wait + prefill.
  Requests are spread round-robin over the serving pods and counted in the minute they arrive.

What is exported (all cases)
----------------------------
* vLLM, per serving pod: ``vllm:time_to_first_token_seconds_bucket{le}`` (vLLM's buckets,
  ``+Inf`` included), ``_count``, ``_sum``, ``vllm:request_success_total{finished_reason="stop"}``
  and ``{finished_reason="abort"}``, gauges ``vllm:num_requests_running`` / ``_waiting``. Labels
  ``model_name``, ``engine``, and the scrape's ``namespace``, ``pod``, ``container``, ``instance``,
  ``job``. A pod's series start when it starts serving, at 0 (its first sample is at the start of
  its first serving minute); pods already serving at the start carry large running totals; a
  deleted pod's series simply stop. No ``vllm:e2e_request_latency_seconds`` is written.
* dcgm-exporter (``job="gpu-metrics"``), per GPU: ``DCGM_FI_DEV_GPU_UTIL`` (%),
  ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (0-1), ``DCGM_FI_DEV_FB_USED`` (MiB), labels ``gpu`` (index on
  the node), ``UUID``, ``pci_bus_id``, ``device``, ``modelName``, ``Hostname``,
  ``DCGM_FI_DRIVER_VERSION``, ``instance``, ``job``, and ``pod``, ``namespace``, ``container``
  only while a pod holds the GPU: a holder change ends one series and starts another. An idle
  GPU's series has no pod labels and reads 0% / 0.0 / 0 MiB.
* kube-state-metrics (``job="kube-state-metrics"``): always
  ``kube_horizontalpodautoscaler_status_desired_replicas`` / ``_current_replicas`` (current = pods
  of the Deployment, Pending included), ``kube_horizontalpodautoscaler_spec_min_replicas`` /
  ``_max_replicas``, ``kube_deployment_spec_replicas``, ``kube_deployment_status_replicas``,
  ``kube_deployment_status_replicas_ready`` and ``_available`` (= serving pods).

Cases
-----
* ``hpa-renamed``: HPA ``chat-api`` (a name prefix of the Deployment ``chat-api-vllm``), plus the
  KSM pod/node series: ``kube_node_status_allocatable{node,resource="nvidia_com_gpu",unit}``,
  ``kube_pod_container_resource_requests{namespace,pod,uid,container,node,resource,unit}`` for
  every GPU pod bound to a node (warming, serving, batch; Pending pods have none here),
  ``kube_pod_status_phase{phase}`` (all five phases, 0/1, Pending pods included) for every GPU
  pod, and ``kube_pod_info{node,created_by_kind,created_by_name,priority_class,...}`` for every GPU
  pod bound to a node. No ``kube_horizontalpodautoscaler_info``.
* ``hpa-info``: HPA ``frontend-autoscaler``, linked only by ``kube_horizontalpodautoscaler_info
  {scaletargetref_api_version="apps/v1",scaletargetref_kind="Deployment",
  scaletargetref_name="chat-api-vllm"}``; KSM pod/node series as above.
* ``idle-unlabelled``: HPA named exactly ``chat-api-vllm``; NO KSM pod or node series at all: idle
  GPUs are unlabelled dcgm series only.
* ``both``: HPA ``chat-api`` (prefix) AND no KSM pod/node series (the issue's original export).

The story itself (traffic, pods, GPUs, latency, events) is the same in every case for a seed;
only the names and the kube-state-metrics series differ.

Ground truth (``truth.json``)
-----------------------------
* Per minute, ``over = served > 0 and count(TTFT <= 1.0 s) < 0.99 * served``, computed from
  exactly the requests exported into the buckets. This is ``histogram_quantile(0.99, ...) > 1``
  on the summed bucket increases (1 s is a bucket bound), so a p99 check at 1 s is exact.
* Events: runs of over-SLO minutes, runs separated by fewer than 10 not-over minutes merged, kept
  when the merged span is at least 5 minutes. ``start`` = ISO UTC timestamp of the first
  over-SLO step (the END of that minute, inclusive); ``end`` = the last over-SLO step's timestamp
  plus 60 s (exclusive). ``interval`` is the time those steps cover, from the first over step's
  start (its timestamp - 60 s) to the last one's end: the same event one step earlier, for readers
  that report an event by the time it covers. ``p99_max_ms`` is the largest exact per-minute p99
  (nearest-rank) in it.
* Cause, by counterfactual re-runs with the same random draws (same per-minute noise, same
  per-request draws, same names): A = no fine-tune, B = no surges, AB = neither. A counterfactual
  *removes* the event when fewer than half of the event's minutes are over the SLO in it.
  ``batch_contention``: removed by A, not by B. ``traffic_surge``: removed by B, not by A.
  ``mixed``: removed by both A and B, or by neither alone but by AB. Otherwise (it survives
  AB): ``scaling_lag`` when, in AB, ready replicas were below desired in some of its minutes,
  else ``unexplained``. The shares over the SLO under each counterfactual are kept in the event.
* ``misattributable_by_dashboard``: a ``batch_contention`` event starting 09:00-11:00 UTC on a
  weekday (a dashboard sees latency rise with the morning ramp and blames users).
* ``pool_at_0930``: per day, GPUs held by inference (serving / warming), batch and idle at the
  09:30 step, with the HPA's desired and the ready replicas; ``stray_over_minutes``: over-SLO
  minutes outside every event (0 for the default story).

What a reader must know
-----------------------
* ``truth.json`` sits beside the exports and is not a Prometheus response: load the files listed
  in ``truth["files"]``, not the whole folder (a folder load reports truth.json as failed).
* vLLM counters start at 0 only for pods that start inside the run; the initial pods carry large
  totals from before it. Requests are counted in the minute they arrive (TTFT and success alike);
  abandoned requests appear only as ``finished_reason="abort"``, so traffic = stop + abort.
* dcgm ``gpu`` is the index on its node (two ``gpu="0"`` exist: tell GPUs apart by ``UUID``); a
  holder change is a new series for the same UUID, at most one series per UUID and scrape.
* Kubernetes mode is a property of the exporter (``job``), not of each instance: node-b's
  exporter writes no pod label at all from Monday 00:00 to 02:00 (all its GPUs are idle), yet its
  unlabelled GPUs are idle, not unknown.
* Batch pods hold 2 GPUs each (count GPUs, not pods), and the same pod names
  ``nightly-sft-worker-0..4`` come back every night.
* A morning event's TTFT sits at the patience cap (~20 s, bucket 20-40 s), so an interpolated
  p99 reads up to ~40 s there; the truth's ``p99_max_ms`` is the exact value.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import sys
from pathlib import Path

import numpy as np

# --- the story's constants ----------------------------------------------------------------
START = dt.datetime(2025, 3, 3, tzinfo=dt.timezone.utc)  # a Monday
STEP_S = 60
NODES = ("node-a", "node-b")
GPUS_PER_NODE = 8
N_GPUS = len(NODES) * GPUS_PER_NODE
GPU_MODEL = "NVIDIA H100 80GB HBM3"
DRIVER = "550.90.07"
PCI_BUS = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")  # an HGX H100 board's bus ids
DCGM_INSTANCE = {"node-a": "10.42.1.7:9400", "node-b": "10.42.2.7:9400"}
KSM_INSTANCE = "10.42.0.12:8080"

SERVICE = "chat-api-vllm"
NAMESPACE = "llm"
RS_HASH = "6f7c9d8b4"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
MIN_REPLICAS, MAX_REPLICAS = 2, 10
HPA_TARGET_RPS = 2.0  # load per replica the HPA aims at (half of a replica's 4 req/s)
STABILISE_MIN = 10
WARMUP_MIN = 6
SLOTS = 16
HOLD_S = 4.0
PATIENCE_S = 20.0
PREFILL_MEDIAN_S = 0.070
PREFILL_SIGMA = 0.3

DAY_RPS = 28.0
TROUGH, PRE_RAMP = 0.15, 0.40
SURGE_FACTOR = 2.5

BATCH_NS, BATCH_JOB = "ml-train", "nightly-sft"
BATCH_PODS, BATCH_GPUS_PER_POD = 5, 2
BATCH_SUBMIT_H = 2.0

SLO_S = 1.0
MIN_EVENT_MIN, MERGE_GAP_MIN = 5, 10

# vLLM's TTFT buckets (seconds); +Inf is added on export
TTFT_BOUNDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
               7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
NB = len(TTFT_BOUNDS) + 1

CASES = {
    "hpa-renamed": {"hpa": "chat-api", "info": False, "ksm_pods": True, "link": "name prefix"},
    "hpa-info": {"hpa": "frontend-autoscaler", "info": True, "ksm_pods": True,
                 "link": "kube_horizontalpodautoscaler_info scaletargetref_name"},
    "idle-unlabelled": {"hpa": "chat-api-vllm", "info": False, "ksm_pods": False, "link": "same name"},
    "both": {"hpa": "chat-api", "info": False, "ksm_pods": False, "link": "name prefix"},
}
_K8S_ALNUM = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet Kubernetes uses for generated names


# --- the plan: traffic, surges, batch windows (shared by all counterfactuals) ---------------
def _smooth(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 0.0, 1.0)
    return 0.5 - 0.5 * np.cos(np.pi * x)


def _weekday_shape(h: np.ndarray) -> np.ndarray:
    y = np.full_like(h, TROUGH)
    y = np.where((h >= 5) & (h < 9), TROUGH + (PRE_RAMP - TROUGH) * _smooth((h - 5) / 4), y)
    y = np.where((h >= 9) & (h < 9.5), PRE_RAMP + (1 - PRE_RAMP) * _smooth((h - 9) / 0.5), y)
    y = np.where((h >= 9.5) & (h < 17), 1.0 + 0.04 * np.exp(-(((h - 12.75) / 0.6) ** 2)), y)
    y = np.where((h >= 17) & (h < 23), TROUGH + (1 - TROUGH) * (1 - _smooth((h - 17) / 6)), y)
    return y


def _weekend_shape(h: np.ndarray) -> np.ndarray:
    y = TROUGH + (1 - TROUGH) * _smooth((h - 8) / 4)
    y = np.where(h >= 17, TROUGH + (1 - TROUGH) * (1 - _smooth((h - 17) / 6)), y)
    return 0.5 * y


def _iso(minute_boundary: int) -> str:
    """ISO UTC of the time ``start + 60 * minute_boundary``."""
    return (START + dt.timedelta(minutes=int(minute_boundary))).strftime("%Y-%m-%dT%H:%M:%SZ")


def _plan(days: int, seed: int) -> dict:
    ss = np.random.SeedSequence([seed, 20250303])
    r_plan, r_noise, r_draw, r_names = (np.random.default_rng(s) for s in ss.spawn(4))
    n_min = days * 1440
    minute = np.arange(n_min)
    day = minute // 1440
    h = (minute % 1440 + 0.5) / 60.0
    weekday = (day % 7) < 5
    shape = np.where(weekday, _weekday_shape(h), _weekend_shape(h))
    level = DAY_RPS * (1 + 0.03 * r_plan.standard_normal(days))[day]

    weekdays = [d for d in range(days) if d % 7 < 5]
    control = int(r_plan.choice(weekdays[1:])) if len(weekdays) > 1 else None
    batch = []
    for d in weekdays:
        end_min = int(r_plan.integers(10 * 60 + 30, 11 * 60 + 31))
        if d == control:
            continue
        batch.append({"day": d, "submit": d * 1440 + int(BATCH_SUBMIT_H * 60), "end": d * 1440 + end_min})
    surge_days = sorted(int(x) for x in r_plan.choice(weekdays, size=min(2, len(weekdays)), replace=False))
    surge_mult = np.ones(n_min)
    surges = []
    for d in surge_days:
        s0 = d * 1440 + int(r_plan.integers(14 * 60, 16 * 60))
        dur = int(r_plan.integers(40, 51))
        t = minute - s0
        edge = np.clip(np.minimum((t + 1) / 3.0, (dur - t) / 3.0), 0.0, 1.0)
        surge_mult += (SURGE_FACTOR - 1) * edge
        surges.append({"start": _iso(s0), "end": _iso(s0 + dur), "factor": SURGE_FACTOR, "day": d})

    # slow multiplicative AR(1) noise (~3%, ~20 min memory) and per-minute Poisson-like noise
    eps = r_noise.standard_normal(n_min)
    ar = np.empty(n_min)
    a, sd = math.exp(-1 / 20), 0.03
    x = 0.0
    for i in range(n_min):
        x = a * x + sd * math.sqrt(1 - a * a) * eps[i]
        ar[i] = x
    z = r_noise.standard_normal(n_min)
    base = level * shape * (1 + ar)
    return {"days": days, "seed": seed, "n_min": n_min, "base": base, "surge_mult": surge_mult,
            "z": z, "batch": batch, "surges": surges, "control_day": control,
            "r_draw": r_draw, "r_names": r_names}


def _counts(plan: dict, surges: bool) -> np.ndarray:
    lam = plan["base"] * (plan["surge_mult"] if surges else 1.0) * 60.0
    return np.maximum(0, np.rint(lam + np.sqrt(lam) * plan["z"])).astype(np.int64)


# --- the pool: HPA, pods, GPUs ----------------------------------------------------------------
class _Pod:
    __slots__ = ("pid", "kind", "gpus", "created", "scheduled", "ready", "deleted", "worker")

    def __init__(self, pid: int, kind: str, created: int, worker: int = -1) -> None:
        self.pid, self.kind, self.created, self.worker = pid, kind, created, worker
        self.gpus: list[int] = []
        self.scheduled = self.ready = self.deleted = None


def _simulate_pool(plan: dict, n: np.ndarray, with_batch: bool) -> dict:
    n_min = plan["n_min"]
    pods: list[_Pod] = []
    free = [True] * N_GPUS
    holder = np.full((n_min, N_GPUS), -1, dtype=np.int32)
    serving_tab = np.full((n_min, MAX_REPLICAS), -1, dtype=np.int32)
    desired = np.zeros(n_min, dtype=np.int64)
    current = np.zeros(n_min, dtype=np.int64)
    ready_n = np.zeros(n_min, dtype=np.int64)
    warming_n = np.zeros(n_min, dtype=np.int64)
    pending_n = np.zeros(n_min, dtype=np.int64)
    batch_gpus = np.zeros(n_min, dtype=np.int64)
    submits = {b["submit"]: b for b in plan["batch"]} if with_batch else {}
    ends = {b["end"]: b for b in plan["batch"]} if with_batch else {}
    batch_waiting = None
    batch_running: list[_Pod] = []
    batch_log = []

    def take_gpu(pod: _Pod, m: int) -> bool:
        for g in range(N_GPUS):
            if free[g]:
                free[g] = False
                pod.gpus = [g]
                pod.scheduled, pod.ready = m, m + WARMUP_MIN
                return True
        return False

    def place_batch(m: int) -> list[_Pod] | None:
        """Gang-schedule the job: each worker needs 2 free GPUs on one node, all or nothing."""
        trial = free[:]
        plan_gpus = []
        for _ in range(BATCH_PODS):
            for node in range(len(NODES)):
                idx = [g for g in range(node * GPUS_PER_NODE, (node + 1) * GPUS_PER_NODE) if trial[g]]
                if len(idx) >= BATCH_GPUS_PER_POD:
                    got = idx[:BATCH_GPUS_PER_POD]
                    for g in got:
                        trial[g] = False
                    plan_gpus.append(got)
                    break
            else:
                return None
        workers = []
        for i, got in enumerate(plan_gpus):
            p = _Pod(len(pods), "batch", m, worker=i)
            p.gpus, p.scheduled, p.ready = got, m, m
            for g in got:
                free[g] = False
            pods.append(p)
            workers.append(p)
        return workers

    # initial state: the night's replicas, serving since before the run
    n0 = int(np.clip(math.ceil(n[0] / 60 / HPA_TARGET_RPS), MIN_REPLICAS, MAX_REPLICAS))
    inf: list[_Pod] = []
    for _ in range(n0):
        p = _Pod(len(pods), "inference", -10_000)
        take_gpu(p, -10_000)
        p.ready = -10_000
        pods.append(p)
        inf.append(p)
    recs: list[int] = []

    for m in range(n_min):
        # batch lifecycle at the minute boundary
        if m in ends and batch_running:
            for p in batch_running:
                p.deleted = m
                for g in p.gpus:
                    free[g] = True
            batch_log[-1]["end_minute"] = m
            batch_running = []
        if m in submits:
            batch_waiting = submits[m]
        # HPA on the last minute's traffic
        rec = min(max(math.ceil(int(n[m - 1] if m else n[0]) / 60 / HPA_TARGET_RPS), MIN_REPLICAS),
                  MAX_REPLICAS)
        recs.append(rec)
        want = max(recs[-STABILISE_MIN:])
        desired[m] = want
        # ReplicaSet reconcile
        if len(inf) < want:
            for _ in range(want - len(inf)):
                p = _Pod(len(pods), "inference", m)
                pods.append(p)
                inf.append(p)
        elif len(inf) > want:
            extra = len(inf) - want
            order = sorted(inf, key=lambda p: (p.scheduled is not None,
                                               p.ready is not None and p.ready <= m,
                                               -(p.created)))
            for p in order[:extra]:
                p.deleted = m
                for g in p.gpus:
                    free[g] = True
                inf.remove(p)
        # scheduling: the gang job first (it was submitted at a quiet hour), then pending replicas
        if batch_waiting is not None:
            workers = place_batch(m)
            if workers is not None:
                batch_running = workers
                batch_log.append({"day": batch_waiting["day"], "submit_minute": batch_waiting["submit"],
                                  "start_minute": m, "end_minute": None,
                                  "pods": [p.pid for p in workers]})
                batch_waiting = None
        for p in inf:
            if p.scheduled is None:
                take_gpu(p, m)
        # bookkeeping for minute m
        serving = [p for p in inf if p.ready is not None and p.ready <= m]
        serving.sort(key=lambda p: (p.ready, p.pid))
        for i, p in enumerate(serving):
            serving_tab[m, i] = p.pid
        ready_n[m] = len(serving)
        warming_n[m] = sum(1 for p in inf if p.scheduled is not None and p.ready > m)
        pending_n[m] = sum(1 for p in inf if p.scheduled is None)
        current[m] = len(inf)
        for p in inf:
            if p.scheduled is not None:
                holder[m, p.gpus[0]] = p.pid
        for p in batch_running:
            for g in p.gpus:
                holder[m, g] = p.pid
        batch_gpus[m] = BATCH_GPUS_PER_POD * len(batch_running)
    return {"pods": pods, "holder": holder, "serving_tab": serving_tab, "R": ready_n,
            "desired": desired, "current": current, "warming": warming_n, "pending": pending_n,
            "batch_gpus": batch_gpus, "batch_log": batch_log}


# --- latency: fluid backlog + M/M/c + prefill -------------------------------------------------
def _erlang_c(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Erlang C waiting probability for c servers and offered load a (< c), vectorised."""
    b = np.ones_like(a)
    for k in range(1, int(c.max(initial=0)) + 1):
        nb = a * b / (k + a * b)
        b = np.where(k <= c, nb, b)
    rho = np.where(c > 0, a / np.maximum(c, 1), 0.0)
    return np.where(c > 0, b / (1 - rho * (1 - b)), 1.0)


def _minute_state(n: np.ndarray, R: np.ndarray) -> dict:
    cap = R * SLOTS / HOLD_S  # req/s
    lam = n / 60.0
    bmax = PATIENCE_S * cap
    b0 = np.zeros(len(n))
    b_end = np.zeros(len(n))
    aband = np.zeros(len(n))
    b = 0.0
    for m in range(len(n)):
        b0[m] = b
        raw = b + n[m] - 60.0 * cap[m]
        over = raw - bmax[m]
        aband[m] = over if over > 0 else 0.0
        b = min(max(raw, 0.0), bmax[m])
        b_end[m] = b
    rho = np.where(cap > 0, lam / np.maximum(cap, 1e-9), 1.0)
    rho_eff = np.minimum(rho, 0.97)
    c = (R * SLOTS).astype(np.int64)
    pw = _erlang_c(c, rho_eff * c)
    return {"cap": cap, "lam": lam, "bmax": bmax, "b0": b0, "b_end": b_end, "aband": aband,
            "rho": rho, "rho_eff": rho_eff, "pw": pw}


def _requests(st: dict, n: np.ndarray, minutes: np.ndarray, offsets: np.ndarray,
              U: np.ndarray, Z: np.ndarray) -> dict:
    """Per-request TTFT for the given minutes (same draws in every run: block ``offsets[m]``).

    Request ``j`` of minute ``m`` arrives at ``s = 60 (j + 0.5) / n`` seconds into the minute.
    """
    cnt = n[minutes]
    total = int(cnt.sum())
    pos = np.repeat(np.arange(len(minutes), dtype=np.int32), cnt)  # index into per-minute arrays
    first = np.cumsum(cnt) - cnt
    j = np.arange(total, dtype=np.int64)
    j -= first[pos]
    contiguous = len(minutes) == len(n) and np.array_equal(offsets, first)
    if contiguous:  # the run that sets the draw layout: its requests are the draws in order
        u, zz = U[:total], Z[:total]
    else:
        idx = offsets[minutes][pos] + j
        u, zz = U[idx], Z[idx]
    cap = st["cap"][minutes]
    ok = cap > 0
    safe = np.where(ok, cap, 1.0)
    lam = st["lam"][minutes]
    # the fluid backlog, in seconds of waiting: B(s)/cap = B0/cap + (lam/cap - 1) s, in [0, patience]
    w0 = st["b0"][minutes] / safe
    slope = np.where(ok, lam / safe - 1.0, 0.0) * 60.0 / np.maximum(cnt, 1)
    fluid = slope[pos]
    fluid *= j + 0.5
    fluid += w0[pos]
    np.clip(fluid, 0.0, PATIENCE_S, out=fluid)
    pw = st["pw"][minutes]
    inv_rate = 1.0 / (safe * (1 - st["rho_eff"][minutes]))
    with np.errstate(divide="ignore"):
        wq = np.log(pw[pos] / np.maximum(u, 1e-300))
    np.maximum(wq, 0.0, out=wq)  # a wait only when u < P(wait); then -log(u/P) ~ Exp(1)
    wq *= inv_rate[pos]
    wq += fluid
    ttft = np.minimum(wq, PATIENCE_S, out=wq)
    occ = np.minimum(st["rho"][minutes], 1.0)
    pre = np.exp(PREFILL_SIGMA * zz)
    pre *= (PREFILL_MEDIAN_S * (1 + 1.2 * occ ** 2))[pos]
    ttft += pre
    # abandonment: arrivals while the backlog is at the patience cap, evenly spread over them
    served = np.ones(total, dtype=bool)
    atcap = np.flatnonzero((fluid >= PATIENCE_S - 1e-9) & ok[pos])
    if len(atcap):
        pa = pos[atcap]
        K = np.bincount(pa, minlength=len(minutes))
        A = np.minimum(st["aband"][minutes], K)
        ratio = np.where(K > 0, A / np.maximum(K, 1), 0.0)[pa]
        k = np.arange(len(atcap)) - (np.cumsum(K) - K)[pa]  # rank among the minute's at-cap arrivals
        drop = np.floor((k + 1) * ratio + 1e-9) > np.floor(k * ratio + 1e-9)
        served[atcap[drop]] = False
    served[~ok[pos]] = False
    return {"minutes": minutes, "pos": pos, "mi": minutes[pos], "j": j, "ttft": ttft, "served": served}


def _minute_stats(req: dict, n_min: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Served requests, those with TTFT <= the SLO, and the exact (nearest-rank) p99 of the
    minutes over the SLO (NaN elsewhere: it is only reported for events)."""
    minutes, pos, served, t = req["minutes"], req["pos"], req["served"], req["ttft"]
    k = len(minutes)
    ns = np.bincount(pos[served], minlength=k)
    nok = np.bincount(pos[served & (t <= SLO_S)], minlength=k)
    n_served = np.zeros(n_min, dtype=np.int64)
    n_ok = np.zeros(n_min, dtype=np.int64)
    n_served[minutes], n_ok[minutes] = ns, nok
    p99 = np.full(n_min, np.nan)
    bad = _over(ns, nok)
    if bad.any():
        sel = served & bad[pos]
        ps, ts = pos[sel], t[sel]
        order = np.lexsort((ts, ps))
        ps, ts = ps[order], ts[order]
        which = np.flatnonzero(bad)
        starts = np.searchsorted(ps, which)
        rank = np.ceil(0.99 * ns[which]).astype(np.int64) - 1
        p99[minutes[which]] = ts[starts + rank]
    return n_served, n_ok, p99


def _over(n_served: np.ndarray, n_ok: np.ndarray) -> np.ndarray:
    return (n_served > 0) & (n_ok < 0.99 * n_served)


def _find_events(over: np.ndarray) -> list[tuple[int, int]]:
    """(first minute, last minute + 1) of merged runs of over-SLO minutes."""
    idx = np.flatnonzero(over)
    if not len(idx):
        return []
    runs = []
    s = p = int(idx[0])
    for i in idx[1:]:
        i = int(i)
        if i - p - 1 < MERGE_GAP_MIN:
            p = i
            continue
        runs.append((s, p + 1))
        s = p = i
    runs.append((s, p + 1))
    return [(a, b) for a, b in runs if b - a >= MIN_EVENT_MIN]


# --- the whole story ----------------------------------------------------------------------------
def _run_story(days: int, seed: int) -> dict:
    plan = _plan(days, seed)
    n_min = plan["n_min"]
    n_s = _counts(plan, True)
    n_ns = _counts(plan, False)
    n_max = np.maximum(n_s, n_ns)
    offsets = np.cumsum(n_max) - n_max
    U = plan["r_draw"].random(int(n_max.sum()))
    Z = plan["r_draw"].standard_normal(int(n_max.sum()))

    scen = {"actual": (n_s, True), "no_batch": (n_s, False), "no_surge": (n_ns, True),
            "neither": (n_ns, False)}
    out = {}
    act = None
    for name, (n, with_batch) in scen.items():
        pool = _simulate_pool(plan, n, with_batch)
        st = _minute_state(n, pool["R"])
        if act is None:
            minutes = np.arange(n_min)
        else:
            same = (n == act["n"]) & (pool["R"] == act["pool"]["R"]) & (st["b0"] == act["st"]["b0"])
            minutes = np.flatnonzero(~same)
        req = _requests(st, n, minutes, offsets, U, Z)
        n_served, n_ok, p99 = _minute_stats(req, n_min)
        if act is not None:  # minutes identical to the actual run are copied from it
            keep = np.ones(n_min, dtype=bool)
            keep[minutes] = False
            n_served[keep], n_ok[keep], p99[keep] = (act["n_served"][keep], act["n_ok"][keep],
                                                     act["p99"][keep])
        res = {"n": n, "pool": pool, "st": st, "n_served": n_served, "n_ok": n_ok, "p99": p99,
               "over": _over(n_served, n_ok)}
        if act is None:
            res["req"] = req
            act = res
        out[name] = res
    return {"plan": plan, "runs": out}


def _cause(a: int, b: int, runs: dict) -> tuple[str, dict]:
    share = {k: float(runs[k]["over"][a:b].mean()) for k in ("no_batch", "no_surge", "neither")}
    gone = {k: v < 0.5 for k, v in share.items()}
    if gone["no_batch"] and not gone["no_surge"]:
        cause = "batch_contention"
    elif gone["no_surge"] and not gone["no_batch"]:
        cause = "traffic_surge"
    elif (gone["no_batch"] and gone["no_surge"]) or gone["neither"]:
        cause = "mixed"
    else:
        p = runs["neither"]["pool"]
        lag = bool(np.any(p["R"][a:b] < p["desired"][a:b]))
        cause = "scaling_lag" if lag else "unexplained"
    return cause, share


def _truth(story: dict, case: str) -> dict:
    plan, runs = story["plan"], story["runs"]
    act = runs["actual"]
    events = []
    covered = np.zeros(plan["n_min"], dtype=bool)
    for a, b in _find_events(act["over"]):
        covered[a:b] = True
        cause, share = _cause(a, b, runs)
        start_step = a + 1  # the step ending minute a
        hour = ((a + 1) % 1440) / 60.0
        weekday = (a // 1440) % 7 < 5
        events.append({
            "service": SERVICE, "start": _iso(start_step), "end": _iso(b + 1), "cause": cause,
            "interval": {"start": _iso(a), "end": _iso(b)},
            "misattributable_by_dashboard": bool(cause == "batch_contention" and weekday and 9 <= hour < 11),
            "minutes": b - a, "minutes_over": int(act["over"][a:b].sum()),
            "p99_max_ms": round(float(np.nanmax(act["p99"][a:b])) * 1000, 1),
            "over_share_without_batch": round(share["no_batch"], 3),
            "over_share_without_surges": round(share["no_surge"], 3),
            "over_share_without_both": round(share["neither"], 3),
        })
    pool = act["pool"]
    pods = pool["pods"]
    batch_jobs = []
    for bl in pool["batch_log"]:
        end = bl["end_minute"] if bl["end_minute"] is not None else plan["n_min"]
        batch_jobs.append({"namespace": BATCH_NS, "job": BATCH_JOB,
                           "pods": [f"{BATCH_JOB}-worker-{pods[p].worker}" for p in bl["pods"]],
                           "gpus": BATCH_PODS * BATCH_GPUS_PER_POD,
                           "submitted": _iso(bl["submit_minute"]), "start": _iso(bl["start_minute"]),
                           "end": _iso(end)})
    at0930 = []
    for d in range(plan["days"]):
        m = d * 1440 + 9 * 60 + 29  # the minute ending at 09:30
        if m >= plan["n_min"]:
            continue
        row = pool["holder"][m]
        kinds = [pods[p].kind if p >= 0 else "idle" for p in row]
        serving = int(pool["R"][m])
        inf_gpus = kinds.count("inference")
        at0930.append({"day": _iso(d * 1440)[:10], "ts": _iso(m + 1),
                       "inference_gpus": inf_gpus, "inference_serving": serving,
                       "inference_warming": inf_gpus - serving, "batch_gpus": kinds.count("batch"),
                       "idle_gpus": kinds.count("idle"), "hpa_desired": int(pool["desired"][m]),
                       "pending_pods": int(pool["pending"][m])})
    cfg = CASES[case]
    return {
        "case": case, "seed": plan["seed"], "days": plan["days"], "start": _iso(0),
        "end": _iso(plan["n_min"]), "step_s": STEP_S, "gpus": N_GPUS,
        "nodes": {n: GPUS_PER_NODE for n in NODES},
        "slos": {SERVICE: {"metric": "vllm:time_to_first_token_seconds", "p99_ms": int(SLO_S * 1000)}},
        "events": events, "batch_jobs": batch_jobs, "surges": [
            {k: v for k, v in s.items() if k != "day"} for s in plan["surges"]],
        "control_morning": None if plan["control_day"] is None else _iso(plan["control_day"] * 1440)[:10],
        "hpa": {"name": cfg["hpa"], "namespace": NAMESPACE, "target": SERVICE,
                "target_kind": "Deployment", "link": cfg["link"],
                "min_replicas": MIN_REPLICAS, "max_replicas": MAX_REPLICAS,
                "target_rps_per_replica": HPA_TARGET_RPS},
        "ksm_pod_series": cfg["ksm_pods"],
        "warmup_min": WARMUP_MIN, "replica_capacity_rps": SLOTS / HOLD_S,
        "pool_at_0930": at0930,
        "stray_over_minutes": int((act["over"] & ~covered).sum()),
        "requests_served": int(act["n_served"].sum()),
        "rule": ("over = count(TTFT<=1s) < 0.99*served per minute; events = over-runs merged across "
                 "gaps < 10 min, kept when >= 5 min; cause by counterfactuals with the same draws: an "
                 "event is removed by a counterfactual when < 50% of its minutes are over there; "
                 "batch_contention = removed without the fine-tune only, traffic_surge = removed "
                 "without the surges only, mixed = removed by both alone or only by removing both"),
    }


# --- export ---------------------------------------------------------------------------------------
def _fmt(v: float) -> str:
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return repr(round(float(v), 6))


def _series_json(labels: dict, ks: np.ndarray, vals) -> str:
    """One matrix element: scrape indices ks -> unix-second timestamps, values as strings."""
    base = int(START.timestamp())
    ts = (base + STEP_S * np.asarray(ks, dtype=np.int64)).tolist()
    vals = np.asarray(vals)
    vs = vals.tolist()
    if vals.dtype.kind in "iub":
        body = ",".join(f'[{t},"{v}"]' for t, v in zip(ts, vs))
    else:
        body = ",".join(f'[{t},"{_fmt(v)}"]' for t, v in zip(ts, vs))
    metric = {"__name__": labels["__name__"], **{k: labels[k] for k in sorted(labels) if k != "__name__"}}
    return '{"metric":' + json.dumps(metric, separators=(",", ":")) + ',"values":[' + body + "]}"


class _Writer:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.files: dict[str, list[str]] = {}

    def add(self, name: str, labels: dict, ks, vals) -> None:
        if len(ks) == 0:
            return
        self.files.setdefault(name, []).append(_series_json({"__name__": name, **labels}, ks, vals))

    def flush(self) -> list[str]:
        names = []
        for name, elems in self.files.items():
            fn = name.replace(":", "_") + ".json"
            text = '{"status":"success","data":{"resultType":"matrix","result":[' + ",".join(elems) + "]}}"
            (self.out / fn).write_text(text)
            names.append(fn)
        return sorted(names)


def _names(plan: dict, pods: list) -> dict:
    """Names, uids and IPs for every pod of the actual run, and the GPUs' identities."""
    rng = plan["r_names"]
    seen = set()
    out = {}
    for p in pods:
        if p.kind == "inference":
            while True:
                suffix = "".join(rng.choice(list(_K8S_ALNUM), 5))
                if suffix not in seen:
                    seen.add(suffix)
                    break
            name = f"{SERVICE}-{RS_HASH}-{suffix}"
        else:
            name = f"{BATCH_JOB}-worker-{p.worker}"
        uid = "-".join(rng.bytes(k).hex() for k in (4, 2, 2, 2, 6))
        node = NODES[p.gpus[0] // GPUS_PER_NODE] if p.gpus else ""
        ip = f"10.42.{NODES.index(node) + 1 if node else 9}.{int(rng.integers(20, 250))}"
        out[p.pid] = {"name": name, "uid": uid, "node": node, "ip": ip}
    gpus = []
    for g in range(N_GPUS):
        node, i = NODES[g // GPUS_PER_NODE], g % GPUS_PER_NODE
        uuid = "GPU-" + "-".join(rng.bytes(k).hex() for k in (4, 2, 2, 2, 6))
        gpus.append({"gpu": str(i), "UUID": uuid, "pci_bus_id": f"00000000:{PCI_BUS[i]}:00.0",
                     "device": f"nvidia{i}", "modelName": GPU_MODEL, "Hostname": node,
                     "DCGM_FI_DRIVER_VERSION": DRIVER, "instance": DCGM_INSTANCE[node],
                     "job": "gpu-metrics"})
    return {"pods": out, "gpus": gpus}


def _segments(arr: np.ndarray) -> list[tuple[int, int, int]]:
    """Runs of equal values: (value, first index, last index + 1)."""
    if not len(arr):
        return []
    cut = np.flatnonzero(np.diff(arr)) + 1
    starts = np.concatenate(([0], cut))
    ends = np.concatenate((cut, [len(arr)]))
    return [(int(arr[s]), int(s), int(e)) for s, e in zip(starts, ends)]


def _export(story: dict, case: str, out: Path) -> list[str]:
    cfg = CASES[case]
    plan, act = story["plan"], story["runs"]["actual"]
    n_min = plan["n_min"]
    pool, st, req = act["pool"], act["st"], act["req"]
    pods = pool["pods"]
    names = _names(plan, pods)
    rng = np.random.default_rng([plan["seed"], 7])  # gauge jitter only
    w = _Writer(out)

    # ---- vLLM, per pod: requests -> (minute, slot) -> pod
    served = req["served"]
    mi, j = req["mi"], req["j"]
    R = pool["R"]
    slot = np.where(R[mi] > 0, j % np.maximum(R[mi], 1), 0)
    b = np.searchsorted(np.asarray(TTFT_BOUNDS), req["ttft"], side="left")
    key_ms = mi * MAX_REPLICAS + slot
    hist = np.bincount((key_ms * NB + b)[served], minlength=n_min * MAX_REPLICAS * NB)
    hist = hist.reshape(n_min, MAX_REPLICAS, NB)
    tsum = np.bincount(key_ms[served], weights=req["ttft"][served], minlength=n_min * MAX_REPLICAS)
    tsum = tsum.reshape(n_min, MAX_REPLICAS)
    abort = np.bincount(key_ms[~served], minlength=n_min * MAX_REPLICAS).reshape(n_min, MAX_REPLICAS)
    tab = pool["serving_tab"]
    bounds_lbl = [_fmt(x) if x != int(x) else f"{x:.1f}" for x in TTFT_BOUNDS] + ["+Inf"]
    lq = np.where(st["rho_eff"] < 1, st["pw"] * st["rho_eff"] / (1 - st["rho_eff"]), 0.0)
    for p in pods:
        if p.kind != "inference" or p.ready is None or p.ready >= n_min:
            continue
        pm = np.argwhere(tab == p.pid)  # (minute, slot) rows, minutes ascending
        if not len(pm):
            continue
        mins, slots = pm[:, 0], pm[:, 1]
        last = (p.deleted if p.deleted is not None else n_min)
        k0 = max(p.ready, 0)
        ks = np.arange(k0, min(last, n_min) + 1)  # scrape k reports minute k-1
        # per-minute increments on this pod, aligned to minutes k0..last-1
        inc = np.zeros((len(ks), NB), dtype=np.int64)
        s_inc = np.zeros(len(ks))
        a_inc = np.zeros(len(ks), dtype=np.int64)
        row = mins - k0 + 1
        inc[row] = hist[mins, slots]
        s_inc[row] = tsum[mins, slots]
        a_inc[row] = abort[mins, slots]
        if p.ready < 0:  # serving since before the run: large running totals
            prior = rng.integers(400_000, 900_000)
            frac = np.array([0, 0, 0, 0.002, 0.09, 0.36, 0.37, 0.09, 0.08, 0.004, 0.002, 0.001,
                             0.001, 0.0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
            inc[0] = np.rint(prior * frac / frac.sum()).astype(np.int64)
            s_inc[0] = inc[0].sum() * 0.072
        cum = np.cumsum(np.cumsum(inc, axis=1), axis=0)  # cumulative over le, then over time
        csum = np.cumsum(s_inc)
        cab = np.cumsum(a_inc)
        nm = names["pods"][p.pid]
        lab = {"namespace": NAMESPACE, "pod": nm["name"], "container": "vllm",
               "instance": f"{nm['ip']}:8000", "job": SERVICE, "model_name": MODEL, "engine": "0"}
        for bi, le in enumerate(bounds_lbl):
            w.add("vllm:time_to_first_token_seconds_bucket", {**lab, "le": le}, ks, cum[:, bi])
        w.add("vllm:time_to_first_token_seconds_count", lab, ks, cum[:, -1])
        w.add("vllm:time_to_first_token_seconds_sum", lab, ks, np.round(csum, 3))
        w.add("vllm:request_success_total", {**lab, "finished_reason": "stop"}, ks, cum[:, -1])
        w.add("vllm:request_success_total", {**lab, "finished_reason": "abort"}, ks, cab)
        # gauges: sampled at the scrape, for the minute just ended (k0: the pod just came up)
        gm = np.clip(ks - 1, 0, n_min - 1)
        r_here = np.maximum(R[gm], 1)
        lam_pod = st["lam"][gm] / r_here
        running = np.minimum(SLOTS, np.rint(lam_pod * HOLD_S * (1 + 0.05 * rng.standard_normal(len(ks)))))
        running = np.where(st["b_end"][gm] > 0, SLOTS, np.maximum(running, 0)).astype(np.int64)
        waiting = np.rint((st["b_end"][gm] + lq[gm] * R[gm]) / r_here).astype(np.int64)
        if p.ready >= 0:
            running[0] = waiting[0] = 0
        w.add("vllm:num_requests_running", lab, ks, running)
        w.add("vllm:num_requests_waiting", lab, ks, waiting)

    # ---- dcgm-exporter, per GPU and holder
    holder = pool["holder"]
    kidx = np.arange(n_min + 1)
    state_min = np.clip(kidx - 1, 0, n_min - 1)  # scrape k reports minute k-1 (k=0: the start)
    occ_min = np.minimum(st["rho"], 1.0)
    for g in range(N_GPUS):
        glab = names["gpus"][g]
        hk = holder[state_min, g]
        for pid, a, e in _segments(hk):
            ks = kidx[a:e]
            mm = state_min[a:e]
            noise = rng.standard_normal(len(ks))
            if pid < 0:
                util = np.zeros(len(ks))
                gr = np.zeros(len(ks))
                fb = np.zeros(len(ks))
                lab = glab
            else:
                p = pods[pid]
                nm = names["pods"][pid]
                if p.kind == "batch":
                    util = np.clip(np.rint(96 + 2 * noise), 88, 100)
                    gr = np.clip(np.round(0.95 + 0.015 * noise, 4), 0.85, 0.999)
                    age = mm - p.scheduled
                    fb = np.rint(np.where(age < 2, 20_000 + 25_000 * age, 71_800 + 300 * noise))
                    lab = {**glab, "pod": nm["name"], "namespace": BATCH_NS, "container": "trainer"}
                else:
                    age = mm - p.scheduled
                    warm = age < WARMUP_MIN
                    o = occ_min[mm]
                    util = np.where(warm, np.clip(np.rint(6 + 3 * noise), 1, 15),
                                    np.clip(np.rint(18 + 75 * o + 3 * noise), 5, 100))
                    gr = np.where(warm, np.clip(np.round(0.04 + 0.02 * noise, 4), 0.005, 0.12),
                                  np.clip(np.round(util / 100 * 0.9, 4), 0.02, 0.99))
                    fb = np.rint(np.where(warm, 600 + (73_400 - 600) * (age + 1) / WARMUP_MIN,
                                          73_400 + 40 * np.abs(noise)))
                    lab = {**glab, "pod": nm["name"], "namespace": NAMESPACE, "container": "vllm"}
            w.add("DCGM_FI_DEV_GPU_UTIL", lab, ks, util.astype(np.int64))
            w.add("DCGM_FI_PROF_GR_ENGINE_ACTIVE", lab, ks, gr.astype(float))
            w.add("DCGM_FI_DEV_FB_USED", lab, ks, fb.astype(np.int64))

    # ---- kube-state-metrics
    ksm = {"instance": KSM_INSTANCE, "job": "kube-state-metrics"}
    hpa = {**ksm, "horizontalpodautoscaler": cfg["hpa"], "namespace": NAMESPACE}
    dep = {**ksm, "deployment": SERVICE, "namespace": NAMESPACE}
    allk = kidx
    w.add("kube_horizontalpodautoscaler_status_desired_replicas", hpa, allk, pool["desired"][state_min])
    w.add("kube_horizontalpodautoscaler_status_current_replicas", hpa, allk, pool["current"][state_min])
    w.add("kube_horizontalpodautoscaler_spec_min_replicas", hpa, allk, [MIN_REPLICAS] * len(allk))
    w.add("kube_horizontalpodautoscaler_spec_max_replicas", hpa, allk, [MAX_REPLICAS] * len(allk))
    if cfg["info"]:
        w.add("kube_horizontalpodautoscaler_info",
              {**hpa, "scaletargetref_api_version": "apps/v1", "scaletargetref_kind": "Deployment",
               "scaletargetref_name": SERVICE}, allk, [1] * len(allk))
    w.add("kube_deployment_spec_replicas", dep, allk, pool["desired"][state_min])
    w.add("kube_deployment_status_replicas", dep, allk, pool["current"][state_min])
    w.add("kube_deployment_status_replicas_ready", dep, allk, pool["R"][state_min])
    w.add("kube_deployment_status_replicas_available", dep, allk, pool["R"][state_min])
    if cfg["ksm_pods"]:
        for node in NODES:
            w.add("kube_node_status_allocatable",
                  {**ksm, "node": node, "resource": "nvidia_com_gpu", "unit": "integer"},
                  allk, [GPUS_PER_NODE] * len(allk))
        for p in pods:
            nm = names["pods"][p.pid]
            ns = BATCH_NS if p.kind == "batch" else NAMESPACE
            alive_to = p.deleted if p.deleted is not None else n_min
            k_first = max(p.created, 0) + 1 if p.created >= 0 else 0
            k_last = min(alive_to, n_min)  # last scrape that reports it (minute alive_to - 1)
            if k_last < k_first:
                continue
            ks = np.arange(k_first, k_last + 1)
            mm = state_min[ks]
            bound = np.array([p.scheduled is not None and p.scheduled <= m for m in mm])
            plab = {**ksm, "namespace": ns, "pod": nm["name"], "uid": nm["uid"]}
            for phase in ("Pending", "Running", "Succeeded", "Failed", "Unknown"):
                v = bound if phase == "Running" else (~bound if phase == "Pending" else np.zeros(len(ks), bool))
                w.add("kube_pod_status_phase", {**plab, "phase": phase}, ks, v.astype(np.int64))
            if p.kind == "inference":
                owner = {"created_by_kind": "ReplicaSet", "created_by_name": f"{SERVICE}-{RS_HASH}",
                         "priority_class": "inference-high"}
            else:
                owner = {"created_by_kind": "PyTorchJob", "created_by_name": BATCH_JOB,
                         "priority_class": "training-low"}
            kb = ks[bound]
            if len(kb):
                w.add("kube_pod_info", {**plab, **owner, "node": nm["node"], "pod_ip": nm["ip"],
                                        "host_network": "false"}, kb, [1] * len(kb))
                w.add("kube_pod_container_resource_requests",
                      {**plab, "container": "trainer" if p.kind == "batch" else "vllm",
                       "node": nm["node"], "resource": "nvidia_com_gpu", "unit": "integer"},
                      kb, [len(p.gpus)] * len(kb))
    return w.flush()


def write_story(out_dir, *, case: str, days: int = 4, seed: int = 1) -> dict:
    """Write the story's export (one query_range JSON per metric) and truth.json into out_dir."""
    if case not in CASES:
        raise ValueError(f"case must be one of {sorted(CASES)}, not {case!r}")
    if days < 1:
        raise ValueError("days must be >= 1")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    story = _run_story(days, seed)
    truth = _truth(story, case)
    truth["files"] = _export(story, case, out)
    (out / "truth.json").write_text(json.dumps(truth, indent=2) + "\n")
    return truth


def _table(truth: dict) -> str:
    rows = [f"case {truth['case']}  seed {truth['seed']}  days {truth['days']}  "
            f"{truth['start']} .. {truth['end']}  HPA {truth['hpa']['name']!r} -> {truth['hpa']['target']}  "
            f"control morning {truth['control_morning']}",
            f"{'start':21} {'end':21} {'min':>4} {'over':>4} {'p99max ms':>9}  {'cause':17} misattr  "
            f"over w/o batch / surges / both"]
    for e in truth["events"]:
        rows.append(f"{e['start']:21} {e['end']:21} {e['minutes']:4d} {e['minutes_over']:4d} "
                    f"{e['p99_max_ms']:9.0f}  {e['cause']:17} {str(e['misattributable_by_dashboard']):7}  "
                    f"{e['over_share_without_batch']:.2f} / {e['over_share_without_surges']:.2f} / "
                    f"{e['over_share_without_both']:.2f}")
    rows.append("batch jobs: " + ", ".join(f"{b['start'][5:16]}..{b['end'][11:16]}" for b in truth["batch_jobs"]))
    rows.append("surges: " + ", ".join(f"{s['start'][5:16]}..{s['end'][11:16]} x{s['factor']}" for s in truth["surges"]))
    rows.append("at 09:30: " + "; ".join(
        f"{r['day']} inf {r['inference_gpus']} (serving {r['inference_serving']}) batch {r['batch_gpus']} "
        f"idle {r['idle_gpus']} desired {r['hpa_desired']} pending {r['pending_pods']}"
        for r in truth["pool_at_0930"]))
    rows.append(f"stray over-SLO minutes outside events: {truth['stray_over_minutes']}; "
                f"requests served: {truth['requests_served']:,}; files: {len(truth['files'])}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="output folder")
    ap.add_argument("--case", default="both", choices=sorted(CASES))
    ap.add_argument("--days", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    truth = write_story(a.out, case=a.case, days=a.days, seed=a.seed)
    print(_table(truth))
    return 0


if __name__ == "__main__":
    sys.exit(main())
