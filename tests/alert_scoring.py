"""The alerting rules read in Python on the timelines, and scored against Tail events.

Test and bench support, not the product (the product is the rules: ``analytics.rules.alerts``):

- :func:`recorded_inputs`: the series the alerts group reads (the recording rules' GPUs by pool,
  class, team and workload, each service's SLO histogram increases, the autoscaler gauges), from
  the timelines of a store: what the recording rules record on its raw series (held equal to
  the timelines by ``tests/test_rules.py``);
- :func:`expected_alerts`: what the alerting rules fire at each step, with their labels and
  annotations, by their definitions (``analytics/rules/alerts.py``'s docstring) on the same
  frames; ``promtool test rules`` holds the rules to it at every step;
- :func:`score`: the alerts against the events Tidelens finds on the same store.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import polars as pl
import yaml

from analytics import signals as sg
from analytics.cli.export_cmd import alert_inputs
from analytics.events import EventsConfig, analyse_store
from analytics.events.evidence import holding_runs
from analytics.rules import compile as rc
from analytics.rules.alerts import (
    ALERT_GROUP,
    BLOCKED,
    EPSILON_GPUS,
    OTHER_CLASSES,
    SURGE,
    WEEKDAY,
    WEEKEND,
    AlertsConfig,
    HourNorm,
    ServiceTarget,
    alerts_yaml,
    annotation_parts,
    compile_alerts,
)
from analytics.rules.annotations import humanize_timestamp, render
from analytics.rules.unittests import alert_tests
from analytics.slo import resolve_slos
from analytics.timeline import Timelines, store_timelines
from analytics.timeline.service import service_series, slo_increases
from analytics.times import iso_utc
from analytics.workloads import WorkloadMap

REQUIRED = {BLOCKED: {"batch_contention", "mixed"}, SURGE: {"traffic_surge"}}
ALLOWED = {BLOCKED: {"batch_contention", "mixed"}, SURGE: {"traffic_surge", "mixed"}}
FORBIDDEN = {BLOCKED: {"traffic_surge"}, SURGE: {"batch_contention"}}
WITHIN_MS = 180_000

Series = tuple[str, dict[str, str], dict[int, float]]


def _ts(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(pl.col("ts").dt.epoch("ms").alias("ts_ms"))


def slo_counts(store: Any, timelines: Timelines, wmap: WorkloadMap, step_ms: int
               ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Each service's SLO histogram increases per step (``service, ts_end_ms, le, value``) and its
    count's (``service, ts_end_ms, value``), as the service timeline reads them."""
    series, services = service_series(store, wmap)
    ts = _ts(timelines.services)["ts_ms"]
    slo = series.join(services.select("service", "service_id", "slo_metric"), on="service").filter(
        pl.col("base") == pl.col("slo_metric"))
    buckets, counts, _ = slo_increases(store, (step_ms, int(ts.min()) - step_ms, int(ts.max())), slo,
                                       (series, services))
    names = services.select("service_id", "service")
    return buckets.join(names, on="service_id").drop("service_id"), counts.join(names, on="service_id").drop("service_id")


def recorded_inputs(store: Any, timelines: Timelines, wmap: WorkloadMap,
                    targets: Sequence[ServiceTarget], digest: str, step_ms: int) -> list[Series]:
    """The recorded series the alerts read, at each step of the timelines."""
    dg = {rc.DIGEST_LABEL: digest}
    out: list[Series] = []
    hold = (_ts(timelines.holdings).group_by("ts_ms", "pool", "cls", "team", "workload")
            .agg(pl.col("gpus").sum()))
    for (pool, cls, team, workload), g in hold.group_by(["pool", "cls", "team", "workload"]):
        labels = {"pool": pool or "", "class": cls, "team": team or "", "workload": workload or "", **dg}
        out.append((rc.GPUS, labels, dict(zip(g["ts_ms"].to_list(), g["gpus"].to_list()))))
    buckets, counts = slo_counts(store, timelines, wmap, step_ms)
    metric_of = {t.service: t.slo_metric.replace(":", "_") for t in targets}
    for (name, le), g in buckets.filter(pl.col("le").is_finite()).group_by(["service", "le"]):
        if name in metric_of:
            out.append((f"service_le:{metric_of[name]}_bucket:increase", {"service": name, "le": repr(float(le)), **dg},
                        dict(zip(g["ts_end_ms"], g["value"]))))
    for (name,), g in counts.group_by(["service"]):
        if name in metric_of:
            out.append((f"service:{metric_of[name]}_count:increase", {"service": name, **dg},
                        dict(zip(g["ts_end_ms"], g["value"]))))
    svc = _ts(timelines.services)
    for t in targets:
        g = svc.filter(pl.col("service") == t.service)
        for metric, name_label, name, ns, col in (
                (sg.KSM_HPA_DESIRED, "horizontalpodautoscaler", t.hpa, t.hpa_namespace, "desired_replicas"),
                (sg.KSM_DEPLOY_READY, "deployment", t.deployment, t.deployment_namespace, "ready_replicas")):
            if name:
                level = "namespace_horizontalpodautoscaler" if name_label != "deployment" else "namespace_deployment"
                v = g.select("ts_ms", col).drop_nulls()
                out.append((f"{level}:{metric}:last", {"namespace": ns, name_label: name, **dg},
                            dict(zip(v["ts_ms"].to_list(), v[col].to_list()))))
    return out


@dataclass
class Expected:
    """What the alerting rules fire: per step (epoch ms), per alert, the firing alerts."""

    firing: dict[int, dict[str, list[dict[str, dict[str, str]]]]] = field(default_factory=dict)
    # per (alert, service): the steps it fires at, and those its condition holds at (not kept firing)
    by_service: dict[tuple[str, str], set[int]] = field(default_factory=dict)
    active: dict[tuple[str, str], set[int]] = field(default_factory=dict)


def _pool_frame(timelines: Timelines) -> pl.DataFrame:
    h = _ts(timelines.holdings)
    by = h.group_by("ts_ms", "pool", "cls").agg(pl.col("gpus").sum())
    wide = by.pivot(on="cls", index=["ts_ms", "pool"], values="gpus")
    for col in ("inference", "batch", "idle", *OTHER_CLASSES):
        if col not in wide.columns:
            wide = wide.with_columns(pl.lit(None, dtype=pl.Float64).alias(col))
    return wide.with_columns(pl.sum_horizontal(*[c for c in wide.columns if c not in ("ts_ms", "pool")]).alias("total"),
                             *(pl.col(c).fill_null(0.0) for c in ("inference", "batch", "idle", *OTHER_CLASSES)))


def _norm(norms: Sequence[HourNorm], service: str, ts_ms: int) -> HourNorm | None:
    t = ts_ms // 1000
    hour, weekday = (t // 3600) % 24, ((t // 86_400) + 4) % 7  # 1970-01-01 was a Thursday (4)
    days = WEEKEND if weekday in (0, 6) else WEEKDAY
    for n in norms:
        if n.service == service and n.hour == hour and n.days in (days, "all"):
            return n
    return None


def expected_alerts(timelines: Timelines, counts: pl.DataFrame, targets: Sequence[ServiceTarget],
                    norms: Sequence[HourNorm], acfg: AlertsConfig, digest: str, origin_ms: int) -> Expected:
    """What the rules fire at each step, by their definitions on the timelines (module docstring).

    ``counts``: :func:`slo_counts`' count increases (traffic as the rules compute it: the count's
    increase over the step, divided by it); ``origin_ms``: the time promtool calls 0 (the
    annotations' times are promtool's)."""
    step_ms = acfg.step_s * 1000
    keep_ms = int(round(acfg.keep_firing_min * 60_000))
    parts = annotation_parts(digest, acfg)
    pools = {(r["ts_ms"], r["pool"]): r for r in _pool_frame(timelines).iter_rows(named=True)}
    # divided as PromQL divides (polars may multiply by the reciprocal: 6609 / 60 read 110.14999...)
    rps = counts.select("service", pl.col("ts_end_ms").alias("ts_ms"),
                        pl.Series("_rps", np.asarray(counts["value"].to_numpy(), float) / acfg.step_s))
    svc = (_ts(timelines.services).join(rps, on=["service", "ts_ms"], how="left")
           .with_columns(pl.col("_rps").alias("rps")).drop("_rps"))
    steps = sorted(set(svc["ts_ms"].to_list()) | {k[0] for k in pools})
    by = {t.service: {r["ts_ms"]: r for r in svc.filter(pl.col("service") == t.service).iter_rows(named=True)}
          for t in targets}
    share: dict[tuple[int, str], float] = {}
    over: dict[tuple[int, str], float] = {}  # batch's GPUs beyond its share, where positive
    for (ts, pool), r in pools.items():
        wanted = sum(float(by[t.service][ts]["desired_replicas"]) * t.gpus_per_replica for t in targets
                     if t.pool == pool and t.hpa and ts in by[t.service]
                     and by[t.service][ts]["desired_replicas"] is not None)
        others = sum(r[c] for c in OTHER_CLASSES)
        share[(ts, pool)] = max(r["total"] - others - max(wanted, r["inference"]), 0.0)
        if r["batch"] - share[(ts, pool)] > EPSILON_GPUS:
            over[(ts, pool)] = r["batch"] - share[(ts, pool)]
    batch = (_ts(timelines.holdings).filter(pl.col("cls") == "batch")
             .group_by("ts_ms", "pool", "team", "workload").agg(pl.col("gpus").sum()).filter(pl.col("gpus") > 0))
    runs = holding_runs(batch.with_columns(pl.lit("batch").alias("cls")).sort("ts_ms"), step_ms)
    holders: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for r in batch.iter_rows(named=True):
        holders.setdefault((r["ts_ms"], r["pool"]), []).append(r)

    def since_of(pool: str, team: str | None, workload: str | None, ts: int) -> int:
        run = runs.filter((pl.col("pool") == pool) & (pl.col("team").eq_missing(team))
                          & (pl.col("workload").eq_missing(workload)) & (pl.col("first_ts") <= ts)
                          & (pl.col("last_ts") >= ts))
        return int(run["first_ts"][0]) - step_ms

    active: dict[tuple[str, tuple], tuple[int, dict[str, str]]] = {}  # instance -> (last active ts, annotations)
    out = Expected()
    for ts in steps:
        t_s = (ts - origin_ms) / 1000
        for t in targets:
            now, prev = by[t.service].get(ts), by[t.service].get(ts - step_ms)
            pool = pools.get((ts, t.pool))
            if now is None:
                continue
            over_slo = now["p99_ms"] is not None and now["p99_ms"] > t.slo_ms
            base = {"service": t.service, "pool": t.pool, "team": t.team, "severity": acfg.severity,
                    rc.DIGEST_LABEL: digest}
            values = {"service": t.service, "pool": t.pool, "link_start": t_s - acfg.link_days * 86_400,
                      "link_end": t_s + 3600}
            desired, ready = now["desired_replicas"], now["ready_replicas"]
            n, n_prev = _norm(norms, t.service, ts), _norm(norms, t.service, ts - step_ms)
            withheld = _withheld(t, ts, step_ms, by[t.service], over)
            surge_wants = 0.0
            if desired is not None and n is not None and now["rps"] is not None:
                edge = n.upper_rps / now["rps"] if now["rps"] else math.inf
                surge_wants = desired * max(1 - edge, 0)
            part = acfg.material_share
            material = withheld is not None and withheld * (1 - part) >= surge_wants * part
            if (t.hpa and t.deployment and pool is not None and over_slo and material
                    and pool["idle"] < t.gpus_per_replica):
                values.update(desired=desired, ready=ready, idle=pool["idle"], batch_gpus=pool["batch"],
                              share=share[(ts, t.pool)], withheld=withheld)
                for h in holders.get((ts, t.pool), []):
                    labels = {**base, "batch_team": h["team"] or "", "batch_workload": h["workload"] or ""}
                    v = {**values, "batch_workload": h["workload"] or "", "batch_team": h["team"] or "no team",
                         "since": humanize_timestamp((since_of(t.pool, h["team"], h["workload"], ts) - origin_ms) / 1000)}
                    key = (BLOCKED, tuple(sorted((k, x) for k, x in labels.items() if x)))
                    active[key] = (ts, {k: render(p, v) for k, p in parts[BLOCKED].items()})
                    out.active.setdefault((BLOCKED, t.service), set()).add(ts)
            paged = any(a == BLOCKED and dict(lab)["service"] == t.service and ts - last <= keep_ms
                        for (a, lab), (last, _) in active.items())
            if (over_slo and not material and not paged and n is not None and n_prev is not None and prev is not None
                    and now["rps"] is not None and prev["rps"] is not None
                    and now["rps"] > n.upper_rps and prev["rps"] > n_prev.upper_rps):
                v = {**values, "ratio": now["rps"] / n.expected_rps, "rps": now["rps"], "upper": n.upper_rps,
                     "expected": n.expected_rps}
                key = (SURGE, tuple(sorted((k, x) for k, x in base.items() if x)))
                active[key] = (ts, {k: render(p, v) for k, p in parts[SURGE].items()})
                out.active.setdefault((SURGE, t.service), set()).add(ts)
        firing: dict[str, list[dict[str, dict[str, str]]]] = {BLOCKED: [], SURGE: []}
        for (alert, labels), (last, notes) in active.items():
            if ts - last <= keep_ms:
                firing[alert].append({"labels": dict(labels), "annotations": notes})
                out.by_service.setdefault((alert, dict(labels)["service"]), set()).add(ts)
        out.firing[ts] = firing
    return out


def _withheld(t: ServiceTarget, ts: int, step_ms: int, steps: Mapping[int, Mapping[str, Any]],
              over: Mapping[tuple[int, str], float]) -> float | None:
    """The replicas batch withholds from ``t`` at ``ts``: the least of batch's excess over its
    share and the service's shortfall in GPUs, each the most within a warm-up back."""
    back = range(t.warmup_steps + 1)
    excess = [over[(ts - k * step_ms, t.pool)] for k in back if (ts - k * step_ms, t.pool) in over]
    short = [s["desired_replicas"] - s["ready_replicas"] for s in (steps.get(ts - k * step_ms) for k in back)
             if s is not None and s["desired_replicas"] is not None and s["ready_replicas"] is not None
             and s["desired_replicas"] - s["ready_replicas"] > 0]
    if not excess or not short:
        return None
    a, b = max(excess), max(short) * t.gpus_per_replica
    return (a if a <= b else b) / t.gpus_per_replica


@dataclass
class AlertScore:
    """One alert against Tail events: per event and per page."""

    alert: str
    required: int  # events of a cause it must fire for
    hit: int  # of those, fired within 3 minutes of the start
    fired_on: int  # events it fired on within 3 minutes of their start
    fired_right: int  # of those, events of a cause it names
    forbidden: int  # events of the cause it must never fire during, where it did
    pages: int  # runs of steps it fired (per service)
    pages_in_events: int  # of those, reaching into an event of a cause it names (or the 3 minutes before it)
    missed: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    stray: list[str] = field(default_factory=list)  # pages that reach no event of a cause it names

    @property
    def recall(self) -> float:
        return self.hit / self.required if self.required else 1.0

    @property
    def precision(self) -> float:
        return self.fired_right / self.fired_on if self.fired_on else 1.0

    @property
    def page_precision(self) -> float:
        return self.pages_in_events / self.pages if self.pages else 1.0

    def row(self) -> dict[str, Any]:
        return {"alert": self.alert, "events": self.required, "recall": round(self.recall, 3),
                "precision": round(self.precision, 3), "forbidden": self.forbidden, "pages": self.pages,
                "page_precision": round(self.page_precision, 3)}


def _pages(steps: Iterable[int], step_ms: int) -> list[tuple[int, int]]:
    """The first step of each run of consecutive steps, and the run's length in steps."""
    out: list[list[int]] = []
    last = None
    for ts in sorted(steps):
        if last is None or ts - last > step_ms:
            out.append([ts, 0])
        out[-1][1] += 1
        last = ts
    return [(a, n) for a, n in out]


def score(events: Sequence[Any], expected: Expected, step_ms: int = 60_000) -> dict[str, AlertScore]:
    """Each alert against the events (``analytics.events.Event``) of the same store."""
    out = {}
    for alert in (BLOCKED, SURGE):
        s = AlertScore(alert, 0, 0, 0, 0, 0, 0, 0)
        for e in events:
            fired = expected.by_service.get((alert, e.service), set())
            early = any(e.start_ms <= ts <= e.start_ms + WITHIN_MS for ts in fired)
            where = f"{e.service} {e.as_dict()['start']} {e.cause}"
            if e.cause in REQUIRED[alert]:
                s.required += 1
                s.hit += early
                if not early:
                    s.missed.append(where)
            if early:
                s.fired_on += 1
                s.fired_right += e.cause in ALLOWED[alert]
                if e.cause not in ALLOWED[alert]:
                    s.wrong.append(where)
            if e.cause in FORBIDDEN[alert] and any(e.start_ms < ts <= e.end_ms for ts in fired):
                s.forbidden += 1
                s.wrong.append(f"{where} (fired during it)")
        for (name, service), fired in expected.by_service.items():
            if name != alert:
                continue
            for first, minutes in _pages(fired, step_ms):
                s.pages += 1
                last = first + (minutes - 1) * step_ms
                inside = any(e.service == service and e.cause in ALLOWED[alert]
                             and e.start_ms - WITHIN_MS <= last and first <= e.end_ms for e in events)
                s.pages_in_events += inside
                if not inside:
                    s.stray.append(f"{service} {iso_utc(first)} ({minutes} min firing)")
        out[alert] = s
    return out


def window_norms(norms: Sequence[HourNorm], lo_ms: int, hi_ms: int) -> list[HourNorm]:
    """The norms on promtool's clock for a window from ``lo_ms`` (a whole hour, promtool's time
    0) to ``hi_ms``: the rules then read at promtool's hour ``h`` the norm of the data's hour
    ``h + lo's hour``, of the kind of day the window lies in (``all`` for promtool)."""
    kinds = {n.days for n in norms}
    if kinds != {"all"}:
        days = {WEEKEND if ((t // 86_400_000) + 4) % 7 in (0, 6) else WEEKDAY for t in (lo_ms, hi_ms)}
        if len(days) > 1:
            raise ValueError("a window across a weekday and a weekend day: cut it at midnight")
        norms = [replace(n, days="all") for n in norms if n.days in days]
    hours = (lo_ms // 3_600_000) % 24
    return [replace(n, hour=(n.hour - hours) % 24) for n in norms]


def trim(timelines: Timelines, lo_ms: int, hi_ms: int) -> Timelines:
    """The timelines' steps ending in ``[lo_ms, hi_ms]``."""
    def cut(f: pl.DataFrame) -> pl.DataFrame:
        ts = pl.col("ts").dt.epoch("ms")
        return f.filter((ts >= lo_ms) & (ts <= hi_ms))

    return replace(timelines, services=cut(timelines.services), holdings=cut(timelines.holdings),
                   pool=cut(timelines.pool))


@dataclass
class AlertRun:
    """A store's events, what the alerting rules take from it, and what they fire."""

    analysis: Any
    timelines: Timelines
    counts: pl.DataFrame  # each service's count increases per step (slo_counts)
    targets: list[ServiceTarget]
    norms: list[HourNorm]
    acfg: AlertsConfig
    digest: str
    expected: Expected
    scores: dict[str, AlertScore]
    notes: list[str]


def run_store(store: Any, wmap: WorkloadMap, cfg: rc.RulesConfig = rc.RulesConfig()) -> AlertRun:
    """The events of ``store`` (as ``tidelens events``), the alerts' inputs (as ``tidelens export
    alerts``) and what the rules fire on its timelines, scored against the events."""
    ecfg = EventsConfig()
    analysis = analyse_store(store, ecfg, wmap, slos=resolve_slos(store))
    got = alert_inputs(store, wmap, analysis)  # the CLI's own glue, as the export runs it
    timelines = store_timelines(store, ecfg.timeline_config(), wmap)
    acfg = AlertsConfig(step_s=ecfg.step_s, policy=got["policy"], material_share=ecfg.mixed_share,
                        keep_firing_min=ecfg.merge_gap_min)
    digest = rc.map_digest(wmap, cfg)
    first = int(timelines.services["ts"].dt.epoch("ms").min())
    counts = slo_counts(store, timelines, wmap, ecfg.step_s * 1000)[1]
    expected = expected_alerts(timelines, counts, got["targets"], got["norms"], acfg, digest, first - first % 86_400_000)
    return AlertRun(analysis, timelines, counts, got["targets"], got["norms"], acfg, digest, expected,
                    score(analysis.events, expected, ecfg.step_s * 1000), got["notes"])


def window_test(run: AlertRun, store: Any, wmap: WorkloadMap, lo_ms: int, hi_ms: int, folder: Any,
                cfg: rc.RulesConfig = rc.RulesConfig()) -> Any:
    """A ``promtool test rules`` file (and the alerts file it reads) for the steps in
    ``[lo_ms, hi_ms]`` (``lo_ms`` a whole hour): every step's firing alerts, exactly, as
    :func:`expected_alerts` reads the rules on the same window. Returns the test file's path."""
    if lo_ms % 3_600_000:
        raise ValueError(f"window start {lo_ms}: give a whole hour")
    step_ms = run.acfg.step_s * 1000
    window = trim(run.timelines, lo_ms, hi_ms)
    norms = window_norms(run.norms, lo_ms, hi_ms)
    doc = compile_alerts(wmap, run.targets, norms, cfg, run.acfg)
    (folder / "alerts.yml").write_text(alerts_yaml(doc, run.digest), encoding="utf-8")
    counts = run.counts.filter(pl.col("ts_end_ms").is_between(lo_ms, hi_ms))
    expected = expected_alerts(window, counts, run.targets, run.norms, run.acfg, run.digest, lo_ms)
    inputs = [(m, lab, {ts: v for ts, v in pts.items() if lo_ms <= ts <= hi_ms})
              for m, lab, pts in recorded_inputs(store, window, wmap, run.targets, run.digest, step_ms)]
    test = alert_tests(inputs, lo_ms, expected.firing, ["alerts.yml"], [ALERT_GROUP], name="alerts on the window",
                       cfg=cfg)
    path = folder / "alerts.test.yml"
    path.write_text(yaml.safe_dump(test, sort_keys=False, allow_unicode=True, width=100_000), encoding="utf-8")
    return path
