"""What the simulated cluster exports, as series: metric, raw labels, and samples per minute.

One builder turns a :class:`~analytics.sample.sim.SimResult` into the dcgm-exporter, vLLM,
http, kube-state-metrics and Kueue series described in ``docs/conventions.md``, labels included
as a Prometheus scrape would add them (``instance``, ``job``). Every writer and the store fast
path read this one representation, so every format carries the same series and values.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import polars as pl

from analytics import signals as sg
from analytics.sample.cluster import GPU_MODEL, Gpu, mig_compute_slices
from analytics.sample.latency import bucket_counts, request_weights
from analytics.sample.pool import Pod
from analytics.sample.seriesset import SeriesSet, family_of, labels_json
from analytics.sample.variants import DEFAULT_SCRAPE_S, export_scrape_s, export_transform

KSM = {"instance": "10.43.0.10:8080", "job": "kube-state-metrics"}
KUEUE = {"instance": "10.43.0.20:8080", "job": "kueue-controller-manager"}
class _Builder:
    """Collects series as they are added; :meth:`take` hands over what it holds so far.

    ``skey`` counts on across takes, so the pieces of one run concatenate to the whole.
    """

    def __init__(self) -> None:
        self.meta: list[tuple[str, str]] = []
        self.t: list[np.ndarray] = []
        self.v: list[np.ndarray] = []
        self.k: list[np.ndarray] = []
        self.skey_base = 0
        self.pending = 0  # samples held

    def add(self, metric: str, labels: dict[str, str], t: np.ndarray, v: np.ndarray) -> None:
        if len(t) == 0:
            return
        skey = self.skey_base + len(self.meta)
        self.meta.append((metric, labels_json(labels)))
        self.t.append(np.asarray(t, dtype=np.int64))
        self.v.append(np.asarray(v, dtype=np.float64))
        self.k.append(np.full(len(t), skey, dtype=np.int64))
        self.pending += len(t)

    def take(self, start_ms: int, step_ms: int) -> SeriesSet:
        """The series and samples added since the last take (all of them on the first)."""
        series = pl.DataFrame({
            "skey": np.arange(self.skey_base, self.skey_base + len(self.meta), dtype=np.int64),
            "metric": [m for m, _ in self.meta],
            "family": [family_of(m) for m, _ in self.meta],
            "labels": [lab for _, lab in self.meta]})
        samples = pl.DataFrame({
            "skey": np.concatenate(self.k), "ts_ms": start_ms + np.concatenate(self.t) * step_ms,
            "value": np.concatenate(self.v)})
        self.skey_base += len(self.meta)
        self.meta, self.t, self.v, self.k = [], [], [], []
        self.pending = 0
        return SeriesSet(series=series, samples=samples)


def _gpu_labels(g: Gpu, mig: tuple[str, int] | None = None) -> dict[str, str]:
    lab = {"gpu": str(g.minor), "UUID": g.uuid, "pci_bus_id": g.pci_bus_id, "device": f"nvidia{g.minor}",
           "modelName": GPU_MODEL, "Hostname": g.node, "instance": f"{g.node}:9400", "job": "dcgm-exporter"}
    if mig:
        lab["GPU_I_PROFILE"], lab["GPU_I_ID"] = mig[0], str(mig[1])
    return lab


def _pod_labels(p: Pod) -> dict[str, str]:
    return {"pod": p.name, "namespace": p.namespace, "container": p.container}


def _runs(col: np.ndarray) -> list[tuple[int, int, int]]:
    """(start, end, value) runs of a 1-d integer array."""
    cuts = np.flatnonzero(np.diff(col)) + 1
    starts = np.concatenate([[0], cuts])
    ends = np.concatenate([cuts, [len(col)]])
    return [(int(a), int(b), int(col[a])) for a, b in zip(starts, ends)]


def _dcgm(b: _Builder, lab: dict[str, str], t: np.ndarray, util: np.ndarray, fb: np.ndarray,
          *, with_util: bool = True, power_scale: float = 1.0) -> None:
    active = np.round(np.clip(util / 100.0 * 0.93, 0.0, 1.0), 4)
    if with_util:
        b.add(sg.DCGM_GPU_UTIL, lab, t, np.round(util))
    b.add(sg.DCGM_GR_ENGINE_ACTIVE, lab, t, active)
    b.add(sg.DCGM_FB_USED, lab, t, np.round(fb))
    b.add(sg.DCGM_POWER, lab, t, np.round((72.0 + 610.0 * active) * power_scale, 2))


def _split_over_slots(counts: np.ndarray, per_slot: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Deal each minute's bucket counts ``(T, B)`` over its serving slots ``(T, S)`` without replacement.

    Returns ``(T, S, B)`` whose sum over slots is ``counts`` wherever the slots hold all the
    minute's requests: pods get a random share (multivariate hypergeometric, bucket by bucket),
    the service total stays exactly what the truth counts.
    """
    rem = counts.copy()
    out = np.zeros((counts.shape[0], per_slot.shape[1], counts.shape[1]), np.int64)
    for k in range(per_slot.shape[1]):
        need = np.minimum(per_slot[:, k].astype(np.int64), rem.sum(axis=1))
        if not need.any():
            continue
        left = rem.sum(axis=1)
        for j in range(counts.shape[1]):
            left = left - rem[:, j]
            x = need if j == counts.shape[1] - 1 else rng.hypergeometric(rem[:, j], left, need)
            out[:, k, j] = x
            rem[:, j] -= x
            need = need - x
    return out


def build_series(res, minutes: slice | None = None, gpu_filter: set[int] | None = None) -> SeriesSet:
    """Every exported series of ``res`` (a ``SimResult``).

    Parameters
    ----------
    minutes:
        Only this window of minutes (excerpts); counters keep their run-long values.
    gpu_filter:
        Only the dcgm-exporter series of these GPU pool indices (excerpts).
    """
    return next(iter_series(res, minutes, gpu_filter))


def iter_series(res, minutes: slice | None = None, gpu_filter: set[int] | None = None, *,
                chunk_samples: int | None = None) -> Iterator[SeriesSet]:
    """:func:`build_series` in pieces of about ``chunk_samples`` samples, for runs too large to hold.

    Each piece holds whole series (a series is never split), ``skey`` counting on across pieces,
    so concatenating the pieces gives exactly :func:`build_series`' result; the random draws do
    not depend on the piece size. Without ``chunk_samples``: one piece, the whole run.

    The export variants of ``res.variants`` (:mod:`analytics.sample.variants`) rewrite each piece
    as it is built; their ``skey`` then count on densely across the rewritten pieces.
    """
    names = tuple(getattr(res, "variants", ()))
    transform = export_transform(names)
    if transform is None:
        yield from _iter_raw(res, minutes, gpu_filter, chunk_samples=chunk_samples)
        return
    if chunk_samples is not None:  # pieces of about chunk_samples samples once rescraped
        chunk_samples = max(1, chunk_samples * export_scrape_s(names) // DEFAULT_SCRAPE_S)
    next_skey = 0
    for piece in _iter_raw(res, minutes, gpu_filter, chunk_samples=chunk_samples):
        piece = transform(piece, res)
        # dense keys in the pieces' order (a variant may drop series or add some at the end)
        mapping = piece.series.select("skey").sort("skey").with_columns(
            pl.int_range(next_skey, next_skey + pl.len(), dtype=pl.Int64).alias("new"))
        next_skey += mapping.height
        if not mapping.height and chunk_samples is not None:
            continue  # every series of the piece dropped
        series = (piece.series.join(mapping, on="skey").sort("new")
                  .select(pl.col("new").alias("skey"), "metric", "family", "labels"))
        samples = piece.samples.join(mapping, on="skey").select(pl.col("new").alias("skey"), "ts_ms", "value")
        yield SeriesSet(series=series, samples=samples)


def _iter_raw(res, minutes: slice | None, gpu_filter: set[int] | None, *,
              chunk_samples: int | None) -> Iterator[SeriesSet]:
    """The default cluster's series of ``res``, as :func:`iter_series` documents (no variants)."""
    b = _Builder()
    step_ms = res.scenario.scrape_s * 1000

    def full() -> bool:
        return chunk_samples is not None and b.pending > 0 and b.pending >= chunk_samples

    sc = res.scenario
    n = res.n_min
    win = minutes or slice(0, n)
    lo, hi = win.start or 0, win.stop or n
    rng = np.random.default_rng([res.seed, 20])
    pool = res.full.pool
    pods = pool.pods
    svc_by = {s.name: s for s in sc.services}

    def clip(t: np.ndarray, *vals: np.ndarray) -> tuple[np.ndarray, ...]:
        m = (t >= lo) & (t < hi)
        return (t[m],) + tuple(v[m] for v in vals)

    # --- dcgm-exporter: whole GPUs of the pool -------------------------------------------
    noise = rng.standard_normal((len(res.topology.gpus), n)).astype(np.float32)
    rho = {s: np.nan_to_num(d.rho) for s, d in res.full.latency.items()}
    for g in res.topology.gpus:
        if full():
            yield b.take(res.start_ms, step_ms)
        if g.role != "general" or (gpu_filter is not None and g.index not in gpu_filter):
            continue
        for a, e, holder in _runs(pool.holders[:, g.index]):
            t = np.arange(max(a, lo), min(e, hi))
            if len(t) == 0:
                continue
            z = noise[g.index, t]
            lab = _gpu_labels(g)
            if holder < 0:
                _dcgm(b, lab, t, np.zeros(len(t)), np.zeros(len(t)))
                continue
            p = pods[holder]
            lab.update(_pod_labels(p))
            if p.klass == "batch":
                util = np.clip(95.0 + 2.5 * z, 0, 100)
                fb = np.full(len(t), 76400.0) + np.round(300 * z)
            else:
                svc = svc_by[p.service]
                warm = t < p.ready_min
                util_srv = np.clip(12.0 + 80.0 * np.minimum(rho[p.service][t], 1.1) + 4.0 * z, 0, 100)
                util = np.where(warm, np.clip(8.0 + 3.0 * z, 0, 100), util_srv)
                frac = np.clip((t - p.scheduled_min + 1) / max(p.ready_min - p.scheduled_min, 1), 0.0, 1.0)
                fb = np.where(warm, svc.fb_used_mib * frac, svc.fb_used_mib + np.round(80 * z))
            _dcgm(b, lab, t, util, fb)

    # --- dcgm-exporter: MIG instances and the time-sliced GPU ------------------------------
    dev = res.dev_pods
    for g in res.topology.gpus:
        if full():
            yield b.take(res.start_ms, step_ms)
        if g.role == "general" or (gpu_filter is not None and g.index not in gpu_filter):
            continue
        t_all = np.arange(lo, hi)
        z = noise[g.index, t_all]
        if g.role == "mig":
            for p in (p for p in dev if p.gpu == g.index):
                lab = _gpu_labels(g, p.mig)
                if not p.hide_pod_labels:
                    lab.update(_pod_labels(p))
                share = mig_compute_slices(p.mig[0]) / 7.0
                util = np.clip(35.0 + 20.0 * np.sin(t_all / 180.0 + p.idx) + 5.0 * z, 0, 100)
                fb = np.full(len(t_all), 9000.0 * share * 7 / 2) + np.round(50 * z)
                _dcgm(b, lab, t_all, util, fb, with_util=False, power_scale=share)
        else:  # time-sliced: every pod sharing it gets the device's value; nobody -> one bare series
            users = [p for p in dev if p.gpu == g.index and p.mig is None]
            count = np.zeros(n, np.int32)
            for p in users:
                count[p.created_min:p.end_min] += 1
            util_dev = np.clip(np.where(count[t_all] > 0, 10.0 + 12.0 * count[t_all] + 6.0 * z, 0.0), 0, 100)
            fb_dev = np.where(count[t_all] > 0, 15000.0 * count[t_all] + np.round(200 * z), 0.0)
            for p in users:
                t, u, f = clip(np.arange(p.created_min, p.end_min), util_dev[np.clip(np.arange(p.created_min, p.end_min) - lo, 0, len(t_all) - 1)],
                               fb_dev[np.clip(np.arange(p.created_min, p.end_min) - lo, 0, len(t_all) - 1)])
                lab = _gpu_labels(g)
                lab.update(_pod_labels(p))
                _dcgm(b, lab, t, u, f)
            idle = count[t_all] == 0
            _dcgm(b, _gpu_labels(g), t_all[idle], util_dev[idle], fb_dev[idle])

    # --- services: per-pod histograms and counters ------------------------------------------
    split_rng = np.random.default_rng([res.seed, 21])
    ts_idx = np.arange(n)
    for s in sc.services:
        lat = res.full.latency[s.name]
        reqs = res.full.requests[s.name]
        serving = pool.serving[s.name]
        r = (serving >= 0).sum(axis=1)
        pv = np.where(ts_idx[:, None] < 0, 0.0, (np.arange(serving.shape[1])[None, :] < r[:, None]) / np.maximum(r, 1)[:, None])
        per_slot = split_rng.multinomial(np.where(r > 0, reqs, 0), pv)
        main_bounds = sg.VLLM_TTFT_BUCKETS_S if s.kind == "vllm" else sg.HTTP_DURATION_BUCKETS_S
        # the exported requests are the minute's draws scaled to its request count (the ones the
        # truth's p99 is computed from, analytics.sample.latency): bucket totals are exact, only
        # their split over the serving pods is random
        w = request_weights(reqs, lat.main_s.shape[1])
        w_sum = np.maximum(w.sum(axis=1), 1)
        split_main = _split_over_slots(bucket_counts(lat.main_s, w, main_bounds), per_slot, split_rng)
        mean_main = (lat.main_s * w).sum(axis=1, dtype=np.float64) / w_sum
        split_e2e = mean_e2e = None
        if lat.e2e_s is not None:
            split_e2e = _split_over_slots(bucket_counts(lat.e2e_s, w, sg.VLLM_E2E_BUCKETS_S), per_slot, split_rng)
            mean_e2e = (lat.e2e_s * w).sum(axis=1, dtype=np.float64) / w_sum
        for p in (p for p in pods if p.service == s.name and (p.ready_min >= 0 or p.scheduled_min == 0)):
            if full():
                yield b.take(res.start_ms, step_ms)
            first = max(p.ready_min, 0)
            if first >= p.end_min:
                continue
            t = np.arange(first, p.end_min)
            cnt = np.zeros(len(t), np.int64)
            rows, slots = np.nonzero(serving[t] == p.idx)
            cnt[rows] = per_slot[t[rows], slots]
            if s.kind == "vllm":
                base = {"model_name": s.model_name, "pod": p.name, "namespace": p.namespace,
                        "instance": f"10.42.{p.idx // 250}.{p.idx % 250 + 2}:8000", "job": s.name}
            else:
                base = {"service": s.name, "pod": p.name, "namespace": p.namespace,
                        "instance": f"10.42.{p.idx // 250}.{p.idx % 250 + 2}:8080", "job": s.name}
            hists = [(sg.VLLM_TTFT if s.kind == "vllm" else sg.HTTP_DURATION, main_bounds, split_main, mean_main)]
            if split_e2e is not None:
                hists.append((sg.VLLM_E2E, sg.VLLM_E2E_BUCKETS_S, split_e2e, mean_e2e))
            for fam, bounds, split, mean in hists:
                per_bucket = np.zeros((len(t), len(bounds) + 1), np.int64)
                per_bucket[rows] = split[t[rows], slots]
                cum_le = np.cumsum(per_bucket, axis=1)
                cum_t = np.cumsum(cum_le, axis=0)
                tt, cols = clip(t, cum_t)[0], clip(t, cum_t)[1]
                for j, bound in enumerate(list(bounds) + [float("inf")]):
                    le = "+Inf" if bound == float("inf") else repr(float(bound))
                    b.add(f"{fam}_bucket", {**base, "le": le}, tt, cols[:, j].astype(np.float64))
                tt2, sums = clip(t, np.round(np.cumsum(cnt * mean[t]), 3))
                b.add(f"{fam}_sum", base, tt2, sums)
                b.add(f"{fam}_count", base, tt2, cols[:, -1].astype(np.float64))
            if s.kind == "vllm":
                length = split_rng.binomial(cnt, 0.08)
                for reason, c in (("stop", cnt - length), ("length", length)):
                    b.add(sg.VLLM_SUCCESS, {**base, "finished_reason": reason}, *clip(t, np.cumsum(c).astype(np.float64)))
                run = np.round(lat.running[t] * (cnt > 0))
                wait = np.round(lat.waiting[t] * (cnt > 0))
                b.add(sg.VLLM_RUNNING, base, *clip(t, run))
                b.add(sg.VLLM_WAITING, base, *clip(t, wait))

    # --- kube-state-metrics -------------------------------------------------------------------
    for node in res.topology.nodes:
        if full():
            yield b.take(res.start_ms, step_ms)
        node_gpus = [g for g in res.topology.gpus if g.node == node]
        whole = sum(1 for g in node_gpus if g.role == "general")
        t_all = np.arange(lo, hi)
        res_counts = {"nvidia_com_gpu": whole}
        if any(g.role == "timeslice" for g in node_gpus):
            res_counts["nvidia_com_gpu_shared"] = 4
        for g in node_gpus:
            for profile, _ in g.mig:
                key = "nvidia_com_mig_" + profile.replace(".", "_").replace("-", "_")
                res_counts[key] = res_counts.get(key, 0) + 1
        for resource, count in res_counts.items():
            b.add(sg.KSM_NODE_GPU_ALLOCATABLE, {**KSM, "node": node, "resource": resource, "unit": "integer"},
                  t_all, np.full(len(t_all), float(count)))
    node_of = {g.index: g.node for g in res.topology.gpus}
    for p in list(pods) + list(dev):
        if full():
            yield b.take(res.start_ms, step_ms)
        pend = np.arange(p.created_min, p.scheduled_min if p.scheduled_min >= 0 else p.end_min)
        run = np.arange(p.scheduled_min, p.end_min) if p.scheduled_min >= 0 else np.arange(0)
        base = {**KSM, "namespace": p.namespace, "pod": p.name}
        tp, = clip(pend)
        b.add(sg.KSM_POD_PHASE, {**base, "phase": "Pending"}, tp, np.ones(len(tp)))
        tr_, = clip(run)
        if not len(tr_):
            continue
        node = node_of[p.gpu]
        b.add(sg.KSM_POD_PHASE, {**base, "phase": "Running"}, tr_, np.ones(len(tr_)))
        b.add(sg.KSM_POD_INFO, {**base, "node": node, "created_by_kind": p.created_by_kind,
                                "created_by_name": p.created_by_name, "priority_class": p.priority_class},
              tr_, np.ones(len(tr_)))
        b.add(sg.KSM_POD_GPU_REQUEST, {**base, "container": p.container, "node": node, "resource": p.resource,
                                       "unit": "integer"}, tr_, np.full(len(tr_), float(len(p.gpus))))
    for s in sc.services:
        t_all = np.arange(lo, hi)
        hpa = {**KSM, "horizontalpodautoscaler": s.name, "namespace": s.namespace}
        b.add(sg.KSM_HPA_DESIRED, hpa, t_all, pool.desired[s.name][lo:hi].astype(np.float64))
        b.add(sg.KSM_HPA_CURRENT, hpa, t_all, pool.current[s.name][lo:hi].astype(np.float64))
        b.add(sg.KSM_DEPLOY_READY, {**KSM, "deployment": s.name, "namespace": s.namespace}, t_all,
              pool.ready[s.name][lo:hi].astype(np.float64))

    # --- Kueue ------------------------------------------------------------------------------------
    t_all = np.arange(lo, hi)
    q = {**KUEUE, "cluster_queue": sc.batch.queue}
    b.add(sg.KUEUE_PENDING, {**q, "status": "active"}, t_all, pool.kueue_pending[lo:hi].astype(np.float64))
    b.add(sg.KUEUE_ADMITTED_ACTIVE, q, t_all, pool.kueue_active[lo:hi].astype(np.float64))
    b.add(sg.KUEUE_ADMITTED, q, t_all, pool.kueue_admitted_total[lo:hi].astype(np.float64))
    b.add(sg.KUEUE_EVICTED, {**q, "reason": "Preempted"}, t_all, np.zeros(len(t_all)))
    if b.pending or chunk_samples is None:
        yield b.take(res.start_ms, step_ms)
