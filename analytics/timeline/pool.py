"""The pool timeline: per pool and step, the GPUs in it and who held them.

GPU counting (DESIGN.md "Contracts"): a GPU is its UUID; a MIG instance ``(UUID, GPU_I_ID)``
counts as compute slices / 7 of it (the slices no instance uses are idle); pods sharing a
device at the same scrape (time-slicing, fractions) split it equally. A device with no pod
label is, where kube-state-metrics covers its node, ``idle`` up to the node's unrequested GPUs
(or MIG slices of that profile) and ``unknown`` beyond; elsewhere, from an exporter in
Kubernetes mode (it labels pods on some GPU), ``idle`` when its activity and memory say nobody
uses it and ``unmanaged`` when they say somebody does; from an exporter that never labels pods,
``unknown`` (:func:`class_rules` says which rule applied). Per step and pool the classes add
up to ``gpus_total``.
"""

from __future__ import annotations

import re

import polars as pl

from analytics import signals as sg
from analytics.errors import ConfigError
from analytics.sql import timeline as q
from analytics.store import Store
from analytics.timeline.config import CLASS_COLUMNS, TimelineConfig
from analytics.timeline.counters import register_temp, step_range
from analytics.timeline.from_rules import recorded_pass
from analytics.timeline.service import autoscaler_by_pool
from analytics.workloads import WorkloadMap, classify_pods, pool_of_host

DEVICE_KIND = {sg.DCGM_GR_ENGINE_ACTIVE: q.KIND_GR_ACTIVE, sg.DCGM_GPU_UTIL: q.KIND_UTIL,
               sg.DCGM_FB_USED: q.KIND_FB_USED, sg.DCGM_POWER: q.KIND_OTHER}
# the NVIDIA device plugin's time-sliced resource with renameByDefault (nvidia.com/gpu.shared)
SHARED_RESOURCE = "nvidia_com_gpu_shared"
# GPU classes, in the order every chart stacks them (bottom to top) and every legend lists them.
_SLICES = re.compile(r"(\d+)g\.")


def mig_slices_total(model: str | None) -> int:
    """Compute slices of a MIG-capable GPU: 4 on an A30, 7 on A100/H100/H200/B200."""
    return 4 if model and "A30" in model.upper() else 7


def mig_fraction(profile: str | None, model: str | None = None) -> float:
    """Share of a GPU a MIG instance is: its compute slices over the GPU's.

    >>> round(mig_fraction("3g.40gb"), 4), mig_fraction(None), round(mig_fraction("1g.10gb+me"), 4)
    (0.4286, 1.0, 0.1429)
    """
    if not profile:
        return 1.0
    m = _SLICES.search(profile)
    if not m:
        return 1.0
    return min(1.0, int(m.group(1)) / mig_slices_total(model))


def mig_resource(profile: str | None) -> str:
    """The kube-state-metrics resource name a device is requested as.

    >>> mig_resource("3g.40gb"), mig_resource(None)
    ('nvidia_com_mig_3g_40gb', 'nvidia_com_gpu')
    """
    if not profile:
        return sg.KSM_GPU_RESOURCE
    return "nvidia_com_mig_" + re.sub(r"[.\-+]", "_", profile)


def gpu_key() -> pl.Expr:
    """What one GPU is among device series (``uuid``, ``hostname``, ``gpu`` columns), as ``gpu_key``:
    its UUID, else its host and index as a pair, compared field by field and never joined into
    one text (host ``a/b`` GPU ``c`` and host ``a`` GPU ``b/c`` were both ``a/b/c``, one GPU; a UUID
    ``n/0``, as a mapping's ``[device]`` writes, was host ``n`` GPU ``0``; a missing host was host ``?``).
    """
    no_uuid = pl.col("uuid").is_null()
    return pl.struct(pl.col("uuid"), pl.when(no_uuid).then(pl.col("hostname")).alias("hostname"),
                     pl.when(no_uuid).then(pl.col("gpu")).alias("gpu")).alias("gpu_key")


def _prepare(store: Store, wmap: WorkloadMap,
             classified: pl.DataFrame | None = None) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame] | None:
    """Resolve device series to instances and holders; register ``tl_*`` temp tables.

    ``classified``: :func:`analytics.workloads.classify_pods` output when the caller has it.
    Returns ``(pods, dev_series, inst)``: the holder table (for callers needing names) and what
    ``tl_dev_series`` and ``tl_inst`` hold; ``None`` without device series.
    """
    dev = store.query(q.DEVICE_SERIES, {"metrics": list(DEVICE_KIND)})
    if dev.height == 0:
        return None
    dev = exporter_labels(dev)
    dev = dev.with_columns(
        gpu_key(),
        pl.col("mig_id").fill_null("").alias("mig_key"),
        pl.col("metric").replace_strict(DEVICE_KIND, default=q.KIND_OTHER, return_dtype=pl.Int8).alias("kind"))
    inst = (dev.group_by("gpu_key", "mig_key")
            .agg(pl.col("hostname").drop_nulls().first(), pl.col("model").drop_nulls().first(),
                 pl.col("mig_profile").drop_nulls().first(), pl.col("k8s").any())
            .sort("gpu_key", "mig_key")
            .with_row_index("inst_id")
            .with_columns(pl.col("inst_id").cast(pl.Int64)))
    hosts = inst["hostname"].unique().to_list()
    host_pool = {h: pool_of_host(wmap, h) for h in hosts}
    inst = inst.with_columns(
        pl.col("hostname").replace_strict(host_pool, default=wmap.default_pool, return_dtype=pl.Utf8).alias("pool"),
        pl.struct("mig_profile", "model").map_elements(
            lambda r: mig_fraction(r["mig_profile"], r["model"]), return_dtype=pl.Float64).alias("frac"),
        pl.col("mig_profile").map_elements(mig_resource, return_dtype=pl.Utf8, skip_nulls=False).alias("resource"))
    gpu_ids = inst.select("gpu_key").unique().sort("gpu_key").with_row_index("gpu_id").with_columns(
        pl.col("gpu_id").cast(pl.Int64))
    inst = inst.join(gpu_ids, on="gpu_key")
    gpus = (inst.group_by("gpu_id")
            .agg(pl.col("pool").first(), pl.col("mig_profile").is_not_null().any().alias("is_mig"),
                 pl.col("frac").sum().alias("used"))
            .with_columns(pl.when(pl.col("is_mig")).then((1.0 - pl.col("used")).clip(0.0, 1.0))
                          .otherwise(0.0).alias("leftover")))

    pods = classify_pods(store, wmap) if classified is None else classified
    pods = pods.with_row_index("holder_id").with_columns(pl.col("holder_id").cast(pl.Int64))
    if pods.height >= q.HOLDER_KEY - 1:
        raise ConfigError(f"{pods.height} pods: more than the pool timeline can tell apart ({q.HOLDER_KEY - 2}); "
                          "narrow the store to fewer pods (a shorter range or fewer sources)")
    dev = (dev.join(inst.select("gpu_key", "mig_key", "inst_id"), on=["gpu_key", "mig_key"])
           .join(pods.select("namespace", "pod", "holder_id"), on=["namespace", "pod"], how="left",
                 nulls_equal=True))
    # a pod label without a namespace still names a holder; one without a pod label never does
    dev = dev.with_columns(pl.when(pl.col("pod").is_null()).then(None).otherwise(pl.col("holder_id"))
                           .alias("holder_id"))
    dev_series = dev.select("series_id", "inst_id", "holder_id", "kind")
    register_temp(store, "tl_dev_series", dev_series)
    register_temp(store, "tl_inst", inst.select("inst_id", "gpu_id", "hostname", "pool", "frac", "resource", "k8s"))
    register_temp(store, "tl_gpu", gpus.select("gpu_id", "pool", "leftover"))
    register_temp(store, "tl_holder", pods.select("holder_id", "namespace", "pod", "workload", "cls", "team", "pool"))
    return pods, dev_series, inst


def exporter_labels(dev: pl.DataFrame) -> pl.DataFrame:
    """Device series with the holder labels their exporter really wrote, and its Kubernetes mode.

    An exporter deployment is the series' ``job`` label (the whole store where there is none).
    Behind a ServiceMonitor without ``honorLabels`` the holder moved to ``exported_pod`` and the
    plain ``pod`` is the exporter's own: where a deployment writes ``exported_pod`` anywhere, a
    series without it has no holder (an idle GPU there carries only the exporter's pod).
    ``k8s``: the deployment labels pods on some GPU somewhere in the store, so a GPU of it
    without a pod label is not allocated to a pod (dcgm-exporter's Kubernetes mode).
    """
    job = pl.col("job").fill_null("")
    dev = dev.with_columns(
        pl.when(pl.col("has_exported_pod").any().over(job) & ~pl.col("has_exported_pod"))
        .then(None).otherwise(pl.col("pod")).alias("pod"),
        pl.when(pl.col("has_exported_pod").any().over(job) & ~pl.col("has_exported_pod"))
        .then(None).otherwise(pl.col("namespace")).alias("namespace"))
    return dev.with_columns(pl.col("pod").is_not_null().any().over(job).alias("k8s"))


def class_rules(store: Store) -> pl.DataFrame:
    """How each exporter deployment's GPUs without a pod label are classed (DESIGN.md "GPU counting").

    Returns ``job, gpus, unlabelled_gpus, kubernetes_mode, ksm_nodes, rule, short``: ``gpus`` the
    exporter's GPUs, ``unlabelled_gpus`` those with a series without a pod label; ``ksm_nodes`` counts the nodes
    kube-state-metrics reports allocatable GPUs for (there, requests decide idle vs unknown);
    ``rule`` says in words what decides for the rest.
    """
    schema = {"job": pl.Utf8, "gpus": pl.Int64, "unlabelled_gpus": pl.Int64, "kubernetes_mode": pl.Boolean,
              "ksm_nodes": pl.Int64, "rule": pl.Utf8, "short": pl.Utf8}
    dev = store.query(q.DEVICE_SERIES, {"metrics": list(DEVICE_KIND)})
    if dev.height == 0:
        return pl.DataFrame(schema=schema)
    dev = exporter_labels(dev).with_columns(gpu_key())
    alloc = store.query(q.SERIES_OF_METRICS, {"metrics": [sg.KSM_NODE_GPU_ALLOCATABLE]})
    ksm_hosts = set(alloc["hostname"].drop_nulls().to_list()) if alloc.height else set()
    rows = []
    for (job,), g in dev.group_by(["job"], maintain_order=True):
        k8s = bool(g["k8s"].any())
        hosts = set(g["hostname"].drop_nulls().to_list())
        n_ksm = len(hosts & ksm_hosts)
        rule, short = unlabelled_gpu_rule(k8s, n_ksm, len(hosts))
        # The exporter's GPUs, and those with a series without a pod label (the rule's subject:
        # `signals` said 14 "GPUs without a pod label" of a store where every GPU had one).
        rows.append({"job": job, "gpus": g["gpu_key"].n_unique(),
                     "unlabelled_gpus": g.filter(pl.col("pod").is_null())["gpu_key"].n_unique(),
                     "kubernetes_mode": k8s, "ksm_nodes": n_ksm, "rule": rule, "short": short})
    return pl.DataFrame(rows, schema=schema).sort("job", nulls_last=True)


def unlabelled_gpu_rule(kubernetes_mode: bool, ksm_nodes: int, nodes: int) -> tuple[str, str]:
    """How an exporter's GPUs without a pod label are counted, in words: the full sentence
    (``tidelens classify``, the Data page) and its short form (the Overview's caption), one
    wording for both. ``ksm_nodes`` of the exporter's ``nodes`` have kube-state-metrics.

    >>> unlabelled_gpu_rule(True, 2, 4)[1]
    'idle or unknown by kube-state-metrics requests where it covers the node, else idle or unmanaged by activity and memory'
    """
    if ksm_nodes and ksm_nodes == nodes:
        return ("kube-state-metrics requests: unrequested GPUs idle, requested ones without a pod label "
                "unknown", "idle or unknown by kube-state-metrics requests")
    if kubernetes_mode:
        covered = (", and kube-state-metrics requests on the nodes it covers: unrequested GPUs idle, "
                   "requested ones unknown") if ksm_nodes else ""
        return ("Kubernetes mode (pod labels seen on this exporter): a GPU without a pod label is idle "
                "when its activity and memory are under the map's thresholds, unmanaged (used outside "
                "Kubernetes) when above" + covered,
                ("idle or unknown by kube-state-metrics requests where it covers the node, else " if ksm_nodes
                 else "") + "idle or unmanaged by activity and memory"
                + ("" if ksm_nodes else " (no kube-state-metrics)"))
    covered = (", but kube-state-metrics requests on the nodes it covers: unrequested GPUs idle, "
               "requested ones unknown") if ksm_nodes else ""
    return ("this exporter never labels pods: its GPUs are unknown (counted neither free nor held)" + covered,
            ("idle or unknown by kube-state-metrics requests where it covers the node, else unknown"
             if ksm_nodes else "unknown (this exporter never labels pods, and no kube-state-metrics)"))


def _ts(col: str = "ts_end_ms") -> pl.Expr:
    return pl.col(col).cast(pl.Datetime("ms")).dt.replace_time_zone("UTC").alias("ts")


def _run_instance_steps(store: Store, params: dict[str, int]) -> None:
    """``tl_dev_step``, ``tl_dev_inst`` and ``tl_dev_hold`` over the steps of ``params``."""
    store.con.execute(q.DEVICE_STEPS, params).fetchall()
    store.con.execute(q.DEVICE_INST_STEPS, {"step_ms": params["step_ms"]}).fetchall()
    store.con.execute(q.DEVICE_HOLDERS, {"step_ms": params["step_ms"]}).fetchall()


def _run_timesliced(store: Store) -> None:
    store.con.execute(q.TIMESLICED_RESOURCE, {"shared": SHARED_RESOURCE, "whole": sg.KSM_GPU_RESOURCE,
                                              "alloc_metric": sg.KSM_NODE_GPU_ALLOCATABLE}).fetchall()


def _run_ksm_free(store: Store, params: dict[str, int]) -> None:
    store.con.execute(q.KSM_FREE, {**params, "alloc_metric": sg.KSM_NODE_GPU_ALLOCATABLE,
                                   "req_metric": sg.KSM_POD_GPU_REQUEST,
                                   "phase_metric": sg.KSM_POD_PHASE}).fetchall()


# Instance-steps per window of the device pass. Its per-(instance, holder, step) temp tables grow
# with GPUs x steps: 90 days x 512 GPUs at 1-minute steps is ~67M of them, 17.8 GB of peak memory
# and minutes of hash aggregation in one go. Windows of ~4M (17 there) measured best: 94 CPU-s and
# 3.1 GB peak for that store's timelines, against 98 CPU-s / 4.8 GB at 8M and 112 / 2.0 at 1M.
# The default sample (21 days x 64 GPUs, ~2M) stays one window.
WINDOW_INST_STEPS = 4_000_000


def _windows(params: dict[str, int], n_inst: int) -> list[dict[str, int]]:
    """The range of ``params`` cut at step boundaries into windows of about
    :data:`WINDOW_INST_STEPS` instance-steps (one window when it is smaller)."""
    step_ms, lo_ms, hi_ms = params["step_ms"], params["lo_ms"], params["hi_ms"]
    n_steps = max(1, (hi_ms - lo_ms) // step_ms)
    per = max(1, WINDOW_INST_STEPS // max(n_inst, 1))
    if per >= n_steps:
        return [params]
    return [{"step_ms": step_ms, "lo_ms": lo_ms + k * step_ms, "hi_ms": min(hi_ms, lo_ms + (k + per) * step_ms)}
            for k in range(0, n_steps, per)]


def _timeslice_candidates(store: Store, inst: pl.DataFrame) -> pl.DataFrame:
    """Instances :data:`~analytics.sql.timeline.TIMESLICED_RESOURCE` may re-resource: whole GPUs
    on nodes advertising the shared resource (what its other two conditions ask)."""
    alloc = store.query(q.SERIES_OF_METRICS, {"metrics": [sg.KSM_NODE_GPU_ALLOCATABLE]})
    hosts = (alloc.filter(pl.col("labels").str.json_path_match("$.resource") == SHARED_RESOURCE)
             ["hostname"].drop_nulls().unique().to_list())
    return inst.filter((pl.col("resource") == sg.KSM_GPU_RESOURCE) & pl.col("hostname").is_in(hosts))


def _decide_timesliced(store: Store, params: dict[str, int], dev_series: pl.DataFrame,
                       inst: pl.DataFrame) -> None:
    """Re-resource the time-sliced GPUs in ``tl_inst``, deciding over the store's whole span.

    The one decision of the device pass that is not a step's own: a whole GPU on a node that
    advertises the shared resource is time-sliced if two pods ever held it at one scrape. It
    is taken on the candidate instances alone (an instance's holders do not depend on the
    others), over every sample the store has, so a GPU is counted the same way whatever range
    is viewed, and a part of a range's timelines is that range's cut to it
    (:mod:`analytics.timeline.slicing`).
    """
    cand = _timeslice_candidates(store, inst)
    if cand.height == 0:
        return
    span = step_range(store, TimelineConfig(step_s=params["step_ms"] // 1000))
    whole = _params(span) if span is not None else params
    register_temp(store, "tl_dev_series", dev_series.join(cand.select("inst_id"), on="inst_id", how="semi"))
    _run_instance_steps(store, whole)
    _run_timesliced(store)
    register_temp(store, "tl_dev_series", dev_series)


def _windowed_device_pass(store: Store, params: dict[str, int], inst: pl.DataFrame, wmap: WorkloadMap
                          ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Raw :data:`~analytics.sql.timeline.HOLDINGS` and ``POOL_DEVICE_STATS`` rows over the
    range, the device pass run window by window.

    Every statement of the pass groups by step (windows are cut at step boundaries, so each
    step lies in one window); the time-slicing decision, the one that does not, is taken
    before (:func:`_decide_timesliced`), so each window counts idle capacity in the resource
    the one-go pass would. The rows are the one-go pass's; a sum of GPU fractions may differ
    in its last bit (DuckDB adds them in another order).
    """
    held, stats = [], []
    for w in _windows(params, inst.height):
        _run_instance_steps(store, w)
        _run_ksm_free(store, w)
        held.append(store.query(q.HOLDINGS, {"idle_activity_pct": wmap.idle_activity_pct,
                                             "idle_memory_mib": wmap.idle_memory_mib}))
        stats.append(store.query(q.POOL_DEVICE_STATS))
    return pl.concat(held, how="vertical_relaxed"), pl.concat(stats, how="vertical_relaxed")


_HOLDINGS_SCHEMA = {"ts": pl.Datetime("ms", "UTC"), "pool": pl.Utf8, "cls": pl.Utf8, "team": pl.Utf8,
                    "workload": pl.Utf8, "gpus": pl.Float64}


def _holdings_frame(out: pl.DataFrame) -> pl.DataFrame:
    return out.select(_ts(), pl.col("pool"), pl.col("cls"), pl.col("team"), pl.col("workload"),
                      pl.col("gpus").cast(pl.Float64)).sort("ts", "pool", "cls", "team", "workload", nulls_last=True)


def device_pass(store: Store, params: dict[str, int], wmap: WorkloadMap,
                classified: pl.DataFrame | None = None) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame] | None:
    """The one pass over the device samples both :func:`holdings` and :func:`pool_timeline` read.

    Returns ``(pods, hold, stats)``: the classified holders, the holdings frame (what
    :func:`holdings` returns) and the per-pool activity and memory :func:`pool_frame` needs,
    or ``None`` without device series. Long ranges of many GPUs run in windows of steps (see
    :data:`WINDOW_INST_STEPS`), with the same rows. ``classified``:
    :func:`analytics.workloads.classify_pods` output when the caller has it.
    """
    prepared = _prepare(store, wmap, classified)
    if prepared is None:  # no device series: a pull through the recording rules, or nothing
        recorded = recorded_pass(store, params, wmap, classified)
        if recorded is None:
            return None
        pods, held, stats = recorded
        return pods, _holdings_frame(held), stats
    pods, dev_series, inst = prepared
    _decide_timesliced(store, params, dev_series, inst)
    held, stats = _windowed_device_pass(store, params, inst, wmap)
    return pods, _holdings_frame(held), stats


def holdings(store: Store, cfg: TimelineConfig = TimelineConfig(), wmap: WorkloadMap | None = None) -> pl.DataFrame:
    """Who held the GPUs, per step: long frame ``ts, pool, cls, team, workload, gpus``.

    ``cls`` is ``inference``, ``batch``, ``other``, ``unmanaged`` (busy, no pod label),
    ``unknown`` (no pod label, nothing to say more) or ``idle``;
    ``gpus`` is in shares of a GPU (MIG instances and time-sliced pods as fractions).
    Calling this and :func:`pool_timeline` reads the device samples twice:
    :func:`analytics.timeline.timelines` builds both from one pass.
    """
    wmap = wmap or WorkloadMap()
    rng = step_range(store, cfg)
    passed = device_pass(store, _params(rng), wmap) if rng is not None else None
    if passed is None:
        return empty_holdings()
    return passed[1]


def empty_holdings() -> pl.DataFrame:
    """A holdings frame with no rows (an empty store, or no device series)."""
    return pl.DataFrame(schema=_HOLDINGS_SCHEMA)


def _params(rng: tuple[int, int, int]) -> dict[str, int]:
    step_ms, lo_ms, hi_ms = rng
    return {"step_ms": step_ms, "lo_ms": lo_ms, "hi_ms": hi_ms}


_POOL_SCHEMA = {"ts": pl.Datetime("ms", "UTC"), "pool": pl.Utf8, "gpus_total": pl.Float64,
                **{f"gpus_{c}": pl.Float64 for c in CLASS_COLUMNS}, "activity_pct": pl.Float64,
                "mem_used_gib": pl.Float64, "pending_pods": pl.Int64, "desired_replicas": pl.Float64,
                "ready_replicas": pl.Float64}


def pool_timeline(store: Store, cfg: TimelineConfig = TimelineConfig(),
                  wmap: WorkloadMap | None = None, *, with_teams: bool = False) -> pl.DataFrame:
    """GPUs per pool and step, by class, with activity, memory and pending pods.

    Parameters
    ----------
    store, cfg, wmap:
        The store, step/range, and workload map (defaults when ``None``).
    with_teams:
        Also add one ``team_<name>`` column per team (GPUs held).

    Returns
    -------
    polars.DataFrame
        ``ts`` (end of step, UTC), ``pool``, ``gpus_total``, ``gpus_inference``, ``gpus_batch``,
        ``gpus_other``, ``gpus_unmanaged``, ``gpus_unknown``, ``gpus_idle`` (these six add up to
        ``gpus_total``),
        ``activity_pct`` (mean over the pool's GPUs), ``mem_used_gib``, ``pending_pods`` (null
        where kube-state-metrics pod phases are absent), ``desired_replicas`` /
        ``ready_replicas`` (the autoscalers of the pool's services, summed; null where absent).
    """
    wmap = wmap or WorkloadMap()
    rng = step_range(store, cfg)
    passed = device_pass(store, _params(rng), wmap) if rng is not None else None
    if passed is None:
        return empty_pool()
    pods, hold, stats = passed
    return pool_frame(store, _params(rng), pods, hold, wmap, with_teams=with_teams, stats=stats)


def empty_pool() -> pl.DataFrame:
    """A pool timeline with no rows (an empty store, or no device series)."""
    return pl.DataFrame(schema=_POOL_SCHEMA)


def pool_frame(store: Store, params: dict[str, int], pods: pl.DataFrame, hold: pl.DataFrame, wmap: WorkloadMap,
               *, with_teams: bool = False, autoscaler: pl.DataFrame | None = None,
               stats: pl.DataFrame | None = None) -> pl.DataFrame:
    """The pool timeline from a :func:`device_pass`.

    ``stats``: the pass's per-pool activity and memory (without it, read from the pass's temp
    tables, which must then still be current). ``autoscaler``:
    :func:`analytics.timeline.service.autoscaler_by_pool` output, when the caller already has it.
    """
    wide = (hold.group_by("ts", "pool", "cls").agg(pl.col("gpus").sum())
            .pivot(on="cls", index=["ts", "pool"], values="gpus"))
    for c in CLASS_COLUMNS:
        if c not in wide.columns:
            wide = wide.with_columns(pl.lit(0.0).alias(c))
    wide = wide.select("ts", "pool", *(pl.col(c).fill_null(0.0).alias(f"gpus_{c}") for c in CLASS_COLUMNS))
    wide = wide.with_columns(pl.sum_horizontal(*(f"gpus_{c}" for c in CLASS_COLUMNS)).alias("gpus_total"))
    stats = (store.query(q.POOL_DEVICE_STATS) if stats is None else stats).select(
        _ts(), "pool", pl.col("activity_pct").cast(pl.Float64), pl.col("mem_used_gib").cast(pl.Float64))
    out = wide.join(stats, on=["ts", "pool"], how="left")
    out = out.join(_pending(store, params, pods, wmap), on=["ts", "pool"], how="left")
    has_phase = store.con.execute(q.HAS_METRIC, {"metric": sg.KSM_POD_PHASE}).fetchall()[0][0] > 0
    out = out.with_columns(
        (pl.col("pending_pods").fill_null(0) if has_phase else pl.lit(None)).cast(pl.Int64).alias("pending_pods"))
    if autoscaler is None:
        autoscaler = autoscaler_by_pool(store, params, wmap)
    hpa = autoscaler.select(_ts(), "pool", "desired_replicas", "ready_replicas")
    out = out.join(hpa, on=["ts", "pool"], how="left")
    out = out.select(*(pl.col(c).cast(t) for c, t in _POOL_SCHEMA.items())).sort("ts", "pool")
    if with_teams:
        teams = (hold.filter(pl.col("team").is_not_null())
                 .group_by("ts", "pool", "team").agg(pl.col("gpus").sum())
                 .with_columns(("team_" + pl.col("team")).alias("team"))
                 .pivot(on="team", index=["ts", "pool"], values="gpus"))
        # team columns sorted by name: the pivot's order follows the group_by's, which is not stable
        team_cols = sorted(c for c in teams.columns if c.startswith("team_"))
        out = out.join(teams.select("ts", "pool", *team_cols), on=["ts", "pool"], how="left").with_columns(
            pl.col("^team_.*$").fill_null(0.0))
    return out


def _pending(store: Store, params: dict[str, int], pods: pl.DataFrame, wmap: WorkloadMap) -> pl.DataFrame:
    """Pending GPU pods per pool and step: pods that request a GPU-like resource, or whose
    workload's other pods do (kube-state-metrics may show requests only once scheduled)."""
    pend = store.query(q.PENDING_PODS, {**params, "phase_metric": sg.KSM_POD_PHASE})
    empty = pl.DataFrame(schema={"ts": pl.Datetime("ms", "UTC"), "pool": pl.Utf8, "pending_pods": pl.Int64})
    if pend.height == 0:
        return empty
    gpu_pods = store.query(q.GPU_REQUEST_PODS, {"req_metric": sg.KSM_POD_GPU_REQUEST})
    info = pods.select("namespace", "pod", "workload", "pool")
    gpu_workloads = gpu_pods.join(info, on=["namespace", "pod"], nulls_equal=True).select(
        "namespace", "workload").unique()
    pend = pend.join(info, on=["namespace", "pod"], how="left", nulls_equal=True)
    wanted = pl.concat([
        pend.join(gpu_pods, on=["namespace", "pod"], how="semi", nulls_equal=True),
        pend.join(gpu_pods, on=["namespace", "pod"], how="anti", nulls_equal=True)
            .join(gpu_workloads, on=["namespace", "workload"], how="semi", nulls_equal=True)])
    if wanted.height == 0:
        return empty
    wanted = wanted.with_columns(pl.col("pool").fill_null(wmap.default_pool))
    return wanted.group_by("ts_end_ms", "pool").agg(pl.len().cast(pl.Int64).alias("pending_pods")).select(
        _ts(), "pool", "pending_pods")
