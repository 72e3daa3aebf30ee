"""The service timeline: per inference service and step, traffic, tail latency and replicas.

Latency quantiles are Prometheus' ``histogram_quantile(q, sum by (le) (increase(bucket)))``
over the step: bucket increases (resets handled, see :mod:`analytics.timeline.counters`) summed across
the service's pods, then interpolated. The SLO histogram is the workload map's ``slo_metric``
for the service, else TTFT for vLLM, else ``http_server_request_duration_seconds``, else the
other recognised histograms; a service with only a summary (Triton's
``nv_inference_request_summary_us``) takes its quantiles from the summary, the highest over
its pods (pods' quantiles cannot be merged; the max is the conservative reading).
A series' service is its ``service`` label (``exported_service`` behind a ServiceMonitor),
else its pod's workload. HPA and Deployment series are linked to the service they scale by
:mod:`analytics.timeline.autoscaler` (names rarely agree in real clusters).

Traffic (``rps``) is the service's request-rate gauge where it has one (``request_rate``, a QPS
gauge loaded through a mapping: the names :data:`analytics.sql.rhythm.RATE_METRICS` reads; its
pods' last values summed per step), else its request log's rows per second, else the requests
that arrived: the more of its histogram's count and its finished requests (vLLM's
``request_success_total`` over every ``finished_reason``). A request its client gave up on before
its first token is in the second (``finished_reason="abort"``) and never in a TTFT histogram, so
while replicas are overloaded the histogram counts what was served (capped by capacity) and the
finished requests what was asked: a surge into a starved pool is seen whole, not flattened at the
replicas' capacity. A rate gauge without a ``service`` label belongs to the service whose request
log names its pod. :func:`traffic_source_notes` says which services' traffic came from a gauge.
"""

from __future__ import annotations

import math
from typing import Sequence

import polars as pl

from analytics import signals as sg
from analytics.sql import requests as rq
from analytics.sql import rhythm as rhq
from analytics.sql import timeline as q
from analytics.store import Store
from analytics.timeline.autoscaler import Hpa, Link, ServiceTargets, link_deployments, link_hpas, links_frame
from analytics.timeline.config import TimelineConfig
from analytics.timeline.counters import histogram_quantiles, increase_by_group, register_temp, step_end, step_range
from analytics.workloads import WorkloadMap, classify, classify_pods, pool_of_host, workload_of_pod

# Latency histograms in order of preference for a service's SLO metric.
SLO_PREFERENCE: tuple[str, ...] = (sg.VLLM_TTFT, sg.HTTP_DURATION, sg.TGI_DURATION, sg.KSERVE_DURATION,
                                   sg.VLLM_E2E)
# Summaries (per-pod quantiles, ``quantile`` label): used where a service has no histogram.
SUMMARY_METRICS: tuple[str, ...] = (sg.TRITON_SUMMARY_US,)
QUANTILES: dict[str, float] = {"p50_ms": 0.50, "p95_ms": 0.95, "p99_ms": 0.99}
GAUGES: dict[str, str] = {sg.VLLM_RUNNING: "running", sg.VLLM_WAITING: "waiting",
                          sg.KSM_HPA_DESIRED: "desired_replicas", sg.KSM_DEPLOY_READY: "ready_replicas"}
RATE = "rate"  # the role of a request-rate gauge: requests per second already, summed over pods
FINISHED = "finished"  # the role of a counter of finished requests (every finished_reason, aborts too)
ROLES: list[str] = [*GAUGES.values(), RATE, "replicas", *(f"summary_{c}" for c in QUANTILES)]

SERVICE_SCHEMA = {"ts": pl.Datetime("ms", "UTC"), "service": pl.Utf8, "pool": pl.Utf8, "rps": pl.Float64,
                  "p50_ms": pl.Float64, "p95_ms": pl.Float64, "p99_ms": pl.Float64, "replicas": pl.Int64,
                  "desired_replicas": pl.Float64, "ready_replicas": pl.Float64, "running": pl.Float64,
                  "waiting": pl.Float64, "slo_metric": pl.Utf8, "error_rps": pl.Float64}
# What slo_metric says on a step whose traffic and latency came from the service's request log.
LOG_TTFT = "requests.ttft_ms"
LOG_LATENCY = "requests.latency_ms"
SERVICES_SCHEMA = {"service": pl.Utf8, "service_id": pl.Int64, "namespace": pl.Utf8, "slo_metric": pl.Utf8,
                   "pool": pl.Utf8, "log_metric": pl.Utf8, "log_first_ms": pl.Int64, "log_last_ms": pl.Int64}


def ms_per_unit(metric: str) -> float:
    """Milliseconds per unit of a latency metric, from its name's unit suffix (seconds by default).

    >>> ms_per_unit("http_server_request_duration_seconds"), ms_per_unit("x_us"), ms_per_unit("tgi_request_duration")
    (1000.0, 0.001, 1000.0)
    """
    if metric.endswith("_ms") or metric.endswith("_milliseconds"):
        return 1.0
    if metric.endswith("_us") or metric.endswith("_microseconds"):
        return 0.001
    return 1000.0


def _histogram_metrics() -> list[str]:
    return [*(f"{h}{suffix}" for h in SLO_PREFERENCE for suffix in ("_bucket", "_count")),
            *SUMMARY_METRICS, *(f"{m}_count" for m in SUMMARY_METRICS)]


def _autoscaler_series_links(s: pl.DataFrame, lat: pl.DataFrame, wmap: WorkloadMap,
                             logged: Sequence[tuple[str, str | None]] = ()) -> tuple[list[Link], list[Link]]:
    """HPA and Deployment links (:mod:`analytics.timeline.autoscaler`) from the series frame."""
    by_service = lat.group_by("service").agg(pl.col("_workload").drop_nulls().unique(),
                                              pl.col("namespace").drop_nulls().mode().first())
    targets = [ServiceTargets(r["service"], r["namespace"], tuple(sorted({r["service"], *r["_workload"]})))
               for r in by_service.sort("service").iter_rows(named=True)]
    # a service known only from its request log is scaled by an autoscaler too
    known = {t.service for t in targets}
    targets += [ServiceTargets(name, ns, (name,)) for name, ns in logged if name not in known]
    targets.sort(key=lambda t: t.service)
    hpa_rows = s.filter(pl.col("hpa").is_not_null() & pl.col("metric").is_in([sg.KSM_HPA_DESIRED, sg.KSM_HPA_INFO]))
    info = (hpa_rows.filter(pl.col("metric") == sg.KSM_HPA_INFO).group_by("namespace", "hpa")
            .agg(pl.col("target_kind").drop_nulls().first(), pl.col("target_name").drop_nulls().first()))
    known = {(r["namespace"], r["hpa"]): (r["target_kind"], r["target_name"]) for r in info.iter_rows(named=True)}
    hpas = [Hpa(ns, name, *known.get((ns, name), (None, None)))
            for ns, name in hpa_rows.select("namespace", "hpa").unique().sort("namespace", "hpa", nulls_last=True).iter_rows()]
    hpa_links = link_hpas(hpas, targets, wmap.autoscalers)
    deps = (s.filter(pl.col("deployment").is_not_null()
                     & pl.col("metric").is_in([sg.KSM_DEPLOY_READY, sg.KSM_DEPLOY_AVAILABLE]))
            .select("namespace", "deployment").unique().sort("namespace", "deployment", nulls_last=True))
    return hpa_links, link_deployments(list(deps.iter_rows()), targets, hpa_links)


def _resolve(store: Store, wmap: WorkloadMap,
             logs: pl.DataFrame | None = None) -> tuple[pl.DataFrame, pl.DataFrame, list[Link]] | None:
    """Every candidate series with its role and service, the latency series, and the autoscaler links."""

    rates = store.query(rhq.RATE_METRICS)["metric"].to_list()
    metrics = [*_histogram_metrics(), *GAUGES, sg.KSM_HPA_INFO, sg.KSM_DEPLOY_AVAILABLE, sg.VLLM_SUCCESS, *rates]
    s = store.query(q.SERVICE_SERIES, {"metrics": metrics})
    if s.height == 0:
        return None
    logs = request_log_services(store) if logs is None else logs
    # a rate gauge of a pod (a QPS table has no service column): the service whose log names the pod
    by_pod = {p: svc for svc, pods in (_request_pods(store) if logs.height else {}).items() for _, p in pods}
    workloads = {p: workload_of_pod(p) for p in s["pod"].drop_nulls().unique().to_list()}
    s = s.with_columns(
        pl.col("pod").replace_strict(workloads, default=None, return_dtype=pl.Utf8).alias("_workload"),
        pl.concat_str(pl.col("namespace").fill_null(""), pl.lit("/"), pl.col("pod").fill_null("")).alias("pod_key"),
        pl.col("le").cast(pl.Float64, strict=False),
        pl.when(pl.col("metric").is_in(rates)).then(pl.lit(RATE))
        .when(pl.col("metric") == sg.VLLM_SUCCESS).then(pl.lit(FINISHED))
        .when(pl.col("metric").str.ends_with("_bucket")).then(pl.lit("bucket"))
        .when(pl.col("quantile").is_not_null() & pl.col("metric").is_in(SUMMARY_METRICS)).then(pl.lit("summary"))
        .when(pl.col("metric").str.ends_with("_count")).then(pl.lit("count"))
        .otherwise(pl.col("metric").replace_strict(GAUGES, default=None)).alias("role"),
        pl.col("metric").str.replace(r"_(bucket|count)$", "").alias("base"))
    s = s.with_columns(pl.when(pl.col("hpa").is_null() & pl.col("deployment").is_null())
                       .then(pl.coalesce("service_label", pl.when(pl.col("role") == RATE).then(
                           pl.col("pod").replace_strict(by_pod, default=None, return_dtype=pl.Utf8)),
                           "_workload", "model_name")).alias("service"))
    lat = s.filter(pl.col("role").is_in(["bucket", "count", "summary"]) & pl.col("service").is_not_null())
    logged = [(r[0], r[1]) for r in logs.select("service", "namespace").iter_rows()]
    hpa_links, dep_links = _autoscaler_series_links(s, lat, wmap, logged)
    hpa_to = {(x.namespace, x.name): x.service for x in hpa_links if x.status == "linked"}
    dep_to = {(x.namespace, x.name): x.service for x in dep_links if x.status == "linked"}
    # a Deployment's ready replicas; _available where it reports no _ready
    has_ready = {(r[0], r[1]) for r in s.filter(pl.col("metric") == sg.KSM_DEPLOY_READY)
                 .select("namespace", "deployment").iter_rows()}
    s = s.with_columns(
        pl.when(pl.col("metric") == sg.KSM_HPA_DESIRED)
        .then(pl.struct("namespace", "hpa").map_elements(lambda r: hpa_to.get((r["namespace"], r["hpa"])),
                                                         return_dtype=pl.Utf8))
        .when(pl.col("metric").is_in([sg.KSM_DEPLOY_READY, sg.KSM_DEPLOY_AVAILABLE]))
        .then(pl.struct("namespace", "deployment").map_elements(
            lambda r: dep_to.get((r["namespace"], r["deployment"])), return_dtype=pl.Utf8))
        .otherwise(pl.col("service")).alias("service"),
        pl.when((pl.col("metric") == sg.KSM_DEPLOY_AVAILABLE)
                & ~pl.struct("namespace", "deployment").map_elements(
                    lambda r: (r["namespace"], r["deployment"]) in has_ready, return_dtype=pl.Boolean))
        .then(pl.lit("ready_replicas")).otherwise(pl.col("role")).alias("role"))
    s = s.filter(pl.col("service").is_not_null() & pl.col("role").is_not_null())
    return s, lat, [*hpa_links, *dep_links]


def autoscaler_links(store: Store, wmap: WorkloadMap | None = None) -> pl.DataFrame:
    """Each HPA and Deployment of the store, the service it was linked to and the rule that did it.

    Returns
    -------
    polars.DataFrame
        ``kind`` (hpa / deployment), ``namespace``, ``name``, ``service`` (null unless linked),
        ``target`` (the HPA's scale target where ``_info`` names it), ``rule``, ``status``
        (linked / ambiguous / unlinked), ``note`` (why, and what to do).
    """
    resolved = _resolve(store, wmap or WorkloadMap())
    return links_frame(resolved[2] if resolved else [])


def service_series(store: Store, wmap: WorkloadMap,
                   classified: pl.DataFrame | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Series of every service, and one row per service with its SLO metric and pool.

    ``classified``: :func:`analytics.workloads.classify_pods` output when the caller has it.
    Autoscaler series are linked to their service by :mod:`analytics.timeline.autoscaler`.

    Returns ``(series, services)``: ``series`` has ``series_id, metric, base, service, pod_key,
    le`` (float), ``quantile``, ``role`` (bucket / count / summary / a gauge name); ``services`` has ``service,
    service_id, namespace, slo_metric`` (the histogram, null for a service known only from its request
    log or its request-rate gauge), ``pool``, ``log_metric`` (:data:`LOG_TTFT` / :data:`LOG_LATENCY` where the service has a request
    log, else null) and ``log_first_ms, log_last_ms`` (the log's span).
    """
    series_schema = {"series_id": pl.Int64, "metric": pl.Utf8, "base": pl.Utf8, "service": pl.Utf8,
                     "pod_key": pl.Utf8, "le": pl.Float64, "quantile": pl.Utf8, "role": pl.Utf8}
    logs = request_log_services(store)
    resolved = _resolve(store, wmap, logs)
    s, lat = (resolved[0], resolved[1]) if resolved is not None else (None, None)
    # a service known only from its request-rate gauge (a QPS table with a service column): its
    # traffic is real, its latency unknown (p50/p95/p99 null), never made up
    gauged = (s.filter((pl.col("role") == RATE) & pl.col("service").is_not_null())
              .group_by("service").agg(pl.col("namespace").drop_nulls().mode().first())
              if s is not None else pl.DataFrame(schema={"service": pl.Utf8, "namespace": pl.Utf8}))
    if (lat is None or lat.height == 0) and logs.height == 0 and gauged.height == 0:
        return pl.DataFrame(schema=series_schema), pl.DataFrame(schema=SERVICES_SCHEMA)
    present = (lat.group_by("service").agg(pl.col("base").unique(), pl.col("namespace").drop_nulls().mode().first())
               if lat is not None and lat.height else pl.DataFrame(schema={"service": pl.Utf8, "base": pl.List(pl.Utf8),
                                                                           "namespace": pl.Utf8}))
    log_by = {r["service"]: r for r in logs.iter_rows(named=True)}
    hist_by = {r["service"]: r for r in present.iter_rows(named=True)}
    gauge_by = {r["service"]: r for r in gauged.iter_rows(named=True)}
    names = sorted({*hist_by, *log_by, *gauge_by})
    pods = classify_pods(store, wmap) if classified is None else classified
    host_by_pod = {(r["namespace"], r["pod"]): r["hostname"] for r in pods.iter_rows(named=True)}
    host_by_name = {r["pod"]: r["hostname"] for r in pods.iter_rows(named=True)}
    log_pods = _request_pods(store) if logs.height else {}
    rows = []
    for name in names:
        h, lg = hist_by.get(name), log_by.get(name)
        g = gauge_by.get(name)
        namespace = (h["namespace"] if h and h["namespace"] else lg["namespace"] if lg
                     else g["namespace"] if g else None)
        d = classify(wmap, {"namespace": namespace, "workload": name, "service": name})
        bases = set(h["base"]) if h else set()
        slo = d.slo_metric if d.slo_metric in bases else next(
            (m for m in (*SLO_PREFERENCE, *SUMMARY_METRICS) if m in bases), None)
        pool = d.pool
        if not any(rule.pool is not None and rule.matches({"namespace": namespace, "workload": name,
                                                           "service": name}) for rule in wmap.rules):
            # no rule placed the service: the pool its pods' nodes are in (most pods win)
            hosts = []
            if h:
                svc_pods = lat.filter(pl.col("service") == name).select("namespace", "pod").unique()
                hosts = [host_by_pod.get((ns, p)) for ns, p in svc_pods.iter_rows()]
            hosts += [host_by_pod.get((ns, p), host_by_name.get(p)) for ns, p in log_pods.get(name, ())]
            if not h and not lg and s is not None:  # the gauge's pods' nodes
                gauge_pods = s.filter((pl.col("service") == name) & (pl.col("role") == RATE)).select("namespace", "pod")
                hosts += [host_by_pod.get((ns, p), host_by_name.get(p)) for ns, p in gauge_pods.unique().iter_rows()]
            pools = [pool_of_host(wmap, x) for x in hosts if x]
            if pools:
                pool = max(sorted(set(pools)), key=pools.count)
        log_metric = _log_metric(lg, d.slo_metric, slo) if lg else None
        rows.append({"service": name, "service_id": names.index(name), "namespace": namespace,
                     "slo_metric": slo, "pool": pool, "log_metric": log_metric,
                     "log_first_ms": lg["first_ms"] if lg else None, "log_last_ms": lg["last_ms"] if lg else None})
    services = pl.DataFrame(rows, schema=SERVICES_SCHEMA)
    if s is None:
        return pl.DataFrame(schema=series_schema), services
    s = s.filter(pl.col("service").is_in(names))
    return s.select("series_id", "metric", "base", "service", "pod_key", "le", "quantile", "role"), services


def _log_metric(log: dict, wanted: str | None, histogram: str | None) -> str:
    """Which latency of a service's request log its p50/p95/p99 are: the workload map's
    ``slo_metric`` when it names one the log has; else time to first token where the log has it
    and the service's histogram (if any) is TTFT too, as the histograms prefer; else the latency."""
    has = {LOG_TTFT: log["with_ttft"] > 0, LOG_LATENCY: log["with_latency"] > 0}
    if wanted in has and has[wanted]:
        return wanted
    if has[LOG_TTFT] and (histogram in (None, sg.VLLM_TTFT) or not has[LOG_LATENCY]):
        return LOG_TTFT
    return LOG_LATENCY


def request_log_services(store: Store) -> pl.DataFrame:
    """One row per service of the store's request logs (``analytics.sql.requests.REQUEST_SERVICES``)."""
    schema = {"service": pl.Utf8, "requests": pl.Int64, "errors": pl.Int64, "with_ttft": pl.Int64,
              "with_latency": pl.Int64, "with_pod": pl.Int64, "with_status": pl.Int64, "namespace": pl.Utf8,
              "first_ms": pl.Int64, "last_ms": pl.Int64}
    if not store.has_requests():
        return pl.DataFrame(schema=schema)
    return store.query(rq.REQUEST_SERVICES).select(*(pl.col(c).cast(t) for c, t in schema.items()))


def _request_pods(store: Store) -> dict[str, list[tuple[str | None, str]]]:
    out: dict[str, list[tuple[str | None, str]]] = {}
    for service, ns, pod in store.query(rq.REQUEST_PODS).iter_rows():
        out.setdefault(service, []).append((ns, pod))
    return out


def service_timeline(store: Store, cfg: TimelineConfig = TimelineConfig(),
                     wmap: WorkloadMap | None = None) -> pl.DataFrame:
    """Request rate, latency quantiles and replicas per service and step.

    Returns
    -------
    polars.DataFrame
        ``ts`` (end of step, UTC), ``service``, ``pool``, ``rps``, ``p50_ms``, ``p95_ms``,
        ``p99_ms`` (null in a step without requests), ``replicas`` (pods reporting the SLO
        histogram), ``desired_replicas``, ``ready_replicas``, ``running``, ``waiting`` (null
        where the signal is missing), ``slo_metric`` (the histogram the quantiles came from).
    """
    wmap = wmap or WorkloadMap()
    rng = step_range(store, cfg)
    if rng is None:
        return pl.DataFrame(schema=SERVICE_SCHEMA)
    return service_frame(store, rng, service_series(store, wmap))


def slo_increases(store: Store, rng: tuple[int, int, int], slo: pl.DataFrame,
                  series_services: tuple[pl.DataFrame, pl.DataFrame]) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Per service and step (``service_id, ts_end_ms``), what its traffic and quantiles are read
    from: the SLO histogram's bucket increases summed over its pods (with ``le``), its count's,
    and its finished requests' (vLLM's ``request_success_total`` over every ``finished_reason``),
    each in ``value``.

    ``slo``: :func:`service_series`' series of each service's SLO histogram, with ``service_id``;
    ``series_services``: :func:`service_series` output.
    """
    step_ms, lo_ms, hi_ms = rng
    series, services = series_services
    # counters: one group per (service, le) of the SLO histogram's buckets, and per service for _count
    buckets = slo.filter(pl.col("role") == "bucket").filter(pl.col("le").is_not_null())
    bucket_groups = (buckets.select("service_id", "le").unique().sort("service_id", "le")
                     .with_row_index("group_id").with_columns(pl.col("group_id").cast(pl.Int64)))
    n_b = bucket_groups.height
    n_f = n_b + services.height  # finished-request counters: one group per service after the counts
    counts = slo.filter(pl.col("role") == "count").with_columns((pl.col("service_id") + n_b).alias("group_id"))
    finished = (series.filter(pl.col("role") == FINISHED).join(services.select("service", "service_id"), on="service")
                .with_columns((pl.col("service_id") + n_f).alias("group_id")))
    groups = pl.concat([buckets.join(bucket_groups, on=["service_id", "le"]).select("series_id", "group_id"),
                        counts.select("series_id", pl.col("group_id").cast(pl.Int64)),
                        finished.select("series_id", pl.col("group_id").cast(pl.Int64))])
    inc = increase_by_group(store, groups, step_ms, lo_ms, hi_ms)
    b_inc = inc.filter(pl.col("group_id") < n_b).join(bucket_groups, on="group_id").select(
        "service_id", "ts_end_ms", "le", pl.col("increase").alias("value"))
    c_inc = inc.filter((pl.col("group_id") >= n_b) & (pl.col("group_id") < n_f)).select(
        (pl.col("group_id") - n_b).alias("service_id"), "ts_end_ms", pl.col("increase").alias("value"))
    f_inc = inc.filter(pl.col("group_id") >= n_f).select(
        (pl.col("group_id") - n_f).alias("service_id"), "ts_end_ms", pl.col("increase").alias("value"))
    return b_inc, c_inc, f_inc


def service_frame(store: Store, rng: tuple[int, int, int],
                  series_services: tuple[pl.DataFrame, pl.DataFrame]) -> pl.DataFrame:
    """The service timeline over ``rng`` (``step_ms, lo_ms, hi_ms``) from :func:`service_series` output."""
    step_ms, lo_ms, hi_ms = rng
    series, services = series_services
    if services.height == 0:
        return pl.DataFrame(schema=SERVICE_SCHEMA)
    params = {"step_ms": step_ms, "lo_ms": lo_ms, "hi_ms": hi_ms}
    slo = series.join(services.select("service", "service_id", "slo_metric"), on="service")
    slo = slo.filter(pl.col("base") == pl.col("slo_metric"))
    b_inc, counted, finished = slo_increases(store, rng, slo, series_services)
    quant = histogram_quantiles(QUANTILES, b_inc)
    total_from_inf = b_inc.filter(pl.col("le") == math.inf).select(
        "service_id", "ts_end_ms", pl.col("value").alias("_inf_total"))
    c_inc = counted.rename({"value": "_count_total"})
    f_inc = finished.rename({"value": "_finished_total"})

    # gauges: per service and role; replicas = pods reporting the SLO histogram's +Inf bucket
    gauge_series = series.filter(pl.col("role").is_in([*GAUGES.values(), RATE])).join(
        services.select("service", "service_id"), on="service")
    inf_series = slo.filter((pl.col("role") == "bucket") & (pl.col("le") == math.inf)).with_columns(
        pl.lit("replicas").alias("role"))
    # a summary service: its pods' quantile series (the max over pods, per quantile), and its
    # _count series stand in for the +Inf bucket as the pods serving
    summ = slo.filter(pl.col("role") == "summary").with_columns(
        pl.col("quantile").cast(pl.Float64, strict=False).alias("_q"))
    summ = pl.concat([summ.filter((pl.col("_q") - qv).abs() < 1e-9).with_columns(pl.lit(f"summary_{col}").alias("role"))
                      for col, qv in QUANTILES.items()])
    summ_pods = slo.filter((pl.col("role") == "count") & pl.col("base").is_in(SUMMARY_METRICS)).with_columns(
        pl.lit("replicas").alias("role"))
    roles = ROLES
    g = pl.concat([gauge_series.select("series_id", "service_id", "role", "pod_key"),
                   inf_series.select("series_id", "service_id", "role", "pod_key"),
                   summ.select("series_id", "service_id", "role", "pod_key"),
                   summ_pods.select("series_id", "service_id", "role", "pod_key")])
    g = g.with_columns((pl.col("service_id") * len(roles)
                        + pl.col("role").replace_strict({r: i for i, r in enumerate(roles)},
                                                        return_dtype=pl.Int64)).alias("group_id"))
    gauges = _gauges(store, g, params, roles)

    keys = ["service_id", "ts_end_ms"]
    out = (quant.join(total_from_inf, on=keys, how="full", coalesce=True)
           .join(c_inc, on=keys, how="full", coalesce=True)
           .join(f_inc, on=keys, how="full", coalesce=True)
           .join(gauges, on=keys, how="full", coalesce=True))
    for col in ROLES:
        if col not in out.columns:
            out = out.with_columns(pl.lit(None, dtype=pl.Float64).alias(col))
    step_s = step_ms / 1000
    unit_ms = {m: ms_per_unit(m) for m in services["slo_metric"].drop_nulls().unique().to_list()}
    out = out.join(services, on="service_id", how="left").with_columns(
        pl.col("ts_end_ms").cast(pl.Datetime("ms")).dt.replace_time_zone("UTC").alias("ts"),
        pl.coalesce("rate", pl.max_horizontal(pl.coalesce("_count_total", "_inf_total"), "_finished_total")
                    / step_s).alias("rps"),
        *(((pl.col(c).fill_nan(None).fill_null(pl.col(f"summary_{c}"))
            * pl.col("slo_metric").replace_strict(unit_ms, default=None, return_dtype=pl.Float64))).alias(c)
          for c in QUANTILES),
        pl.col("replicas").fill_null(0).cast(pl.Int64),
        pl.lit(None, dtype=pl.Float64).alias("error_rps"))
    logged = services.filter(pl.col("log_metric").is_not_null())
    if logged.height:
        out = _with_request_logs(store, rng, out, services, logged)
    return out.select(*(pl.col(c).cast(t) for c, t in SERVICE_SCHEMA.items())).sort("service", "ts")


def _with_request_logs(store: Store, rng: tuple[int, int, int], out: pl.DataFrame, services: pl.DataFrame,
                       logged: pl.DataFrame) -> pl.DataFrame:
    """``out`` with each logged service's steps, over its log's span, taken from its request log:
    request rate (every request), exact p50/p95/p99 of the successful ones, failed requests per
    second apart, and the pods serving where the log names pods. The logs win over histograms."""

    step_ms, lo_ms, hi_ms = rng
    step_s = step_ms / 1000
    ttft = logged.filter(pl.col("log_metric") == LOG_TTFT)["service"].to_list()
    raw = store.query(rq.REQUEST_STEPS, {"step_ms": step_ms, "lo_ms": lo_ms, "hi_ms": hi_ms,
                                         "ttft_services": ttft})
    grid_schema = {"service_id": pl.Int64, "ts_end_ms": pl.Int64, "_log_metric": pl.Utf8}
    parts = []
    for r in logged.iter_rows(named=True):
        ends = pl.int_range(max(step_end(step_ms, r["log_first_ms"]), lo_ms + step_ms),
                            min(step_end(step_ms, r["log_last_ms"]), hi_ms) + 1, step_ms, eager=True,
                            dtype=pl.Int64)
        parts.append(pl.DataFrame({"service_id": pl.repeat(r["service_id"], ends.len(), dtype=pl.Int64, eager=True),
                                   "ts_end_ms": ends,
                                   "_log_metric": pl.repeat(r["log_metric"], ends.len(), dtype=pl.Utf8, eager=True)},
                                  schema=grid_schema))
    grid = pl.concat(parts) if parts else pl.DataFrame(schema=grid_schema)
    steps = raw.join(logged.select("service", "service_id"), on="service").select(
        "service_id", pl.col("ts_end_ms").cast(pl.Int64), pl.col("requests").cast(pl.Int64),
        pl.col("errors").cast(pl.Int64), pl.col("pods").cast(pl.Int64),
        *(pl.col("q").cast(pl.List(pl.Float64)).list.get(i, null_on_oob=True).alias(f"_log_{c}")
          for i, c in enumerate(QUANTILES)))
    logs = grid.join(steps, on=["service_id", "ts_end_ms"], how="left").with_columns(
        (pl.col("requests").fill_null(0) / step_s).alias("_log_rps"),
        (pl.col("errors").fill_null(0) / step_s).alias("_log_error_rps"),
        pl.col("pods").fill_null(0).alias("_log_pods"))
    keys = ["service_id", "ts_end_ms"]
    merged = out.join(logs.drop("requests", "errors", "pods"), on=keys, how="full", coalesce=True)
    by_log = pl.col("_log_metric").is_not_null()
    merged = merged.drop(*(c for c in SERVICES_SCHEMA if c != "service_id"), strict=False).join(
        services.select("service_id", "service", "pool", "slo_metric"), on="service_id", how="left").with_columns(
        pl.col("ts_end_ms").cast(pl.Datetime("ms")).dt.replace_time_zone("UTC").alias("ts"),
        pl.when(by_log).then(pl.coalesce("rate", "_log_rps")).otherwise(pl.col("rps")).alias("rps"),
        *(pl.when(by_log).then(pl.col(f"_log_{c}")).otherwise(pl.col(c)).alias(c) for c in QUANTILES),
        pl.when(by_log).then(pl.col("_log_error_rps")).otherwise(pl.col("error_rps")).alias("error_rps"),
        pl.when(by_log & (pl.col("replicas").fill_null(0) == 0)).then(pl.col("_log_pods"))
        .otherwise(pl.col("replicas")).fill_null(0).cast(pl.Int64).alias("replicas"),
        pl.when(by_log).then(pl.col("_log_metric")).otherwise(pl.col("slo_metric")).alias("slo_metric"))
    return merged


def _gauges(store: Store, g: pl.DataFrame, params: dict[str, int], roles: list[str]) -> pl.DataFrame:
    if g.height == 0:
        return pl.DataFrame(schema={"service_id": pl.Int64, "ts_end_ms": pl.Int64})
    register_temp(store, "tl_gauge_series", g.select(pl.col("series_id").cast(pl.Int64),
                                                     pl.col("group_id").cast(pl.Int64),
                                                     pl.col("pod_key").rank("dense").cast(pl.Int64).alias("pod_id")))
    raw = store.query(q.GAUGE_BY_GROUP, params)
    raw = raw.with_columns((pl.col("group_id") // len(roles)).alias("service_id"),
                           (pl.col("group_id") % len(roles)).alias("_r"))
    summary_ids = [i for i, r in enumerate(roles) if r.startswith("summary_")]
    raw = raw.with_columns(pl.when(pl.col("_r") == roles.index("replicas")).then(pl.col("pods").cast(pl.Float64))
                           .when(pl.col("_r").is_in(summary_ids)).then(pl.col("max_value"))
                           .otherwise(pl.col("value")).alias("value"),
                           pl.col("_r").replace_strict(dict(enumerate(roles)), return_dtype=pl.Utf8).alias("role"))
    return raw.pivot(on="role", index=["service_id", "ts_end_ms"], values="value")


def autoscaler_by_pool(store: Store, params: dict[str, int], wmap: WorkloadMap,
                       series_services: tuple[pl.DataFrame, pl.DataFrame] | None = None) -> pl.DataFrame:
    """Desired and ready replicas summed over the services of each pool, per step.

    ``series_services``: :func:`service_series` output when the caller has it.
    Returns ``ts_end_ms, pool, desired_replicas, ready_replicas`` (empty without the signals).
    """
    series, services = series_services if series_services is not None else service_series(store, wmap)
    roles = ROLES
    g = series.filter(pl.col("role").is_in(["desired_replicas", "ready_replicas"])).join(
        services.select("service", "service_id"), on="service")
    empty = pl.DataFrame(schema={"ts_end_ms": pl.Int64, "pool": pl.Utf8, "desired_replicas": pl.Float64,
                                 "ready_replicas": pl.Float64})
    if g.height == 0:
        return empty
    g = g.with_columns((pl.col("service_id") * len(roles)
                        + pl.col("role").replace_strict({r: i for i, r in enumerate(roles)},
                                                        return_dtype=pl.Int64)).alias("group_id"))
    wide = _gauges(store, g.select("series_id", "service_id", "role", "pod_key", "group_id"), params, roles)
    for col in ("desired_replicas", "ready_replicas"):
        if col not in wide.columns:
            wide = wide.with_columns(pl.lit(None, dtype=pl.Float64).alias(col))
    return (wide.join(services.select("service_id", "pool"), on="service_id")
            .group_by("ts_end_ms", "pool")
            .agg(*(pl.when(pl.col(c).count() > 0).then(pl.col(c).sum()).alias(c)
                   for c in ("desired_replicas", "ready_replicas"))))
