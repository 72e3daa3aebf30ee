"""A compound-tail export of a 48-GPU pool, written independently of Tidelens and of its simulator.

Tidelens' compound events (a traffic surge inside batch contention) scored 1.00 on its own
simulator and not on an export written by someone else. This module is such an export, with its
own model of a pool and its own truth. It imports nothing from ``analytics`` (numpy, scipy, polars and
the standard library only), and nothing from ``tests/independent_export.py`` either.

    write_story(out_dir, days=10, seed=1) -> truth (also written as truth.json)
    python tests/compound_export.py OUT [--days 10] [--seed 1]   # prints the events

Output: what a team dumps from its metrics warehouse, one Parquet file per metric family in the
long layout ``timestamp`` (UTC, ms), ``metric``, ``value`` and one column per label (empty where a
series has no such label). A sample's timestamp is the END of the minute it reports.

The story
---------
* The pool: 48 H100s on six nodes ``gpu-h100-01..06``; dcgm-exporter in Kubernetes mode
  (``DCGM_FI_DEV_GPU_UTIL`` per GPU, pod labels only while a pod holds it), kube-state-metrics (node allocatable GPUs, each bound pod's GPU request, the HPA's
  desired and current replicas, the Deployment's ready replicas). The run starts Monday
  2025-06-02 00:00 UTC.
* The service ``assistant-vllm`` (namespace ``genai``): a vLLM replica on two GPUs of one node
  (tensor parallel), 48 sequences at once, ~7.5 s each (6.4 requests/s per replica). The HPA (min
  2, max 22) scales on the request rate averaged over the last two minutes (a Prometheus
  adapter's window), 4.0 requests/s per replica, scale-down stabilised over 8 minutes. A new pod
  takes the first node with two free GPUs, then loads for 5 to 8 minutes (drawn per pod) before
  it serves: the warm-up.
* Traffic: a weekday rises slowly from 06:00, ramps 09:30-10:00 to 56 requests/s, holds until
  17:30 and falls back to 20% by 22:30; weekends rise a third as far. Each day's level varies ~3%,
  a slow factor ~4%, each minute's count is Poisson-like.
* Batch: the nightly fine-tune ``finetune-nightly`` (namespace ``ml-training``), 4 workers of 8
  GPUs each on whole nodes (32 GPUs), submitted at 01:00 on its nights, running until 10:45-11:15
  UTC: at the 09:30 ramp the service gets at most 8 replicas (51 requests/s) for the 56 it needs.
* Weekdays, shuffled by the seed: two **compound** mornings (the fine-tune, and a surge of
  1.8-2.5x starting 15-20 minutes after the ramp does, for 25-40 minutes: contention outlasts
  it), three **surge** days (two in a run of fewer than 6 weekdays) without the fine-tune (2.1-2.8x for 25-40 minutes between 13:00 and
  16:00, on the day's plateau: what a surge of that size does alone), the rest **batch** mornings
  (the fine-tune alone). Surges reach their size in 2 minutes.
* Latency (TTFT), per minute with ``R`` serving replicas (capacity ``c = 3.2 R`` requests/s) and
  ``lam`` requests/s offered: a backlog carried from minute to minute grows by ``(lam - c)`` a
  second, clients giving up beyond 60 s of waiting (those are ``finished_reason="abort"``, no
  TTFT); a request waits what is ahead of it over ``c``, then prefills in a log-normal time
  (median 90 ms x (1 + 4 u^4) at utilisation ``u = min(lam / c, 1)``, sigma 0.35). The minute's
  TTFT histogram is drawn from that distribution (its exact bucket probabilities).

What it exports
---------------
``vllm:time_to_first_token_seconds_bucket{le}`` / ``_count`` / ``_sum`` and
``vllm:request_success_total{finished_reason}`` per serving pod (counters from 0 when a pod
starts serving), ``DCGM_FI_DEV_GPU_UTIL`` per GPU,
``kube_horizontalpodautoscaler_status_desired_replicas`` / ``_current_replicas``,
``kube_deployment_status_replicas_ready``, ``kube_node_status_allocatable{resource="nvidia_com_gpu"}``
and ``kube_pod_container_resource_requests{resource="nvidia_com_gpu"}`` for bound GPU pods.

Ground truth (``truth.json``)
-----------------------------
* A minute is over the SLO (TTFT p99 1 s, a bucket bound) when more than 1% of its served
  requests are above 1 s in the exported counts. Events: runs of such minutes, gaps under 10
  minutes merged, at least 5 minutes long; ``start`` is the first over minute's timestamp,
  ``end`` the last one's plus 60 s.
* The story is re-run (same draws) without the fine-tune and without the surges. Per minute the
  pool's own state gives two factors: **batch blocking scale-up**, ``log(R_no_batch / R)``
  (replicas the run without the fine-tune had ready, each after its own warm-up, over the ones
  this run had; never below 0), and **traffic over its norm**, ``log(lam / lam_no_surge)`` (the
  surge's multiplier). Each is summed over the event's minutes; ``shares`` are the two sums over
  their total (``unexplained`` 0).
* Cause: ``mixed`` when both shares are at least 0.15 (a material surge inside contention);
  otherwise ``batch_contention`` if the run without the fine-tune has fewer than half of the
  event's minutes over the SLO and ``traffic_surge`` if the run without surges has; else
  ``scaling_lag``. ``misattributable_by_dashboard``: a ``batch_contention`` event starting on a
  weekday between 09:00 and 11:30 (latency rose with the morning ramp).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import sys
from pathlib import Path

import numpy as np
import polars as pl
from scipy.special import ndtr

START = dt.datetime(2025, 6, 2, tzinfo=dt.timezone.utc)  # a Monday
START_MS = int(START.timestamp() * 1000)
NODES = tuple(f"gpu-h100-{i:02d}" for i in range(1, 7))
PER_NODE = 8
N_GPUS = len(NODES) * PER_NODE

SERVICE, NAMESPACE, MODEL = "assistant-vllm", "genai", "Qwen/Qwen2.5-32B-Instruct"
RS = "assistant-vllm-84d5f6c9b7"
GPUS_PER_REPLICA = 2  # tensor parallel
REPLICA_RPS = 48 / 7.5  # 48 sequences, ~7.5 s each
HPA_TARGET_RPS, HPA_MIN, HPA_MAX = 4.0, 2, 22
HPA_WINDOW_MIN, SCALE_DOWN_MIN = 2, 8
WARMUP_MIN = (5, 8)
PATIENCE_S = 60.0
PREFILL_MEDIAN_S, PREFILL_SIGMA = 0.09, 0.35
DAY_RPS = 56.0
RAMP_H = 9.5

FT_JOB, FT_NS, FT_WORKERS = "finetune-nightly", "ml-training", 4
FT_SUBMIT_MIN = 60

SLO_S = 1.0
BOUNDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
          20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # vLLM's TTFT buckets; +Inf added
MIXED_MIN_SHARE = 0.15


# --- the plan ---------------------------------------------------------------------------------
def _cosine(x: np.ndarray) -> np.ndarray:
    return 0.5 - 0.5 * np.cos(np.pi * np.clip(x, 0.0, 1.0))


def _shape(h: np.ndarray, weekend: np.ndarray) -> np.ndarray:
    rise = 0.2 + 0.15 * _cosine((h - 6.0) / 3.5)
    day = rise + (1.0 - rise) * _cosine((h - RAMP_H) / 0.5)
    day = day * (1.0 - 0.8 * _cosine((h - 17.5) / 5.0))
    return np.where(weekend, 0.2 + (day - 0.2) / 3.0, day)


def plan_story(days: int, seed: int) -> dict:
    """Days' roles, traffic, surges and fine-tune windows (every re-run shares them)."""
    rng = np.random.default_rng([seed, 48])
    n = days * 1440
    m = np.arange(n)
    day = m // 1440
    h = (m % 1440 + 0.5) / 60.0
    weekdays = [d for d in range(days) if d % 7 < 5]
    if len(weekdays) < 5:
        raise ValueError(f"--days {days}: the story needs at least 5 weekdays")
    order = [int(d) for d in rng.permutation(weekdays)]
    k = 5 if len(weekdays) >= 6 else 4
    roles = {d: "compound" for d in order[:2]} | {d: "surge" for d in order[2:k]} | {d: "batch" for d in order[k:]}
    level = 1.0 + 0.03 * rng.standard_normal(days)
    slow = np.zeros(n)
    eps = rng.standard_normal(n) * 0.04 * math.sqrt(1 - 0.95 ** 2)
    for i in range(1, n):
        slow[i] = 0.95 * slow[i - 1] + eps[i]
    norm = DAY_RPS * level[day] * _shape(h, day % 7 >= 5) * np.exp(slow)
    mult = np.ones(n)
    surges, finetunes = [], []
    for d in sorted(roles):
        if roles[d] in ("compound", "batch"):
            finetunes.append({"day": d, "submit": d * 1440 + FT_SUBMIT_MIN,
                              "end": d * 1440 + int(rng.integers(10 * 60 + 45, 11 * 60 + 16))})
        if roles[d] == "compound":
            start, factor = d * 1440 + int(RAMP_H * 60) + int(rng.integers(15, 21)), float(rng.uniform(1.8, 2.5))
        elif roles[d] == "surge":
            start, factor = d * 1440 + int(rng.integers(13 * 60, 16 * 60)), float(rng.uniform(2.1, 2.8))
        else:
            continue
        length = int(rng.integers(25, 41))
        t = m - start
        env = np.clip(np.minimum((t + 1) / 2.0, (length - t) / 2.0), 0.0, 1.0)
        mult *= 1.0 + (round(factor, 2) - 1.0) * env
        surges.append({"day": d, "role": roles[d], "start_min": start, "end_min": start + length,
                       "factor": round(factor, 2)})
    return {"days": days, "seed": seed, "n": n, "roles": roles, "norm": norm, "mult": mult,
            "surges": surges, "finetunes": finetunes, "z": rng.standard_normal(n),
            "warm": rng.integers(WARMUP_MIN[0], WARMUP_MIN[1] + 1, size=(n, 8)),
            "hist_seed": int(rng.integers(2**31))}


def arrivals(plan: dict, surges: bool) -> np.ndarray:
    lam = plan["norm"] * (plan["mult"] if surges else 1.0) * 60.0
    return np.maximum(0, np.rint(lam + np.sqrt(lam) * plan["z"])).astype(np.int64)


# --- the pool ---------------------------------------------------------------------------------
def run_pool(plan: dict, count: np.ndarray, with_batch: bool) -> dict:
    """Minute by minute: the HPA, its pods (pending, loading, serving) and the fine-tune."""
    n = plan["n"]
    free = np.ones(N_GPUS, bool)
    holder = np.full((n, N_GPUS), -1, np.int32)
    pods: list[dict] = []  # kind, gpus, created, scheduled, ready, deleted
    live: list[int] = []
    recs: list[int] = []
    desired = np.zeros(n, np.int32)
    ready = np.zeros(n, np.int32)
    batch_gpus = np.zeros(n, np.int32)
    fts = {f["submit"]: f for f in plan["finetunes"]} if with_batch else {}
    waiting, running = None, []
    for m in range(n):
        for i in running:
            if pods[i]["deleted"] == m:
                free[pods[i]["gpus"]] = True
        running = [i for i in running if pods[i]["deleted"] > m]
        if m in fts:
            waiting = fts[m]
        lo = max(0, m - HPA_WINDOW_MIN)
        rate = count[lo:m].mean() / 60.0 if m else count[0] / 60.0
        recs.append(min(max(math.ceil(rate / HPA_TARGET_RPS - 1e-9), HPA_MIN), HPA_MAX))
        want = max(recs[-SCALE_DOWN_MIN:])
        desired[m] = want
        while len(live) < want:
            pods.append({"kind": "inference", "gpus": [], "created": m, "scheduled": None, "ready": None,
                         "deleted": n})
            live.append(len(pods) - 1)
        if len(live) > want:  # pending first, then loading, then the newest serving
            rank = sorted(live, key=lambda i: (pods[i]["scheduled"] is not None,
                                               pods[i]["ready"] is not None and pods[i]["ready"] <= m,
                                               -pods[i]["created"]))
            for i in rank[:len(live) - want]:
                pods[i]["deleted"] = m
                free[pods[i]["gpus"]] = True
                live.remove(i)
        if waiting is not None:  # the gang job: four whole free nodes, or it waits
            nodes = [k for k in range(len(NODES)) if free[k * PER_NODE:(k + 1) * PER_NODE].all()][-FT_WORKERS:]
            if len(nodes) == FT_WORKERS:
                for w, k in enumerate(nodes):
                    g = list(range(k * PER_NODE, (k + 1) * PER_NODE))
                    free[g] = False
                    pods.append({"kind": "batch", "gpus": g, "created": m, "scheduled": m, "ready": m,
                                 "deleted": waiting["end"], "worker": w})
                    running.append(len(pods) - 1)
                waiting = None
        bound = 0
        for i in (i for i in live if pods[i]["scheduled"] is None):
            p = pods[i]
            per_node = free.reshape(len(NODES), PER_NODE)
            nodes = np.flatnonzero(per_node.sum(axis=1) >= GPUS_PER_REPLICA)
            if not nodes.size:
                break
            pair = np.flatnonzero(per_node[nodes[0]])[:GPUS_PER_REPLICA] + nodes[0] * PER_NODE
            free[pair] = False
            p["gpus"], p["scheduled"] = [int(g) for g in pair], m
            # the run starts with the night's replicas already serving
            p["ready"] = m + int(plan["warm"][m, bound % 8]) if m else -1
            bound += 1
        for i in live + running:
            if pods[i]["gpus"]:
                holder[m, pods[i]["gpus"]] = i
        ready[m] = sum(1 for i in live if pods[i]["ready"] is not None and pods[i]["ready"] <= m)
        batch_gpus[m] = 8 * len(running)
    return {"pods": pods, "holder": holder, "desired": desired, "ready": ready, "batch_gpus": batch_gpus}


# --- latency ------------------------------------------------------------------------------------
def latency(plan: dict, count: np.ndarray, ready: np.ndarray) -> dict:
    """Per minute: served and abandoned requests and the TTFT histogram's bucket counts."""
    n = plan["n"]
    cap = ready * REPLICA_RPS * 60.0  # requests a minute
    backlog = np.zeros(n + 1)
    abandoned = np.zeros(n, np.int64)
    for m in range(n):
        b = backlog[m] + count[m] - cap[m]
        limit = PATIENCE_S / 60.0 * cap[m]
        abandoned[m] = int(max(b - limit, 0.0))
        backlog[m + 1] = min(max(b, 0.0), limit)
    served = count - abandoned
    u = np.minimum(count / np.maximum(cap, 1e-9), 1.0)
    mu = np.log(PREFILL_MEDIAN_S * (1.0 + 4.0 * u ** 4))
    # waits of the minute's arrivals at 16 evenly spaced instants (what is ahead, over capacity)
    s = (np.arange(16) + 0.5) / 16.0
    ahead = backlog[:n, None] + (count - cap)[:, None] * s[None, :]
    wait = np.clip(ahead, 0.0, None) / np.maximum(cap, 1e-9)[:, None] * 60.0
    wait = np.minimum(wait, PATIENCE_S)
    bounds = np.array(BOUNDS)
    left = bounds[None, None, :] - wait[:, :, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (np.log(np.where(left > 0, left, np.nan)) - mu[:, None, None]) / PREFILL_SIGMA
    cdf = ndtr(np.nan_to_num(z, nan=-40.0)).mean(axis=1)
    probs = np.diff(np.concatenate([np.zeros((n, 1)), cdf, np.ones((n, 1))], axis=1), axis=1)
    probs = np.clip(probs, 0.0, None)
    probs /= probs.sum(axis=1, keepdims=True)
    rng = np.random.default_rng(plan["hist_seed"])
    per_bucket = rng.multinomial(np.maximum(served, 0), probs)
    mean_s = (wait.mean(axis=1) + np.exp(mu + PREFILL_SIGMA ** 2 / 2))
    slow = per_bucket[:, BOUNDS.index(SLO_S) + 1:].sum(axis=1)  # the buckets above the SLO's bound
    over = (served > 0) & (slow > 0.01 * served)
    return {"served": served, "abandoned": abandoned, "buckets": per_bucket, "sum_s": served * mean_s,
            "over": over}


def find_events(over: np.ndarray, min_len: int = 5, merge_gap: int = 10) -> list[tuple[int, int]]:
    idx = np.flatnonzero(over)
    runs: list[list[int]] = []
    for i in idx.tolist():
        if runs and i - runs[-1][1] < merge_gap:
            runs[-1][1] = i + 1
        else:
            runs.append([i, i + 1])
    return [(a, b) for a, b in runs if b - a >= min_len]


# --- the story and its truth --------------------------------------------------------------------
def run_story(days: int = 10, seed: int = 1) -> dict:
    plan = plan_story(days, seed)
    runs = {}
    for name, surges, batch in (("actual", True, True), ("no_batch", True, False), ("no_surge", False, True)):
        count = arrivals(plan, surges)
        pool = run_pool(plan, count, batch)
        runs[name] = {"count": count, "pool": pool, **latency(plan, count, pool["ready"])}
    return {"plan": plan, "runs": runs}


def _iso(minute_boundary: int) -> str:
    return (START + dt.timedelta(minutes=int(minute_boundary))).strftime("%Y-%m-%dT%H:%M:%SZ")


def truth_of(story: dict) -> dict:
    plan, runs = story["plan"], story["runs"]
    act, nb, ns = runs["actual"], runs["no_batch"], runs["no_surge"]
    with np.errstate(divide="ignore", invalid="ignore"):
        batch_f = np.clip(np.log(np.maximum(nb["pool"]["ready"], 1) / np.maximum(act["pool"]["ready"], 1)), 0.0, None)
    traffic_f = np.log(plan["mult"])
    events = []
    for a, b in find_events(act["over"]):
        fb, ft = float(batch_f[a:b].sum()), float(traffic_f[a:b].sum())
        total = fb + ft
        shares = ({"batch_contention": round(fb / total, 4), "traffic_surge": round(ft / total, 4), "unexplained": 0.0}
                  if total > 0 else {"batch_contention": 0.0, "traffic_surge": 0.0, "unexplained": 0.0})
        gone_b = nb["over"][a:b].mean() < 0.5
        gone_s = ns["over"][a:b].mean() < 0.5
        if shares["batch_contention"] >= MIXED_MIN_SHARE and shares["traffic_surge"] >= MIXED_MIN_SHARE:
            cause = "mixed"
        elif gone_b and not gone_s:
            cause = "batch_contention"
        elif gone_s and not gone_b:
            cause = "traffic_surge"
        elif gone_b and gone_s:
            cause = "mixed"
        else:
            cause = "scaling_lag"
        tod = a % 1440
        events.append({"service": SERVICE, "start": _iso(a + 1), "end": _iso(b + 1), "minutes": b - a,
                       "cause": cause, "shares": shares, "day_role": plan["roles"].get(a // 1440, "weekend"),
                       "misattributable_by_dashboard": bool(cause == "batch_contention" and (a // 1440) % 7 < 5
                                                            and 9 * 60 <= tod < 11 * 60 + 30)})
    return {"story": "compound_export", "days": plan["days"], "seed": plan["seed"], "scrape_s": 60,
            "slos": {SERVICE: {"metric": "vllm:time_to_first_token_seconds", "p99_ms": SLO_S * 1000}},
            "event_rule": {"min_minutes": 5, "merge_gap_minutes": 10},
            "surges": [{**s, "start": _iso(s["start_min"]), "end": _iso(s["end_min"])} for s in plan["surges"]],
            "finetunes": [{"start": _iso(f["submit"]), "end": _iso(f["end"])} for f in plan["finetunes"]],
            "events": events}


# --- the export ---------------------------------------------------------------------------------
def _pod_name(i: int, pod: dict) -> str:
    if pod["kind"] == "batch":
        return f"{FT_JOB}-{pod['created'] // 1440:02d}-worker-{pod['worker']}"
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    x, tail = i * 7919 + 104729, ""
    for _ in range(5):
        x, r = divmod(x, len(alphabet))
        tail += alphabet[r]
    return f"{RS}-{tail}"


def _long(ts: np.ndarray, metric: str, values: np.ndarray, **labels: str) -> tuple[dict, np.ndarray, np.ndarray]:
    """One series: its name and labels, its timestamps and values."""
    return {"metric": metric, **labels}, ts.astype(np.int64), np.asarray(values, float)


def _table(series: list[tuple[dict, np.ndarray, np.ndarray]]) -> pl.DataFrame:
    """Series in the long layout: a row per sample, the series' labels repeated on each."""
    keys = pl.DataFrame([lab for lab, _, _ in series]).with_row_index("_s")
    lengths = np.array([len(t) for _, t, _ in series])
    samples = pl.DataFrame({"_s": np.repeat(np.arange(len(series), dtype=np.uint32), lengths),
                            "timestamp": np.concatenate([t for _, t, _ in series]),
                            "value": np.concatenate([v for _, _, v in series])})
    return samples.join(keys, on="_s", how="left").drop("_s")


def write_story(out: Path, *, days: int = 10, seed: int = 1) -> dict:
    """Write the export and ``truth.json`` under ``out``; the truth, with ``files`` (load those)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    story = run_story(days, seed)
    act = story["runs"]["actual"]
    pool = act["pool"]
    n = story["plan"]["n"]
    ts = START_MS + (np.arange(n) + 1) * 60_000
    names = [_pod_name(i, p) for i, p in enumerate(pool["pods"])]
    files: dict[str, list] = {"vllm": [], "dcgm": [], "ksm": []}
    # vLLM: each serving pod gets its share of the minute's requests (round robin)
    serving = [[] for _ in range(n)]
    for i, p in enumerate(pool["pods"]):
        if p["kind"] == "inference" and p["ready"] is not None:
            for m in range(max(p["ready"], 0), min(p["deleted"], n)):
                serving[m].append(i)
    share: dict[int, dict[str, np.ndarray]] = {}
    for m in range(n):
        k = len(serving[m])
        if not k:
            continue
        split = act["buckets"][m][None, :] // k + (np.arange(k)[:, None] < act["buckets"][m][None, :] % k)
        ab = act["abandoned"][m] // k + (np.arange(k) < act["abandoned"][m] % k)
        for j, i in enumerate(serving[m]):
            d = share.setdefault(i, {"m": [], "b": [], "a": []})
            d["m"].append(m)
            d["b"].append(split[j])
            d["a"].append(ab[j])
    mean_s = np.where(act["served"] > 0, act["sum_s"] / np.maximum(act["served"], 1), 0.0)
    le = [f"{b:g}" for b in BOUNDS] + ["+Inf"]
    for i, d in share.items():
        mm = np.array(d["m"])
        cum = np.cumsum(np.array(d["b"]), axis=0)
        cum_le = np.cumsum(cum, axis=1)  # histogram buckets are cumulative in le
        lab = {"namespace": NAMESPACE, "pod": names[i], "model_name": MODEL, "job": "vllm"}
        for j, bound in enumerate(le):
            files["vllm"].append(_long(ts[mm], "vllm:time_to_first_token_seconds_bucket", cum_le[:, j], le=bound, **lab))
        files["vllm"].append(_long(ts[mm], "vllm:time_to_first_token_seconds_count", cum_le[:, -1], **lab))
        served_each = np.array(d["b"]).sum(axis=1)
        files["vllm"].append(_long(ts[mm], "vllm:time_to_first_token_seconds_sum",
                                   np.round(np.cumsum(served_each * mean_s[mm]), 3), **lab))
        files["vllm"].append(_long(ts[mm], "vllm:request_success_total", np.cumsum(served_each),
                                   finished_reason="stop", **lab))
        files["vllm"].append(_long(ts[mm], "vllm:request_success_total", np.cumsum(np.array(d["a"])),
                                   finished_reason="abort", **lab))
    # dcgm: one series per GPU and holder
    util_serving = np.clip(100.0 * act["count"] / np.maximum(pool["ready"] * REPLICA_RPS * 60, 1), 0, 100)
    for g in range(N_GPUS):
        node, idx = NODES[g // PER_NODE], g % PER_NODE
        base = {"gpu": str(idx), "UUID": f"GPU-{g:02x}c0ffee-{node[-2:]}{idx:02d}-4a1b-9c2d-{g:012x}",
                "Hostname": node, "modelName": "NVIDIA H100 80GB HBM3", "job": "dcgm-exporter"}
        h = pool["holder"][:, g]
        cuts = np.flatnonzero(np.diff(h)) + 1
        for a, b in zip(np.r_[0, cuts], np.r_[cuts, n]):
            who = int(h[a])
            mm = np.arange(a, b)
            lab = dict(base)
            if who < 0:
                util = np.zeros(b - a)
            else:
                p = pool["pods"][who]
                lab |= {"pod": names[who], "namespace": FT_NS if p["kind"] == "batch" else NAMESPACE,
                        "container": "trainer" if p["kind"] == "batch" else "vllm"}
                util = (np.full(b - a, 97.0) if p["kind"] == "batch"
                        else np.where(mm < p["ready"], 3.0, util_serving[mm]))
            files["dcgm"].append(_long(ts[mm], "DCGM_FI_DEV_GPU_UTIL", util, **lab))
    # kube-state-metrics
    ksm = {"job": "kube-state-metrics"}
    hpa = {"namespace": NAMESPACE, "horizontalpodautoscaler": SERVICE, **ksm}
    current = np.zeros(n)
    for p in pool["pods"]:
        if p["kind"] == "inference":
            current[p["created"]:min(p["deleted"], n)] += 1
    files["ksm"] += [_long(ts, "kube_horizontalpodautoscaler_status_desired_replicas", pool["desired"], **hpa),
                     _long(ts, "kube_horizontalpodautoscaler_status_current_replicas", current, **hpa),
                     _long(ts, "kube_deployment_status_replicas_ready", pool["ready"], namespace=NAMESPACE,
                           deployment=SERVICE, **ksm)]
    for node in NODES:
        files["ksm"].append(_long(ts, "kube_node_status_allocatable", np.full(n, float(PER_NODE)), node=node,
                                  resource="nvidia_com_gpu", unit="integer", **ksm))
    for i, p in enumerate(pool["pods"]):
        if p["scheduled"] is None:
            continue
        a, b = max(p["scheduled"], 0), min(p["deleted"], n)
        if b <= a:
            continue
        mm = np.arange(a, b)
        files["ksm"].append(_long(ts[mm], "kube_pod_container_resource_requests", np.full(b - a, float(len(p["gpus"]))),
                                  namespace=FT_NS if p["kind"] == "batch" else NAMESPACE, pod=names[i],
                                  container="trainer" if p["kind"] == "batch" else "vllm",
                                  node=NODES[p["gpus"][0] // PER_NODE], resource="nvidia_com_gpu", unit="integer",
                                  **ksm))
    written = []
    for name, parts in files.items():
        _table(parts).write_parquet(out / f"{name}.parquet")
        written.append(f"{name}.parquet")
    tr = truth_of(story)
    tr["files"] = written
    (out / "truth.json").write_text(json.dumps(tr, indent=1))
    return tr


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--days", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    tr = write_story(args.out, days=args.days, seed=args.seed)
    for e in tr["events"]:
        print(e["start"], e["minutes"], e["cause"], e["shares"], e["day_role"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
