"""Alerting rules beside the recording rules: which kind of tail is happening, while it happens.

``tidelens export alerts`` writes one more group, ``tidelens-alerts``, that reads the recording
rules' series (:mod:`analytics.rules.compile`, the same map digest) and fires when a service's
p99 over the last step is over its SLO and

- ``InferenceBlockedByBatch``: batch withholds a material part (at least the events'
  ``mixed_share``) of the replicas the service misses, and no GPU of its pool is free (fewer than
  one replica needs). Batch withholds the least of two, each the most within the service's
  warm-up: the replicas the autoscaler wanted beyond those ready, and the GPUs batch held beyond
  its share of the pool (the pool less what inference's autoscalers want and the other classes
  hold: "more than its share" is holding GPUs an autoscaler is waiting for). Its part is against
  the replicas a surge asks for: those the autoscaler wants beyond what traffic at its norm's
  upper edge needs. One alert per batch workload holding the pool's GPUs, its value the time it
  began holding them (the run of steps the Tail events evidence cites);
- ``InferenceTrafficSurge``: its traffic is above its norm for the hour (the rhythm's band, its
  upper edge) at this and the previous step, batch's part is not material (capacity was free),
  and the service is not paged for batch contention (a tail that began blocked stays that page
  while its backlog drains); its value the traffic over the hour's expected traffic.

The same definitions as Tail events' causes (DESIGN.md's tail events, steps 3-6): the capacity
without batch counts batch GPUs held up to a warm-up back (a replica asked for then would serve
now), normal traffic is traffic clipped to the norm band, and a cause is ``mixed`` once both parts
reach ``mixed_share``. An alert fires at its first evaluation (``for: 0``) and keeps firing through
gaps shorter than the events' merge gap (``keep_firing_for``): one tail, one page, paged the step
after its first step over the SLO.

What is the store's and what is live: per service, its SLO, SLO histogram, pool, team, autoscaler
names, GPUs per replica and warm-up are written into the rules when exported, and the norms per
hour (:func:`hourly_norms`, from the store's rhythm) as recorded constants; desired and ready
replicas, latency, traffic and the pool's GPUs are read live. Export again to refresh them.

Each annotation is written once (:func:`annotation_parts`) as parts, text and fields, which
:mod:`analytics.rules.annotations` turns into Prometheus' Go template and into the same text from
Python values (the tests' expected pages).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import polars as pl

from analytics import promql as lq
from analytics import signals as s
from analytics.errors import ConfigError
from analytics.rules import compile as c
from analytics.rules import quoting as p
from analytics.rules.annotations import (
    POLICY_ACTIONS,
    SURGE_ACTION,
    Field,
    Parts,
    go_template,
    parts_of,
    query_action,
    time_action,
)
from analytics.workloads import WorkloadMap

ALERT_GROUP = "tidelens-alerts"
BLOCKED = "InferenceBlockedByBatch"
SURGE = "InferenceTrafficSurge"
ALERTS = (BLOCKED, SURGE)
WEEKDAY, WEEKEND, ALL_DAYS = "weekday", "weekend", "all"

# Recorded series of the alerts group (level:metric:operations).
P99 = "service:tidelens_p99:seconds"
RPS = "service:tidelens_requests:rate"
DESIRED = "service:tidelens_replicas:desired"
READY = "service:tidelens_replicas:ready"
WANTED = "service:tidelens_gpus_wanted:sum"  # desired replicas x GPUs per replica
NORM_UPPER = "service:tidelens_rps_norm:upper"  # the hour's norm band, upper edge (requests/s)
NORM_EXPECTED = "service:tidelens_rps_norm:expected"
POOL_CLASS = "pool_class:tidelens_gpus:sum"
POOL_WANTED = "pool:tidelens_gpus_wanted:sum"
POOL_IDLE = "pool:tidelens_gpus_idle:sum"
POOL_BATCH = "pool:tidelens_gpus_batch:sum"
POOL_SHARE = "pool:tidelens_batch_share:gpus"  # GPUs batch may hold while inference waits
POOL_OVER = "pool:tidelens_batch_over_share:gpus"  # batch's GPUs beyond its share, where positive
HELD_SINCE = "pool_team_workload:tidelens_batch_held_since:timestamp"
SERVICE_HELD_SINCE = "service_team_workload:tidelens_batch_held_since:timestamp"
WITHHELD = "service:tidelens_replicas:withheld_by_batch"  # batch's excess against the shortfall, a warm-up back
SURGE_WANTS = "service:tidelens_replicas:wanted_by_surge"  # desired beyond what traffic at its norm's edge needs
SHORTFALL = "service:tidelens_replicas:shortfall"  # desired - ready, where positive
BLOCKED_NOW = "service:tidelens_blocked_by_batch:bool"
SURGE_NOW = "service:tidelens_traffic_surge:ratio"

# Batch over its share by at least this many GPUs: sums of MIG fractions differ in the last bits.
EPSILON_GPUS = 1e-6
OTHER_CLASSES = ("other", "unmanaged", "unknown")

@dataclass(frozen=True)
class AlertsConfig:
    """How the alerts read the recorded series and what a page carries; ``tidelens export alerts`` options."""

    step_s: int = field(default=60, metadata={
        "help": "the analysis step: p99 and traffic over the last step, as Tail events judge them"})
    keep_firing_min: float = field(default=10.0, metadata={
        "help": "an alert keeps firing this long after its condition stops (Tail events' merge gap): one tail, one page"})
    severity: str = field(default="page", metadata={"help": "the alerts' severity label (Alertmanager routing)"})
    app_url: str = field(default="http://localhost:8501", metadata={
        "help": "Tidelens' address, for the link to the Tail events view of the alert's minute"})
    link_days: int = field(default=3, metadata={
        "help": "days before the alert's minute the Tail events link opens on (its norm band needs days)"})
    policy: str = field(default="shared", metadata={
        "help": "the pool's policy (the latest change the store records, else shared): what the page says to do"})
    material_share: float = field(default=0.3, metadata={
        "help": "batch's part of the replicas a service misses that makes it a batch page (the events' mixed_share)"})


@dataclass(frozen=True)
class ServiceTarget:
    """What the rules know of one service from the store and the map when exported."""

    service: str
    pool: str
    team: str
    slo_ms: float
    slo_metric: str  # the histogram its p99 is read from (analytics.timeline.service.SLO_PREFERENCE)
    namespace: str = ""
    hpa: str = ""  # the autoscaler linked to it (analytics.timeline.autoscaler), in its namespace
    hpa_namespace: str = ""
    deployment: str = ""
    deployment_namespace: str = ""
    gpus_per_replica: float = 1.0
    warmup_steps: int = 0


@dataclass(frozen=True)
class HourNorm:
    """A service's traffic norm for one hour of the day (UTC) on one kind of day."""

    service: str
    days: str  # weekday, weekend, or all
    hour: int
    expected_rps: float
    upper_rps: float


# -- annotations: one text, two renderings (analytics.rules.annotations) -------------------------
def _fields(digest: str, acfg: AlertsConfig) -> dict[str, Field]:
    dg = f'{c.DIGEST_LABEL}="{digest}"'

    def svc(metric: str) -> str:
        return query_action(f"max({metric}{{service=%q, {dg}}})", "service",
                            ".0f" if metric in (DESIRED, READY) else ".1f")

    def pool(metric: str) -> str:
        return query_action(f"max({metric}{{pool=%q, {dg}}})", "pool", ".1f")

    return {f.name: f for f in (
        Field("service", "{{ $labels.service }}"), Field("pool", "{{ $labels.pool }}"),
        Field("batch_workload", "{{ $labels.batch_workload }}"),
        Field("batch_team", '{{ or $labels.batch_team "no team" }}'),
        Field("since", "{{ $value | humanizeTimestamp }}"), Field("ratio", '{{ $value | printf "%.1f" }}', ".1f"),
        Field("desired", svc(DESIRED), ".0f"), Field("ready", svc(READY), ".0f"), Field("withheld", svc(WITHHELD), ".1f"),
        Field("rps", svc(RPS), ".1f"), Field("upper", svc(NORM_UPPER), ".1f"), Field("expected", svc(NORM_EXPECTED), ".1f"),
        Field("idle", pool(POOL_IDLE), ".1f"), Field("batch_gpus", pool(POOL_BATCH), ".1f"),
        Field("share", pool(POOL_SHARE), ".1f"),
        Field("link_start", time_action(-acfg.link_days * 86_400), ".0f"),
        Field("link_end", time_action(3600), ".0f"),
    )}


def annotation_parts(digest: str, acfg: AlertsConfig) -> dict[str, dict[str, Parts]]:
    """Per alert, its annotations as parts (the one definition both renderings read)."""
    if acfg.policy not in POLICY_ACTIONS:
        raise ConfigError(f"policy {acfg.policy!r}: choose one of {', '.join(POLICY_ACTIONS)}")
    f = _fields(digest, acfg)
    link = acfg.app_url.rstrip("/") + "/events?start={link_start}&end={link_end}"
    blocked = {
        "summary": "{service}: p99 over its SLO while batch holds the GPUs its autoscaler is waiting for",
        "description": "{batch_workload} (team {batch_team}) has held GPUs in pool {pool} since {since}. Batch holds "
                       "{batch_gpus} GPUs there, more than its share ({share}), and withholds {withheld} of the replicas "
                       "{service}'s autoscaler asked for ({desired} wanted, {ready} ready, {idle} GPUs free). This "
                       "tail is batch contention, not the users.",
        "action": POLICY_ACTIONS[acfg.policy],
        "tail_events": link,
    }
    surge = {
        "summary": "{service}: p99 over its SLO with traffic at {ratio}x its norm for this hour",
        "description": "{service} serves {rps} requests/s, above its norm for this hour (up to {upper}, expected "
                       "{expected}), and batch left GPUs free in pool {pool}. This tail is a traffic surge, "
                       "not batch contention.",
        "action": SURGE_ACTION,
        "tail_events": link,
    }
    return {BLOCKED: {k: parts_of(v, f) for k, v in blocked.items()},
            SURGE: {k: parts_of(v, f) for k, v in surge.items()}}


# -- norms from the store's rhythm -----------------------------------------------------------------
def hourly_norms(steps: pl.DataFrame) -> list[HourNorm]:
    """Each service's norm per hour of the day (UTC) from the events analysis' norm band
    (:func:`analytics.rhythm.norm_band`, its ``expected`` and ``upper`` per step).

    A step belongs to the hour its end (``ts_ms``) falls in, as the rules' ``hour()`` reads it
    at evaluation. The hour's upper edge is the highest over its steps and days of that kind
    (the day's level moves the band by some percent; a surge is above all of them); its expected
    traffic is the median of the days' means. Weekdays and weekend days get their own table
    where the store has both; else one for every day (``all``). An hour without traffic in the
    store gets no norm (no surge alert then).
    """
    f = (steps.select("ts_ms", pl.col("service").cast(pl.Utf8), "expected", "upper")
         .drop_nulls().filter(pl.col("upper").is_finite() & pl.col("expected").is_finite())
         .with_columns(pl.col("ts_ms").cast(pl.Datetime("ms", "UTC")).alias("_t"))
         .with_columns(pl.col("_t").dt.hour().cast(pl.Int64).alias("hour"), pl.col("_t").dt.date().alias("day"),
                       pl.when(pl.col("_t").dt.weekday() >= 6).then(pl.lit(WEEKEND)).otherwise(pl.lit(WEEKDAY))
                       .alias("days")))
    if f.height == 0:
        return []
    if f["days"].n_unique() < 2:
        f = f.with_columns(pl.lit(ALL_DAYS).alias("days"))
    per_day = f.group_by("service", "days", "day", "hour").agg(pl.col("upper").max(), pl.col("expected").mean())
    per_hour = (per_day.group_by("service", "days", "hour")
                .agg(pl.col("upper").max(), pl.col("expected").median()).sort("service", "days", "hour"))
    return [HourNorm(r["service"], r["days"], int(r["hour"]), float(r["expected"]), float(r["upper"]))
            for r in per_hour.iter_rows(named=True)]


def norms_frame(norms: Sequence[HourNorm]) -> pl.DataFrame:
    """The norms as a frame (``service, days, hour, expected_rps, upper_rps``)."""
    schema = {"service": pl.Utf8, "days": pl.Utf8, "hour": pl.Int64, "expected_rps": pl.Float64, "upper_rps": pl.Float64}
    return pl.DataFrame([n.__dict__ for n in norms], schema=schema)


# -- what the store says of each service -----------------------------------------------------------
def service_targets(services: pl.DataFrame, links: pl.DataFrame, *, slos_ms: Mapping[str, float | None],
                    teams: Mapping[str, str | None], gpus_per_replica: Mapping[str, float],
                    warmup_steps: Mapping[str, int]) -> tuple[list[ServiceTarget], list[str]]:
    """One target per service with an SLO and an SLO histogram, and notes on what a service lacks.

    ``services`` is :func:`analytics.timeline.service.service_series`' service table (``service,
    namespace, slo_metric, pool``); ``links`` :func:`analytics.timeline.autoscaler_links`.
    """
    linked = {(r["kind"], r["service"]): r for r in links.filter(pl.col("status") == "linked").iter_rows(named=True)}
    out, notes = [], []
    for r in services.sort("service").iter_rows(named=True):
        name, metric, slo = r["service"], r["slo_metric"], slos_ms.get(r["service"])
        if slo is None or metric not in lq.HISTOGRAMS:
            notes.append(f"{name}: no alerts (it needs an SLO and one of the latency histograms the rules "
                         f"record: {', '.join(lq.HISTOGRAMS)})")
            continue
        hpa, dep = linked.get(("hpa", name)), linked.get(("deployment", name))
        if hpa is None or dep is None:
            notes.append(f"{name}: no {'autoscaler' if hpa is None else 'deployment'} linked "
                         f"(`tidelens signals` says why): {BLOCKED} cannot tell when it wants more replicas "
                         f"than are ready; {SURGE} still fires")
        out.append(ServiceTarget(
            service=name, pool=r["pool"] or "default", team=teams.get(name) or (r["namespace"] or ""),
            slo_ms=float(slo), slo_metric=metric, namespace=r["namespace"] or "",
            hpa=hpa["name"] if hpa else "", hpa_namespace=(hpa["namespace"] or "") if hpa else "",
            deployment=dep["name"] if dep else "", deployment_namespace=(dep["namespace"] or "") if dep else "",
            gpus_per_replica=float(gpus_per_replica.get(name, 1.0)), warmup_steps=int(warmup_steps.get(name, 0))))
    return out, notes


# -- the rules ----------------------------------------------------------------------------------------
def _rec(record: str, expr: str, digest: str, **labels: str) -> dict[str, Any]:
    return {"record": record, "expr": expr, "labels": {**labels, c.DIGEST_LABEL: digest}}


@dataclass(frozen=True)
class _Reader:
    """Selectors of recorded series at one evaluation: ``window_ms`` back from it."""

    digest: str
    step_ms: int

    def over(self, fn: str, metric: str, *matchers: str, steps: int = 1, offset_steps: int = 0) -> str:
        sel = p.selector(metric, (*matchers, f"{c.DIGEST_LABEL}={p.quote(self.digest)}"))
        off = f" offset {offset_steps * self.step_ms}ms" if offset_steps else ""
        return f"{fn}({sel}[{steps * self.step_ms - 1}ms]{off})"

    def last(self, metric: str, *matchers: str, offset_steps: int = 0) -> str:
        return self.over("last_over_time", metric, *matchers, offset_steps=offset_steps)


def _service_matchers(service: str) -> list[tuple[str, ...]]:
    """The recorded series of ``service``: its ``exported_service``, else ``service``, else the
    pods' ``workload`` (as the service timeline names a series' service)."""
    q = p.quote(service)
    return [(f"exported_service={q}",), ('exported_service=""', f"service={q}"),
            ('exported_service=""', 'service=""', f"workload={q}")]


def _signal_record(key: str) -> str:
    """The recording rules' name for a pull query (``svc:<histogram>_bucket``, ``keep:<gauge>``)."""
    return next(rec.record for rec, _ in c.signal_rules(c.RulesConfig()) if rec.key == key)


def _num(x: float) -> str:
    return repr(float(x))


def _service_rules(t: ServiceTarget, r: _Reader, norms: Sequence[HourNorm], acfg: AlertsConfig) -> list[dict[str, Any]]:
    own = {"service": t.service}
    step_s = acfg.step_s
    buckets, counts = _signal_record(f"svc:{t.slo_metric}_bucket"), _signal_record(f"svc:{t.slo_metric}_count")
    per_le = " or ".join(r.over("sum_over_time", buckets, *m) for m in _service_matchers(t.service))
    total = " or ".join(r.over("sum_over_time", counts, *m) for m in _service_matchers(t.service))
    # the recorded buckets are the finite ones: the count is the +Inf bucket (every recorded
    # histogram is in seconds)
    inf = p.set_label(f"({total})", "le", "+Inf")
    rules = [_rec(P99, f"histogram_quantile(0.99, sum by (le) ({per_le} or {inf}))", r.digest, **own),
             _rec(RPS, f"sum({total}) / {step_s}", r.digest, **own)]
    if t.hpa:
        desired = r.last(_signal_record(f"keep:{s.KSM_HPA_DESIRED}"), f"namespace={p.quote(t.hpa_namespace)}", f"horizontalpodautoscaler={p.quote(t.hpa)}")
        rules.append(_rec(DESIRED, f"max({desired})", r.digest, **own, pool=t.pool))
        rules.append(_rec(WANTED, f"{r.last(DESIRED, f'service={p.quote(t.service)}')} * {_num(t.gpus_per_replica)}",
                          r.digest, **own, pool=t.pool))
    if t.deployment:
        ready = r.last(_signal_record(f"keep:{s.KSM_DEPLOY_READY}"), f"namespace={p.quote(t.deployment_namespace)}", f"deployment={p.quote(t.deployment)}")
        rules.append(_rec(READY, f"max({ready})", r.digest, **own))
    if t.hpa and t.deployment:
        shortfall = f"({r.last(DESIRED, f'service={p.quote(t.service)}')} - on () {r.last(READY, f'service={p.quote(t.service)}')}) > 0"
        rules.append(_rec(SHORTFALL, shortfall, r.digest, **own))
    rules += _norm_rules(t.service, [n for n in norms if n.service == t.service], r.digest)
    return rules


def _norm_rules(service: str, norms: Sequence[HourNorm], digest: str) -> list[dict[str, Any]]:
    """The service's norms per hour as constants, one rule per kind of day and edge: each term
    holds during its hour (``hour()`` at evaluation, UTC), the kind of day gates the rule."""
    gate = {WEEKDAY: " and on () (day_of_week() > 0 < 6)", WEEKEND: " and on () (day_of_week() == 0 or day_of_week() == 6)",
            ALL_DAYS: ""}
    out = []
    for days in sorted({n.days for n in norms}):
        hours = sorted((n for n in norms if n.days == days), key=lambda n: n.hour)
        for record, value in ((NORM_UPPER, lambda n: n.upper_rps), (NORM_EXPECTED, lambda n: n.expected_rps)):
            terms = " or ".join(f"(vector({_num(value(n))}) and on () hour() == {n.hour})" for n in hours)
            out.append(_rec(record, f"({terms}){gate[days]}", digest, service=service, days=days))
    return out


def _pool_rules(r: _Reader, acfg: AlertsConfig) -> list[dict[str, Any]]:
    def cls(*names: str) -> str:
        pick = f'class={p.quote(names[0])}' if len(names) == 1 else f'class=~{p.quote("|".join(names))}'
        return f"sum by (pool) ({r.last(POOL_CLASS, pick)})"

    total = f"sum by (pool) ({r.last(POOL_CLASS)})"
    zero = f"({total} * 0)"
    wanted = f"(sum by (pool) ({r.last(POOL_WANTED)}) or {zero})"
    inference = f"({cls('inference')} or {zero})"
    others = f"({cls(*OTHER_CLASSES)} or {zero})"
    # inference first: the GPUs batch would have to give back for every autoscaler to get its replicas
    share = f"clamp_min({total} - {others} - (({wanted} >= {inference}) or {inference}), 0)"
    held = r.last(c.GPUS, 'class="batch"')
    batch_now = f"sum by (pool, team, workload) ({held}) > 0"
    since_prev = f"max by (pool, team, workload) ({r.over('last_over_time', HELD_SINCE, steps=2)})"
    return [
        _rec(POOL_CLASS, f"sum by (pool, class) ({r.last(c.GPUS)})", r.digest),
        _rec(POOL_WANTED, f"sum by (pool) ({r.last(WANTED)})", r.digest),
        _rec(POOL_IDLE, f"{cls('idle')} or {zero}", r.digest),
        _rec(POOL_BATCH, f"{cls('batch')} or {zero}", r.digest),
        _rec(POOL_SHARE, share, r.digest),
        _rec(POOL_OVER, f"({r.last(POOL_BATCH)} - {r.last(POOL_SHARE)}) > {EPSILON_GPUS!r}", r.digest),
        # the start of each batch workload's unbroken run of steps holding the pool's GPUs: its
        # own previous value while the run goes on, else this step's start
        _rec(HELD_SINCE, f"({since_prev} and on (pool, team, workload) ({batch_now})) or "
                         f"(({batch_now}) * 0 + time() - {acfg.step_s})", r.digest),
    ]


def _over_slo(t: ServiceTarget, r: _Reader) -> str:
    return f"({r.last(P99, f'service={p.quote(t.service)}')} * 1000 > {_num(t.slo_ms)})"


def _material(t: ServiceTarget, r: _Reader, acfg: AlertsConfig) -> str:
    """Batch's part of what the service misses is material (at least ``acfg.material_share``, the
    events' ``mixed_share``): the replicas batch withholds against those the surge asks for."""
    svc = f"service={p.quote(t.service)}"
    part = acfg.material_share
    return f"({r.last(WITHHELD, svc)} * {_num(1 - part)} >= on () {r.last(SURGE_WANTS, svc)} * {_num(part)})"


def _blocked_rules(t: ServiceTarget, r: _Reader, acfg: AlertsConfig) -> list[dict[str, Any]]:
    """The replicas batch withholds from the service and those a surge asks for, both as the
    events weigh them (a warm-up back; traffic above its norm's edge), and the service's
    blocked condition with the batch holders of its pool."""
    own = {"service": t.service, "pool": t.pool, "team": t.team}
    svc, pool = f"service={p.quote(t.service)}", f"pool={p.quote(t.pool)}"
    window = t.warmup_steps + 1
    # the surge's replicas: those the autoscaler wants beyond what traffic at its norm's edge needs
    surge = (f"max({r.last(DESIRED, svc)}) * clamp_min(1 - max({r.last(NORM_UPPER, svc)}) / max({r.last(RPS, svc)}), 0)"
             " or vector(0)")
    rules = [_rec(SURGE_WANTS, surge, r.digest, **own)]
    if t.hpa and t.deployment:
        # within the warm-up: a replica asked for then would serve now, a GPU freed since would not yet
        over = f"max({r.over('max_over_time', POOL_OVER, pool, steps=window)})"
        short = f"max({r.over('max_over_time', SHORTFALL, svc, steps=window)}) * {_num(t.gpus_per_replica)}"
        rules.append(_rec(WITHHELD, f"(({over} <= {short}) or ({short} < {over})) / {_num(t.gpus_per_replica)}",
                          r.digest, **own))
        no_free = f"({r.last(POOL_IDLE, pool)} < {_num(t.gpus_per_replica)})"
        rules.append(_rec(BLOCKED_NOW, f"group({_over_slo(t, r)} and on () {no_free} and on () {_material(t, r, acfg)})",
                          r.digest, **own))
        rules.append(_rec(SERVICE_HELD_SINCE, r.last(HELD_SINCE, pool), r.digest, service=t.service))
    return rules


def _surge_rule(t: ServiceTarget, r: _Reader, acfg: AlertsConfig) -> dict[str, Any]:
    """Over the SLO with traffic above the hour's norm at this and the previous step, batch's
    part of what the service misses not material (capacity was free), and the service not paged
    for batch contention (a tail that began blocked stays that page: its backlog drains after
    batch lets go)."""
    svc = f"service={p.quote(t.service)}"
    above = (f"({r.last(RPS, svc)} > on () {r.last(NORM_UPPER, svc)})"
             f" and on () ({r.last(RPS, svc, offset_steps=1)} > on () {r.last(NORM_UPPER, svc, offset_steps=1)})")
    ratio = f"{r.last(RPS, svc)} / on () {r.last(NORM_EXPECTED, svc)}"
    paged = p.selector("ALERTS", (f"alertname={p.quote(BLOCKED)}", 'alertstate="firing"', svc,
                                  f"{c.DIGEST_LABEL}={p.quote(r.digest)}"))
    return _rec(SURGE_NOW, f"({ratio}) and on () {_over_slo(t, r)} and on () ({above}) "
                           f"unless on () {_material(t, r, acfg)} unless on () {paged}", r.digest,
                service=t.service, pool=t.pool, team=t.team)


def _alert(name: str, expr: str, acfg: AlertsConfig, annotations: Mapping[str, Parts], digest: str) -> dict[str, Any]:
    return {"alert": name, "expr": expr, "for": "0s", "keep_firing_for": f"{int(round(acfg.keep_firing_min * 60))}s",
            "labels": {"severity": acfg.severity, c.DIGEST_LABEL: digest},
            "annotations": {k: go_template(v) for k, v in annotations.items()}}


def compile_alerts(wmap: WorkloadMap, targets: Sequence[ServiceTarget], norms: Sequence[HourNorm],
                   cfg: c.RulesConfig = c.RulesConfig(), acfg: AlertsConfig = AlertsConfig()) -> dict[str, Any]:
    """The alerting rules file (a dict for ``yaml.safe_dump``): one group, ``tidelens-alerts``,
    reading the recording rules of ``wmap`` compiled with ``cfg`` (their digest).

    Raises
    ------
    ConfigError
        A step that is not a multiple of the rules' interval, an unknown policy, or no service
        to alert on.
    """
    if acfg.step_s % cfg.interval_s:
        raise ConfigError(f"--step {acfg.step_s}s: give a multiple of the rules' --interval ({cfg.interval_s}s)")
    if not targets:
        raise ConfigError("no service to alert on: the store has no service with an SLO and a latency histogram "
                          "(`tidelens signals --db ...` says what it has)")
    digest = c.map_digest(wmap, cfg)
    r = _Reader(digest, acfg.step_s * 1000)
    notes = annotation_parts(digest, acfg)
    rules: list[dict[str, Any]] = []
    for t in targets:
        rules += _service_rules(t, r, norms, acfg)
    rules += _pool_rules(r, acfg)
    for t in targets:
        rules += _blocked_rules(t, r, acfg)
    # the batch holders' names, and the serving team from the service's condition
    held = p.label_replace(p.label_replace(r.last(SERVICE_HELD_SINCE), "batch_team", "$1", "team", "(?s)(.*)"),
                           "batch_workload", "$1", "workload", "(?s)(.*)")
    blocked = (f"max by (service, pool, batch_team, batch_workload) ({held}) * on (service) group_left (team) "
               f"max by (service, team) ({r.last(BLOCKED_NOW)})")
    rules.append(_alert(BLOCKED, blocked, acfg, notes[BLOCKED], digest))
    rules += [_surge_rule(t, r, acfg) for t in targets]  # after the alert above: they read its ALERTS
    rules.append(_alert(SURGE, f"max by (service, pool, team) ({r.last(SURGE_NOW)})", acfg, notes[SURGE], digest))
    return {"groups": [{"name": ALERT_GROUP, "interval": f"{cfg.interval_s}s", "rules": rules}]}


def alerts_yaml(doc: Mapping[str, Any], digest: str) -> str:
    """The alerting rules as YAML, headed by what they read."""
    import yaml

    head = (f"# Tidelens alerting rules (map digest {digest}): they read the recording rules of\n"
            "# `tidelens export rules` with the same digest; load both. Norms, SLOs and autoscaler links\n"
            "# are the store's when exported: export again to refresh them. See docs/rules.md.\n")
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return head + yaml.dump(dict(doc), Dumper=dumper, sort_keys=False, allow_unicode=True, width=100_000)


def prometheus_rule(docs: Iterable[Mapping[str, Any]], *, name: str = "tidelens", namespace: str = "monitoring",
                    labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A prometheus-operator ``PrometheusRule`` holding the groups of ``docs`` (the recording
    rules and the alerts: the operator loads them into the Prometheus whose ``ruleSelector``
    matches ``labels``)."""
    groups = [g for d in docs for g in d["groups"]]
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
            "spec": {"groups": groups}}

