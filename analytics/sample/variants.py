"""Export variants of the sample: the same story exported the way other real clusters export it.

The default sample is one "ideal" cluster: every exporter present, HPAs named after their
Deployments, one scrape a minute, UTC days. Real clusters differ, and the analyses must cope.
A variant is one such difference, named, with the real-cluster fact it imitates
(:data:`VARIANTS`):

- **export variants** change only what is exported: a function rewriting the built
  :class:`~analytics.sample.series.SeriesSet` (labels renamed, series dropped or added, scrapes
  multiplied); the simulation, and so the truth, is the default's;
- **cluster-shape variants** (``e2e-only``, ``tp2``, ``utc8``) change the cluster itself: a
  function adjusting the :class:`~analytics.sample.cluster.ScenarioConfig` before simulating (and,
  for ``e2e-only``, an export function too).

This module owns the catalogue, the validation of a combination (:func:`parse_variants`: one
canonical order, contradictions refused), and the functions themselves. ``simulate(...,
variants=...)`` applies the scenario functions; :func:`~analytics.sample.series.iter_series`
applies the export functions, so every writer and the store fast path carry them.

>>> parse_variants(["scrape-30s", "hpa-prefix", "hpa-prefix"])
('hpa-prefix', 'scrape-30s')
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, replace
from datetime import timedelta, timezone
from typing import TYPE_CHECKING, Any, Callable, Iterable

import orjson
import polars as pl

from analytics import signals as sg
from analytics.errors import ConfigError
from analytics.sample.cluster import ScenarioConfig, ServiceConfig
from analytics.sample.pool import POD_CHARS
from analytics.sample.seriesset import SeriesSet, family_type, labels_json
from analytics.times import parse_iso

if TYPE_CHECKING:  # the result type only
    from analytics.sample.result import SimResult

Transform = Callable[[SeriesSet, "SimResult"], SeriesSet]
Configure = Callable[[ScenarioConfig], ScenarioConfig]

DEFAULT_SCRAPE_S = 60
HPA_PREFIX = "kube_horizontalpodautoscaler_"
DEPLOY_PREFIX = "kube_deployment_"
DCGM_JOB = "dcgm-exporter"
KSM_JOB = "kube-state-metrics"


@dataclass(frozen=True)
class ExportVariant:
    """One way a real cluster differs from the default sample.

    Attributes
    ----------
    name:
        What ``--variant`` takes.
    help:
        The real-cluster fact it imitates, one sentence a user reads.
    changes:
        Which exported series differ from the default (docs and ``--variant list``).
    configure:
        Cluster-shape variants: adjusts the scenario before simulating.
    transform:
        Export variants: rewrites the built series of a run (one piece at a time; a piece holds
        whole series, so a transform sees each series entire).
    group:
        Variants of one group contradict each other (one HPA naming, one scrape interval).
    scrape_s:
        The export's scrape interval, seconds, when the variant changes it.
    """

    name: str
    help: str
    changes: str
    configure: Configure | None = None
    transform: Transform | None = None
    group: str = ""
    scrape_s: int | None = None


# --- helpers over a SeriesSet ---------------------------------------------------------------------

def _relabel(ss: SeriesSet, fn: Callable[[str, dict[str, str]], dict[str, str] | None]) -> SeriesSet:
    """Each series' labels through ``fn(metric, labels)``; ``None`` drops the series and its samples."""
    rows, dropped = [], []
    for skey, metric, family, lab in ss.series.select("skey", "metric", "family", "labels").iter_rows():
        new = fn(metric, orjson.loads(lab))
        if new is None:
            dropped.append(skey)
        else:
            rows.append((skey, metric, family, labels_json(new)))
    series = pl.DataFrame(rows, schema=ss.series.select("skey", "metric", "family", "labels").schema, orient="row")
    samples = ss.samples.filter(~pl.col("skey").is_in(dropped)) if dropped else ss.samples
    return SeriesSet(series=series, samples=samples)


def _drop(ss: SeriesSet, keep: pl.Expr) -> SeriesSet:
    """Only the series ``keep`` (an expression over ``metric``/``family``) selects."""
    series = ss.series.filter(keep)
    if series.height == ss.series.height:
        return ss
    return SeriesSet(series=series, samples=ss.samples.join(series.select("skey"), on="skey", how="semi"))


def _chars(*key: object, n: int = 5) -> str:
    """``n`` pod-name characters fixed by ``key`` (a seed and a name): stable across pieces and runs."""
    h = int(hashlib.sha256("/".join(map(str, key)).encode()).hexdigest(), 16)
    out = []
    for _ in range(n):
        h, i = divmod(h, len(POD_CHARS))
        out.append(POD_CHARS[i])
    return "".join(out)


# --- HPA naming ----------------------------------------------------------------------------------

def _prefix_name(deployment: str) -> str:
    """An HPA named by a prefix relation: ``chat-vllm`` -> ``chat``; ``recommender`` -> ``recommender-hpa``."""
    return deployment.rsplit("-", 1)[0] if "-" in deployment else f"{deployment}-hpa"


_UNRELATED = {"chat-vllm": "llm-frontend", "recommender": "recs-autoscaler"}
_SCALED_OBJECT = {"recommender": "recommender-so"}  # chat-vllm's ScaledObject is named like its Deployment

HPA_NAMES: dict[str, Callable[[str], str]] = {
    "hpa-prefix": _prefix_name,
    "hpa-info": lambda d: _UNRELATED.get(d, f"autoscaler-{_chars('hpa', d, n=6)}"),
    "keda": lambda d: sg.KEDA_HPA_PREFIX + _SCALED_OBJECT.get(d, d),
}


def _rename_hpa(name_of: Callable[[str], str]) -> Callable[[str, dict[str, str]], dict[str, str]]:
    def fn(metric: str, lab: dict[str, str]) -> dict[str, str]:
        if metric.startswith(HPA_PREFIX) and "horizontalpodautoscaler" in lab:
            # the simulator names each HPA after its Deployment: that name is the scale target
            lab["horizontalpodautoscaler"] = name_of(lab["horizontalpodautoscaler"])
        return lab
    return fn


def _hpa_named(variant: str) -> Transform:
    def transform(ss: SeriesSet, res: SimResult) -> SeriesSet:
        return _relabel(ss, _rename_hpa(HPA_NAMES[variant]))
    return transform


def _hpa_info(ss: SeriesSet, res: SimResult) -> SeriesSet:
    """HPAs named unrelatedly, linked to their Deployments by ``kube_horizontalpodautoscaler_info``."""
    # the info series are built from the desired-replicas series before the rename: that label
    # still names the Deployment, the scale target
    desired = ss.series.filter(pl.col("metric") == sg.KSM_HPA_DESIRED)
    ss = _relabel(ss, _rename_hpa(HPA_NAMES["hpa-info"]))
    if not desired.height:
        return ss
    base = int(ss.series["skey"].max()) + 1  # iter_series renumbers the piece afterwards
    rows, remap = [], []
    for k, (skey, lab) in enumerate(desired.select("skey", "labels").iter_rows()):
        d = orjson.loads(lab)
        target = d["horizontalpodautoscaler"]
        info = {"instance": d["instance"], "job": d["job"], "namespace": d["namespace"],
                "horizontalpodautoscaler": HPA_NAMES["hpa-info"](target),
                "scaletargetref_api_version": "apps/v1", "scaletargetref_kind": "Deployment",
                "scaletargetref_name": target}
        rows.append((base + k, sg.KSM_HPA_INFO, sg.KSM_HPA_INFO, labels_json(info)))
        remap.append((skey, base + k))
    info_series = pl.DataFrame(rows, schema=ss.series.schema, orient="row")
    m = pl.DataFrame(remap, schema={"skey": pl.Int64, "new": pl.Int64}, orient="row")
    # value 1 at every scrape of the HPA it describes (kube-state-metrics writes both each scrape)
    info_samples = (ss.samples.join(m, on="skey").select(pl.col("new").alias("skey"), "ts_ms",
                                                          pl.lit(1.0).alias("value")))
    return SeriesSet(series=pl.concat([ss.series, info_series]), samples=pl.concat([ss.samples, info_samples]))


# --- missing exporters ---------------------------------------------------------------------------------

def _no_autoscaler(ss: SeriesSet, res: SimResult) -> SeriesSet:
    m = pl.col("metric")
    return _drop(ss, ~(m.str.starts_with(HPA_PREFIX) | m.str.starts_with(DEPLOY_PREFIX)))


def _no_ksm_pods(ss: SeriesSet, res: SimResult) -> SeriesSet:
    m = pl.col("metric")
    return _drop(ss, ~(m.str.starts_with("kube_pod_") | m.str.starts_with("kube_node_")))


def _no_ttft(ss: SeriesSet, res: SimResult) -> SeriesSet:
    return _drop(ss, pl.col("family") != sg.VLLM_TTFT)


# --- ServiceMonitor without honorLabels ----------------------------------------------------------------

_EXPORTED = ("pod", "namespace", "container")
DCGM_TARGET = {"namespace": "gpu-operator", "container": "nvidia-dcgm-exporter",
               "service": "nvidia-dcgm-exporter", "endpoint": "gpu-metrics"}
KSM_TARGET = {"namespace": "monitoring", "container": "kube-state-metrics", "service": "kube-state-metrics",
              "endpoint": "http"}


def _exported_labels(ss: SeriesSet, res: SimResult) -> SeriesSet:
    """The exporter's own pod labels become ``exported_*``; the scrape target's take their place."""
    node_no = {n: i for i, n in enumerate(res.topology.nodes)}
    ksm_pod = f"kube-state-metrics-{_chars(res.seed, 'ksm-rs', n=10)}-{_chars(res.seed, 'ksm')}"

    def fn(metric: str, lab: dict[str, str]) -> dict[str, str]:
        job = lab.get("job")
        if job == DCGM_JOB:  # a DaemonSet: one exporter pod per node, on that node's pod network
            n = node_no[lab["Hostname"]]
            target = {**DCGM_TARGET, "pod": f"dcgm-exporter-{_chars(res.seed, 'dcgm', lab['Hostname'])}",
                      "instance": f"10.44.{n // 250}.{n % 250 + 2}:9400"}
        elif job == KSM_JOB:
            target = {**KSM_TARGET, "pod": ksm_pod, "instance": "10.44.255.10:8080"}
        else:  # vLLM/http pods are found by service discovery; Kueue is not behind this ServiceMonitor
            return lab
        for k in _EXPORTED:
            if k in lab:
                lab[f"exported_{k}"] = lab.pop(k)
        lab.update(target)
        return lab

    return _relabel(ss, fn)


# --- scrape interval -------------------------------------------------------------------------------------

def _rescrape(interval_s: int) -> Transform:
    """Each minute's one sample becomes ``60 / interval_s`` scrapes inside the minute's step."""
    m = DEFAULT_SCRAPE_S // interval_s
    interval_ms = interval_s * 1000

    def transform(ss: SeriesSet, res: SimResult) -> SeriesSet:
        kinds, offsets = [], []
        for metric, family, lab in ss.series.select("metric", "family", "labels").iter_rows():
            kind = family_type(family)
            kinds.append("gauge" if kind == "gauge" else ("float" if metric.endswith("_sum") else "int"))
            d = orjson.loads(lab)
            # one offset per scrape target: a target is its job and instance (node for dcgm,
            # pod for services, one each for kube-state-metrics and Kueue)
            h = hashlib.sha256(f"{res.seed}/{interval_s}/{d.get('job')}/{d.get('instance')}".encode()).hexdigest()
            offsets.append(int(h[:12], 16) % interval_ms)
        meta = ss.series.select("skey").with_columns(pl.Series("kind", kinds, pl.Utf8),
                                                     pl.Series("offset_ms", offsets, pl.Int64))
        j = pl.DataFrame({"j": list(range(m))}, schema={"j": pl.Int64})
        prev = pl.col("value").shift(1).over("skey")
        df = (ss.samples.sort(["skey", "ts_ms"]).join(meta, on="skey")
              # a series' first minute holds its value at every sub-scrape: no invented earlier samples
              .with_columns(pl.when(prev.is_null() | (prev > pl.col("value"))).then(pl.col("value"))
                            .otherwise(prev).alias("prev"))
              .join(j, how="cross"))
        frac = (pl.col("j") + 1) / m
        last = pl.col("j") == m - 1
        step = pl.col("value") - pl.col("prev")
        # integer counts are floored: buckets stay monotone in le and over time, and _count = +Inf
        as_int = pl.col("prev") + ((step.cast(pl.Int64) * (pl.col("j") + 1)) // m).cast(pl.Float64)
        as_float = (pl.col("prev") + step * frac).round(3)
        value = (pl.when((pl.col("kind") == "gauge") | last).then(pl.col("value"))
                 .when(pl.col("kind") == "int").then(as_int).otherwise(as_float))
        ts = pl.col("ts_ms") - pl.col("offset_ms") - (m - 1 - pl.col("j")) * interval_ms
        samples = df.select("skey", ts.alias("ts_ms"), value.alias("value"))
        return SeriesSet(series=ss.series, samples=samples)

    return transform


# --- cluster shapes ---------------------------------------------------------------------------------------

def _llm(sc: ScenarioConfig, fn: Callable[[ServiceConfig], ServiceConfig]) -> ScenarioConfig:
    """The scenario with ``fn`` applied to its LLM (vllm) services."""
    return replace(sc, services=tuple(fn(s) if s.kind == "vllm" else s for s in sc.services))


E2E_SLO_MS = 2500.0  # a bound of vLLM's default e2e buckets (signals.VLLM_E2E_BUCKETS_S)
E2E_DECODE_MEDIAN_S = 0.4
E2E_DECODE_SIGMA = 0.25
E2E_DECODE_SLOWDOWN = 4.0
E2E_HOLD_S = 0.48  # slot time ~ decode time, as the default calibrates it (hold 6 s, decode median 5 s)


def _e2e_only(sc: ScenarioConfig) -> ScenarioConfig:
    def short(s: ServiceConfig) -> ServiceConfig:
        # Short completions: a slot frees 10x sooner, so 10x the requests load the replicas as
        # the default's do; the pool (and so the contention story) stays the default's.
        return replace(s, slo_latency="e2e", slo_p99_ms=E2E_SLO_MS, decode_median_s=E2E_DECODE_MEDIAN_S,
                       decode_sigma=E2E_DECODE_SIGMA, decode_slowdown=E2E_DECODE_SLOWDOWN, hold_s=E2E_HOLD_S, peak_rps=round(s.peak_rps * s.hold_s / E2E_HOLD_S, 6))
    return _llm(sc, short)


def _tp2(sc: ScenarioConfig) -> ScenarioConfig:
    def tp(s: ServiceConfig) -> ServiceConfig:
        # A replica over 2 GPUs holds twice the KV cache and compute: twice the slots, half the
        # replicas for the same GPUs, so the pool's GPU demand (and the story) stays the default's.
        return replace(s, gpus_per_replica=2, concurrency=s.concurrency * 2,
                       max_replicas=math.ceil(s.max_replicas / 2))
    return _llm(sc, tp)


UTC8 = timezone(timedelta(hours=8))


def _utc8(sc: ScenarioConfig) -> ScenarioConfig:
    # the run starts at the same local wall time, in UTC+8: every minute index (and so the whole
    # local-time story) is unchanged, every UTC timestamp 8 hours earlier
    local = parse_iso(sc.start_iso).replace(tzinfo=UTC8)
    return replace(sc, start_iso=local.isoformat())


def _warmup_5_8(sc: ScenarioConfig) -> ScenarioConfig:
    # a larger model, loaded at the speed of each node's disk and network: 5 to 8 minutes a replica
    return _llm(sc, lambda s: replace(s, warmup_min=5, warmup_max_min=8))


def _surge_on_ramp(sc: ScenarioConfig) -> ScenarioConfig:
    return replace(sc, surges=replace(sc.surges, ramp_offset_min=(15.0, 20.0)))


def _hold_outlasts_surge(sc: ScenarioConfig) -> ScenarioConfig:
    # the fine-tune runs to 10:30-11:15; the surges are 1.8-2.5x for 25-40 minutes
    return replace(sc, batch=replace(sc.batch, finetune_hours=(8.5, 9.25)),
                   surges=replace(sc.surges, factor=(1.8, 2.5), minutes=(25, 40)))


# --- the catalogue -----------------------------------------------------------------------------------------

_HPA_SERIES = "kube_horizontalpodautoscaler_* (label horizontalpodautoscaler)"

VARIANTS: dict[str, ExportVariant] = {v.name: v for v in (
    ExportVariant("hpa-prefix", "HPAs are not named after their Deployments but by a name prefix: chat-vllm's "
                  "HPA is 'chat', recommender's 'recommender-hpa'.", _HPA_SERIES,
                  transform=_hpa_named("hpa-prefix"), group="HPA naming"),
    ExportVariant("hpa-info", "HPAs have unrelated names ('llm-frontend', 'recs-autoscaler'); only "
                  "kube_horizontalpodautoscaler_info's scaletargetref_name says which Deployment each scales.",
                  f"{_HPA_SERIES}; adds {sg.KSM_HPA_INFO}", transform=_hpa_info, group="HPA naming"),
    ExportVariant("keda", "HPAs are created by KEDA ScaledObjects: 'keda-hpa-chat-vllm' and "
                  "'keda-hpa-recommender-so' (ScaledObject 'recommender-so').", _HPA_SERIES,
                  transform=_hpa_named("keda"), group="HPA naming"),
    ExportVariant("no-autoscaler", "The cluster exports no HPA or Deployment metrics (no autoscaler, or "
                  "kube-state-metrics without those collectors).",
                  "drops kube_horizontalpodautoscaler_*, kube_deployment_*", transform=_no_autoscaler),
    ExportVariant("no-ksm-pods", "kube-state-metrics exports no pod or node metrics: nothing says which "
                  "unlabelled GPU is free (add no-autoscaler for no kube-state-metrics at all).",
                  "drops kube_pod_*, kube_node_*", transform=_no_ksm_pods),
    ExportVariant("exported-labels", "dcgm-exporter and kube-state-metrics are scraped through a ServiceMonitor "
                  "without honorLabels: their pod/namespace/container become exported_*, and pod/namespace/"
                  "container/service/endpoint/instance name the exporter's own pod.",
                  "every dcgm-exporter and kube-state-metrics series (labels)", transform=_exported_labels),
    ExportVariant("e2e-only", "chat-vllm exports only the end-to-end latency histogram (no TTFT) and its SLO "
                  "is p99 end-to-end latency under 2.5 s, with short completions.",
                  "drops vllm:time_to_first_token_seconds_*; chat's traffic, latency and truth SLO change",
                  configure=_e2e_only, transform=_no_ttft),
    ExportVariant("tp2", "chat-vllm replicas are tensor-parallel over 2 GPUs of one node (bound together, "
                  "released together), with twice the slots and half the max replicas.",
                  "chat pods on 2 GPUs each: dcgm pod labels, kube_pod_container_resource_requests = 2",
                  configure=_tp2),
    ExportVariant("scrape-15s", "Prometheus scrapes every 15 s: four samples a minute per series, each target "
                  "at its own offset.", "every series (4 samples a minute)", transform=_rescrape(15),
                  group="scrape interval", scrape_s=15),
    ExportVariant("scrape-30s", "Prometheus scrapes every 30 s: two samples a minute per series, each target "
                  "at its own offset.", "every series (2 samples a minute)", transform=_rescrape(30),
                  group="scrape interval", scrape_s=30),
    ExportVariant("utc8", "The cluster's day runs in UTC+8: ramp, fine-tune, weekdays and surges happen in "
                  "local time, 8 hours earlier in UTC.", "every timestamp (8 h earlier)", configure=_utc8),
    ExportVariant("warmup-5-8", "A new chat-vllm replica takes 5 to 8 minutes from its GPU being bound to serving "
                  "(a larger model loaded at each node's speed), drawn per replica.",
                  "chat pods' warm-up (dcgm memory rising, readiness later) varies", configure=_warmup_5_8),
    ExportVariant("surge-on-ramp", "Morning surges start 15 to 20 minutes after the ramp does, while the "
                  "autoscaler is still scaling for the ramp.", "when morning surges start (cluster shape)",
                  configure=_surge_on_ramp),
    ExportVariant("hold-outlasts-surge", "The nightly fine-tune runs until 10:30-11:15 and surges are 1.8-2.5x "
                  "for 25-40 minutes: batch contention lasts longer than a surge inside it.",
                  "the fine-tune's run time and the surges' size and length (cluster shape)",
                  configure=_hold_outlasts_surge),
)}

# Pairs that contradict each other beyond one group: renaming an HPA that is not exported.
_EXCLUDES = {("hpa-prefix", "no-autoscaler"), ("hpa-info", "no-autoscaler"), ("keda", "no-autoscaler")}


def parse_variants(names: Iterable[str] | str | None) -> tuple[str, ...]:
    """Validated, de-duplicated variant names in canonical order (the order of :data:`VARIANTS`).

    ``("b", "a")`` and ``("a", "b")`` give the same tuple, so they are the same run.

    Raises
    ------
    ConfigError
        An unknown name (the valid ones listed), or two variants that contradict each other
        (both named).
    """
    given = [names] if isinstance(names, str) else list(names or ())
    unknown = [n for n in given if n not in VARIANTS]
    if unknown:
        raise ConfigError(f"unknown sample variant {', '.join(map(repr, unknown))}; choose from "
                          f"{', '.join(VARIANTS)} (`tidelens sample --variant list` says what each imitates)")
    chosen = tuple(n for n in VARIANTS if n in given)
    for i, a in enumerate(chosen):
        for b in chosen[i + 1:]:
            ga, gb = VARIANTS[a].group, VARIANTS[b].group
            if (ga and ga == gb) or (a, b) in _EXCLUDES:
                why = (f"both set the {ga}" if ga and ga == gb
                       else f"{b} exports no HPA for {a} to name")
                raise ConfigError(f"sample variants {a} and {b} contradict each other ({why}); keep one of them")
    return chosen


def configure_scenario(sc: ScenarioConfig, names: tuple[str, ...]) -> ScenarioConfig:
    """The scenario with the cluster-shape changes of ``names`` (canonical) applied, in order."""
    for n in names:
        fn = VARIANTS[n].configure
        if fn is not None:
            sc = fn(sc)
    return sc


def export_transform(names: tuple[str, ...]) -> Transform | None:
    """The export changes of ``names`` as one function (``None`` when there are none)."""
    fns = [VARIANTS[n].transform for n in names if VARIANTS[n].transform is not None]
    if not fns:
        return None

    def apply(ss: SeriesSet, res: SimResult) -> SeriesSet:
        for fn in fns:
            ss = fn(ss, res)  # type: ignore[misc]
        return ss
    return apply


def export_scrape_s(names: tuple[str, ...]) -> int:
    """The exports' scrape interval, seconds, under ``names`` (the simulation stays per minute)."""
    return next((VARIANTS[n].scrape_s for n in names if VARIANTS[n].scrape_s), DEFAULT_SCRAPE_S)


def zone_name(sc: ScenarioConfig) -> str:
    """``"UTC"`` or ``"UTC+08:00"``: the zone of the scenario's local day (its start's offset)."""
    off = parse_iso(sc.start_iso).utcoffset() or timedelta(0)
    if not off:
        return "UTC"
    minutes = int(off.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    return f"UTC{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def describe() -> list[dict[str, Any]]:
    """The catalogue as rows (name, help, which series change), for ``--variant list``."""
    return [{"name": v.name, "help": v.help, "changes": v.changes} for v in VARIANTS.values()]
