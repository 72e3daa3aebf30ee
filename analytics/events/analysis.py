"""The frame-level analysis: timelines in, attributed tail events out.

:func:`analyse` takes the timeline frames (not the store), so it runs on hand-made frames in
tests as well as on :mod:`analytics.timeline`'s output. The steps it computes (traffic, norm,
capacity with and without batch, the four evaluations of L) stay on the result for the page,
the report and the evidence to cite.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from analytics.errors import NotEnoughDataError
from analytics.events.attribute import attribute_event, capacity_without_batch, evaluate
from analytics.events.config import EventsConfig
from analytics.events.detect import detect_runs
from analytics.events.event import Event, event_id, iso_utc
from analytics.events.evidence import holders_at, holding_runs, latency_regression
from analytics.events.incidents import match_incident
from analytics.events.latency_model import LatencyModel, fit_latency_model
from analytics.events.norm import traffic_norm
from analytics.events.surges import check_surge, surge_runs
from analytics.measures import (InferredDemand, gpus_per_replica, infer_desired, loading_steps, over_slo,
                                reaction_steps, warmup_lags)
from analytics.slo import SloTable
from analytics.text import html_frame, visible_frame
from analytics.times import step_start_ms


EVENT_COLUMNS = {"id": pl.Utf8, "service": pl.Utf8, "start": pl.Utf8, "min": pl.Int64, "peak_p99_ms": pl.Int64,
                 "slo_ms": pl.Float64, "cause": pl.Utf8, "batch": pl.Float64, "traffic": pl.Float64,
                 "unexpl": pl.Float64, "misattributed": pl.Boolean, "recorded": pl.Utf8}


def with_ts_ms(frame: pl.DataFrame) -> pl.DataFrame:
    """Add an Int64 ``ts_ms`` (UTC epoch ms) from ``ts`` when it is a Datetime or integer."""
    if "ts_ms" in frame.columns:
        return frame
    dt = frame.schema["ts"]
    expr = pl.col("ts").dt.epoch("ms") if isinstance(dt, pl.Datetime) else pl.col("ts").cast(pl.Int64)
    return frame.with_columns(expr.alias("ts_ms"))


@dataclass(frozen=True)
class ScaleUp:
    """How long the pool's own scale-up takes for one service: what capacity without batch (C0)
    waits for, and where each part came from (the evidence cites both)."""

    warmup_steps: int
    warmup_source: str
    reaction_steps: int  # added to the warm-up: only where the desired replicas carry no reaction
    reaction: str

    @property
    def steps(self) -> int:
        return self.warmup_steps + self.reaction_steps


@dataclass
class EventsAnalysis:
    """Events of a range plus everything needed to show and cite them."""

    events: list[Event]
    steps: pl.DataFrame
    holdings: pl.DataFrame
    models: dict[str, LatencyModel]
    regressions: dict[str, dict[str, Any]]
    warmup_min: dict[str, float]
    slos_ms: dict[str, float | None]
    cfg: EventsConfig
    notes: list[str] = field(default_factory=list)
    map_digest: str = ""  # the workload map it was computed with (analytics.workloads.map_digest)

    @property
    def step_s(self) -> int:
        """The length of a step of :attr:`steps`, seconds."""
        return self.cfg.step_s

    def table(self) -> pl.DataFrame:
        """One row per event (``tidelens events``' table, a notebook's): id, service, start,
        minutes, peak p99, SLO, cause, the three shares, misattributed, the recorded cause."""
        rows = [{"id": e.id, "service": e.service, "start": iso_utc(e.start_ms), "min": round(e.duration_min),
                 "peak_p99_ms": round(e.peak_p99_ms), "slo_ms": e.slo_ms, "cause": e.cause,
                 "batch": e.shares.get("batch_contention"), "traffic": e.shares.get("traffic_surge"),
                 "unexpl": e.shares.get("unexplained"), "misattributed": e.misattributed,
                 "recorded": (e.evidence.get("incident") or {}).get("recorded_cause")} for e in self.events]
        # a label's control and bidi-override characters shown as escapes (a notebook draws the frame)
        return visible_frame(pl.DataFrame(rows, schema=EVENT_COLUMNS))

    def by_cause(self) -> dict[str, int]:
        """How many events each cause has, the most first."""
        counts: dict[str, int] = {}
        for e in self.events:
            counts[e.cause] = counts.get(e.cause, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def _repr_html_(self) -> str:
        """The events as a notebook cell shows them: counts by cause and the table."""
        n = len(self.events)
        said = (f"{n:,} tail event{'s' if n != 1 else ''}"
                + (": " + ", ".join(f"{c:,} {k.replace('_', ' ')}" for k, c in self.by_cause().items()) if n else "")
                + f"; {sum(e.misattributed for e in self.events):,} a dashboard would blame on users.")
        return html_frame("Tail events", self.table(), [said], notes=self.notes)

    def event(self, event_id_: str) -> Event:
        for ev in self.events:
            if ev.id == event_id_:
                return ev
        raise KeyError(event_id_)

    def event_window(self, ev: Event, pad_min: float = 90.0) -> pl.DataFrame:
        """The service's steps from ``pad_min`` before the event to ``pad_min`` after it."""
        pad = int(pad_min * 60_000)
        return self.steps.filter((pl.col("service") == ev.service) & (pl.col("ts_ms") > ev.start_ms - pad)
                                 & (pl.col("ts_ms") <= ev.end_ms + pad))

    def holdings_window(self, ev: Event, pad_min: float = 90.0) -> pl.DataFrame:
        pad = int(pad_min * 60_000)
        return self.holdings.filter((pl.col("pool") == ev.pool) & (pl.col("ts_ms") > ev.start_ms - pad)
                                    & (pl.col("ts_ms") <= ev.end_ms + pad))


def _service_steps(services: pl.DataFrame, pools: pl.DataFrame) -> pl.DataFrame:
    s = with_ts_ms(services)
    ready = pl.col("ready_replicas") if "ready_replicas" in s.columns else pl.lit(None)
    s = s.select(
        "ts_ms", pl.col("service").cast(pl.Utf8), pl.col("pool").cast(pl.Utf8).fill_null("default"),
        pl.col("rps").cast(pl.Float64), pl.col("p99_ms").cast(pl.Float64).fill_nan(None),
        pl.coalesce(ready.cast(pl.Float64), pl.col("replicas").cast(pl.Float64)).fill_null(0.0).alias("ready"),
        pl.col("desired_replicas").cast(pl.Float64).alias("desired_raw"))
    s = s.with_columns(pl.coalesce("desired_raw", "ready").alias("desired")).drop("desired_raw")
    p = with_ts_ms(pools).select("ts_ms", pl.col("pool").cast(pl.Utf8),
                                 pl.col("gpus_total").cast(pl.Float64),
                                 pl.col("gpus_batch").cast(pl.Float64).fill_null(0.0),
                                 pl.col("gpus_idle").cast(pl.Float64).fill_null(0.0))
    return s.join(p, on=["ts_ms", "pool"], how="left").with_columns(
        pl.col("gpus_batch", "gpus_idle").fill_null(0.0)).sort("service", "ts_ms")


def _held_gpus(holdings: pl.DataFrame, steps: pl.DataFrame) -> dict[str, np.ndarray]:
    """Each service's inference GPUs per step, on its steps (sorted by time): its replicas'
    GPUs, loading ones included."""
    out: dict[str, np.ndarray] = {}
    inf = holdings.filter(pl.col("cls") == "inference").group_by("ts_ms", "workload").agg(pl.col("gpus").sum())
    for (service,), g in steps.group_by(["service"]):
        j = g.select("ts_ms").join(inf.filter(pl.col("workload") == service), on="ts_ms", how="left")
        out[service] = j["gpus"].fill_null(0.0).to_numpy()
    return out


def _gpus_per_replica(held: dict[str, np.ndarray], steps: pl.DataFrame) -> dict[str, float]:
    """Each service's GPUs per replica (:func:`analytics.measures.gpus_per_replica`), 1 where unknown."""
    return {service: gpus_per_replica(held[service], g["ready"].to_numpy()) or 1.0
            for (service,), g in steps.group_by(["service"])}


def _scale_up(g: pl.DataFrame, held_gpus: np.ndarray, gpr: float, cfg: EventsConfig,
              inferred: InferredDemand | None, linked: bool) -> ScaleUp:
    """The pool's own scale-up for one service (its steps ``g``, sorted by time): the warm-up the
    store shows (desired to ready where free GPUs placed a scale-up at once, else scheduled to
    ready from the GPUs its loading replicas held), and the autoscaler's reaction where the
    desired replicas do not carry it."""
    per_min = 60 / cfg.step_s
    step_min = cfg.step_s / 60
    if cfg.warmup_min is not None:
        w, src = int(round(cfg.warmup_min * per_min)), f"set to {cfg.warmup_min:g} min (warmup_min)"
    else:
        lags = warmup_lags(g["desired"].to_numpy(), g["ready"].to_numpy(), g["gpus_idle"].to_numpy(), gpr)
        loading = loading_steps(held_gpus / gpr, g["ready"].to_numpy())
        if lags:
            w = int(np.median(lags))
            src = (f"desired to ready: the median of {len(lags)} scale-up(s) the free GPUs could place at once, "
                   f"measured in the store")
        elif loading is not None:
            w = max(1, int(round(loading[0])))
            src = (f"scheduled to ready: replicas held their GPUs {loading[0] * step_min:.1f} min on average before "
                   f"they were ready ({loading[1]} became ready), measured in the store (no scale-up with free GPUs "
                   f"to time from the autoscaler's request)")
        else:
            w = int(round(cfg.default_warmup_min * per_min))
            src = (f"default {cfg.default_warmup_min:g} min (default_warmup_min): the store shows no scale-up with "
                   f"free GPUs and no replica loading on its GPUs")
    if inferred is not None:
        r = int(round(cfg.reaction_min * per_min))
        reaction = (f"{cfg.reaction_min:g} min added (reaction_min): the desired replicas are inferred from traffic, "
                    f"which an autoscaler follows only after its own reaction")
    elif linked:
        r = 0
        lag = reaction_steps(g["rps"].fill_null(0.0).to_numpy(), g["desired"].to_numpy())
        reaction = ("in the autoscaler's own desired replicas" +
                    (f" (they follow the traffic's rises by ~{lag * step_min:g} min)" if lag is not None else ""))
    else:
        r, reaction = 0, "none: the ready replicas stand in for the desired ones"
    return ScaleUp(warmup_steps=w, warmup_source=src, reaction_steps=r, reaction=reaction)


def analyse(services: pl.DataFrame, pools: pl.DataFrame, holdings: pl.DataFrame, *,
            cfg: EventsConfig | None = None, slos: SloTable | None = None,
            incidents: pl.DataFrame | None = None, norms: pl.DataFrame | None = None) -> EventsAnalysis:
    """Find and attribute the tail events of every service in the timeline frames.

    Parameters
    ----------
    services, pools, holdings:
        :func:`analytics.timeline.service_timeline`, ``pool_timeline`` and ``holdings`` output
        (``ts`` Datetime UTC or integer ms, the END of each step).
    cfg:
        Thresholds and settings.
    slos:
        Every service's p99 SLO (:class:`analytics.slo.SloTable`); a service with none (no
        table, or a table without a fallback that does not name it) is judged by the relative
        rule.
    incidents:
        :func:`analytics.events.incidents.load_incidents` output, optional.
    norms:
        ``ts_ms|ts, service, expected, lower, upper`` to use instead of computing the norm band.
    """
    cfg = cfg or EventsConfig()
    slos = slos if slos is not None else SloTable({}, None, "none")
    step_ms = cfg.step_s * 1000
    notes: list[str] = []
    steps = _service_steps(services, pools)
    with_hpa = (services.filter(pl.col("desired_replicas").is_not_null())["service"].unique().to_list()
                if "desired_replicas" in services.columns else [])
    if "gpus_unknown" in pools.columns and pools.height:
        unknown = (with_ts_ms(pools).group_by(pl.col("pool").cast(pl.Utf8).fill_null("default"))
                   .agg(pl.col("gpus_unknown").max()).filter(pl.col("gpus_unknown") >= 1))
        for pool, n in unknown.sort("pool").iter_rows():
            notes.append(f"pool {pool}: up to {n:.1f} GPUs are unknown (no pod label, and neither kube-state-metrics "
                         f"nor the exporter's Kubernetes mode says they are free): free GPUs are a lower bound "
                         f"there, so a tail with too few free GPUs may be scaling lag rather than contention")
    hold = with_ts_ms(holdings).select(
        "ts_ms", pl.col("pool").cast(pl.Utf8).fill_null("default"), pl.col("cls").cast(pl.Utf8).fill_null("unknown"),
        pl.col("team").cast(pl.Utf8).fill_null("(no team)"), pl.col("workload").cast(pl.Utf8).fill_null("(unlabelled)"),
        pl.col("gpus").cast(pl.Float64)).sort("ts_ms")
    if steps.height == 0:
        raise NotEnoughDataError("the service timeline is empty: load latency and traffic metrics "
                                 "(vLLM, http_server_request_duration_seconds) for the range")

    # Norm band per service.
    if norms is not None:
        band = with_ts_ms(norms).select("ts_ms", "service", "expected", "lower", "upper")
    else:
        parts = []
        for (service,), g in steps.group_by(["service"], maintain_order=True):
            parts.append(traffic_norm(g.select("ts_ms", pl.col("rps").fill_null(0.0)), step_s=cfg.step_s)
                         .with_columns(pl.lit(service).alias("service")))
        band = pl.concat(parts)
    steps = steps.join(band, on=["ts_ms", "service"], how="left").sort("service", "ts_ms")
    if cfg.normal_traffic == "expected":
        steps = steps.with_columns(pl.col("expected").alias("t0"))
    else:
        # Inside the band the traffic is normal by definition; only what lies outside is abnormal.
        steps = steps.with_columns(pl.col("rps").clip(pl.col("lower"), pl.col("upper")).alias("t0"))

    held = _held_gpus(hold, steps)
    gpr = _gpus_per_replica(held, steps)
    with_hpa_names = set(map(str, with_hpa))
    steps, inferred = _infer_missing_desired(steps, with_hpa_names, gpr,
                                             int(round(cfg.default_warmup_min * 60 / cfg.step_s)), notes)
    scale_up = {service: _scale_up(g, held[service], gpr[service], cfg, inferred.get(service),
                                   service in with_hpa_names)
                for (service,), g in steps.group_by(["service"], maintain_order=True)}
    steps = capacity_without_batch(steps, {k: v.steps for k, v in scale_up.items()}, gpr)

    models: dict[str, LatencyModel] = {}
    for (service,), g in steps.group_by(["service"], maintain_order=True):
        calm = g.filter((pl.col("gpus_batch") <= 0) & (pl.col("gpus_idle") >= pl.col("gpr")))
        try:
            models[service] = fit_latency_model(calm["rps"].to_numpy(), calm["ready"].to_numpy(),
                                                calm["p99_ms"].to_numpy(),
                                                overload_slope_min=cfg.overload_slope_min)
        except NotEnoughDataError:
            # No clean period: fit on all steps and say so (batch effects leak into L).
            try:
                models[service] = fit_latency_model(g["rps"].to_numpy(), g["ready"].to_numpy(),
                                                    g["p99_ms"].to_numpy(), overload_slope_min=cfg.overload_slope_min)
                notes.append(f"{service}: no uncontended period with free GPUs; latency model fitted on all steps")
            except NotEnoughDataError as exc:
                notes.append(f"{service}: no latency model ({exc}); its events are 'unexplained'")
    steps = evaluate(steps, models)

    regressions = {svc: latency_regression(g, cfg.hac_maxlags)
                   for (svc,), g in steps.group_by(["service"], maintain_order=True)}

    hold_runs = holding_runs(hold, step_ms)
    events: list[Event] = []
    for (service,), g in steps.group_by(["service"], maintain_order=True):
        slo = slos.ms(service)
        p99 = g["p99_ms"].fill_null(0.0).to_numpy()
        if slo is not None:
            above = over_slo(p99, slo)
            limit = np.full(g.height, float(slo))
        elif service in models:
            # Relative rule: against latency at the capacity the autoscaler WANTED (never the one it got).
            wanted = models[service].ms(g["rps"].fill_null(0.0).to_numpy(), g["desired"].to_numpy())
            limit = cfg.relative_k * wanted
            above = p99 > limit
        else:
            notes.append(f"{service}: no SLO and no latency model: no events judged (set one with --slo-ms "
                         f"or [slo] in tidelens.toml)")
            continue
        runs = _runs(g["ts_ms"].to_numpy(), above, cfg)
        surges = surge_runs(g, above, cfg, scale_up[service].steps)
        g = g.with_columns(pl.Series("limit_ms", limit))
        for start_ms, end_ms in runs:
            events.append(_build_event(g, hold, hold_runs, service, start_ms, end_ms, slo, cfg, models.get(service),
                                       regressions[service], scale_up[service], incidents, inferred.get(service),
                                       linked=service in with_hpa_names, surges=surges))
    events.sort(key=lambda e: (e.start_ms, e.service))
    for ev in events:
        check = ev.evidence.get("surge_check")
        if check and check["agrees"] is False:
            notes.append(f"{ev.service} {iso_utc(ev.start_ms)}: {check['says']}")
    return EventsAnalysis(events=events, steps=steps, holdings=hold, models=models, regressions=regressions,
                          warmup_min={k: v.warmup_steps * cfg.step_s / 60 for k, v in scale_up.items()},
                          slos_ms=slos.for_services(steps["service"].unique().to_list()),
                          cfg=cfg, notes=notes)


def _runs(ts_ms: np.ndarray, above: np.ndarray, cfg: EventsConfig) -> list[tuple[int, int]]:
    """The events' intervals of one service, by the configured duration and merge gap."""
    return detect_runs(ts_ms, above, step_ms=cfg.step_s * 1000, min_duration_ms=int(cfg.min_duration_min * 60_000),
                       merge_gap_ms=int(cfg.merge_gap_min * 60_000))


def _event_id(service: str, start_ms: int, slo: float | None, cfg: EventsConfig) -> str:
    return event_id(service, start_ms, {**cfg.settings_key(), "slo_ms": slo, "relative": slo is None})


def detected_ids(services: pl.DataFrame, *, cfg: EventsConfig | None = None,
                 slos: SloTable | None = None) -> set[str] | None:
    """The ids :func:`analyse` gives the events of these settings, found by the SLO rule alone
    (no norm band, no latency model, no attribution: a fraction of its time), so that a request
    for one event (``tidelens report --event``) that names none is refused before that work.

    ``None`` when a service is judged by the relative rule, whose events need the latency model.
    """
    cfg = cfg or EventsConfig()
    slos = slos if slos is not None else SloTable({}, None, "none")
    ids: set[str] = set()
    steps = with_ts_ms(services).select("ts_ms", pl.col("service").cast(pl.Utf8),
                                        pl.col("p99_ms").cast(pl.Float64).fill_nan(None)).sort("service", "ts_ms")
    for (service,), g in steps.group_by(["service"], maintain_order=True):
        slo = slos.ms(service)
        if slo is None:
            return None
        above = over_slo(g["p99_ms"].fill_null(0.0).to_numpy(), slo)
        ids.update(_event_id(service, start_ms, slo, cfg) for start_ms, _ in _runs(g["ts_ms"].to_numpy(), above, cfg))
    return ids


def naive_reading(window: pl.DataFrame, start_ms: int, cfg: EventsConfig) -> dict[str, Any]:
    """What a dashboard would say: latency rose together with traffic -> users.

    The dashboard compares the traffic's peak during the event with its low in the
    ``ramp_lookback_min`` before it (5-step rolling means, so one noisy step decides nothing);
    a rise of at least ``ramp_ratio`` reads as "user behaviour".
    """
    w = window.sort("ts_ms").with_columns(pl.col("rps").rolling_mean(5, min_samples=1).alias("_r"))
    before = w.filter(pl.col("ts_ms") <= start_ms)["_r"].drop_nulls()
    during = w.filter(pl.col("ts_ms") > start_ms)["_r"].drop_nulls()
    low = float(before.min()) if before.len() else float("nan")
    high = float(during.max()) if during.len() else float("nan")
    ratio = high / low if np.isfinite(low) and low > 0 else float("nan")
    blames = bool(np.isfinite(ratio) and ratio >= cfg.ramp_ratio)
    says = ("traffic rose {:.0%} into the tail: read as user behaviour (a noisy tail)".format(ratio - 1)
            if blames else "traffic did not rise: read as an unexplained latency blip")
    return {"blames_users": blames, "cause": "traffic_surge" if blames else "unexplained",
            "traffic_rise_ratio": round(ratio, 4) if np.isfinite(ratio) else None, "says": says,
            "lookback_min": cfg.ramp_lookback_min}


def _r(x: Any, nd: int = 3) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return round(v, nd) if np.isfinite(v) else None


def _infer_missing_desired(steps: pl.DataFrame, with_hpa: set[str], gpr: dict[str, float], settle_steps: int,
                           notes: list[str]) -> tuple[pl.DataFrame, dict[str, InferredDemand]]:
    """Desired replicas from traffic for the services no autoscaler signal is linked to
    (:func:`analytics.measures.infer_desired`), with a note per service saying so."""
    inferred: dict[str, InferredDemand] = {}
    parts = []
    for (service,), g in steps.group_by(["service"], maintain_order=True):
        if service not in with_hpa:
            got = infer_desired(g["rps"].to_numpy(), g["ready"].to_numpy(), g["gpus_idle"].to_numpy(),
                                gpr[service], settle_steps)
            if got is None:
                notes.append(f"{service}: no autoscaler desired replicas linked "
                             f"(kube_horizontalpodautoscaler_status_desired_replicas) and too few uncontended steps "
                             f"to infer them from traffic; ready replicas stand in, so capacity withheld by batch "
                             f"cannot be measured")
            else:
                g = g.with_columns(pl.Series("desired", got[0]))
                inferred[service] = got[1]
                notes.append(f"{service}: no autoscaler desired replicas linked; {got[1].describe()}")
        parts.append(g)
    return (pl.concat(parts) if parts else steps), inferred


def _build_event(g: pl.DataFrame, hold: pl.DataFrame, runs: pl.DataFrame, service: str, start_ms: int, end_ms: int,
                 slo: float | None, cfg: EventsConfig, model: LatencyModel | None, regression: dict[str, Any],
                 scale_up: ScaleUp, incidents: pl.DataFrame | None, inferred: InferredDemand | None = None,
                 linked: bool = True, surges: list[dict[str, Any]] | None = None) -> Event:
    step_ms = cfg.step_s * 1000
    look = int(cfg.asked_lookback_min * 60_000)
    window = g.filter((pl.col("ts_ms") > start_ms - look) & (pl.col("ts_ms") <= end_ms))
    naive_look = int(cfg.ramp_lookback_min * 60_000)
    naive_window = g.filter((pl.col("ts_ms") > start_ms - naive_look) & (pl.col("ts_ms") <= end_ms))
    ev = window.filter(pl.col("ts_ms") > start_ms)
    pool = str(ev["pool"][0])
    peak_i = int(ev["p99_ms"].fill_null(-1.0).arg_max())
    peak = ev.row(peak_i, named=True)
    first = ev.row(0, named=True)
    if model is not None:
        att = attribute_event(window, start_ms, cfg, slo)
        shares, cause = att.shares, att.cause
    else:
        att, shares, cause = None, {"batch_contention": 0.0, "traffic_surge": 0.0, "unexplained": 1.0}, "unexplained"
    naive = naive_reading(naive_window, start_ms, cfg)
    check = None
    if model is not None and surges:
        tail_ms = scale_up.steps * step_ms
        after = g.filter((pl.col("ts_ms") > start_ms) & (pl.col("ts_ms") <= end_ms + tail_ms))
        check = check_surge(after, after["limit_ms"].to_numpy(), surges, start_ms, end_ms,
                            shares.get("traffic_surge", 0.0), cfg, scale_up.steps)
    incident = match_incident(incidents, service, start_ms, end_ms)
    recorded = None
    if incident is not None:
        recorded = {"recorded_cause": incident["recorded_cause"], "as_cause": incident["cause_class"],
                    "start": iso_utc(int(incident["start_ms"])), "end": iso_utc(int(incident["end_ms"])),
                    "extra": {k: v for k, v in incident.items()
                              if k not in ("start_ms", "end_ms", "service", "recorded_cause", "cause_class")}}
    misattributed = cause == "batch_contention" and (
        naive["blames_users"] or (recorded is not None and recorded["as_cause"] != "batch_contention"))
    holders = holders_at(hold, runs, pool, int(first["ts_ms"]), step_ms)
    batch_holders = [h for h in holders if h["cls"] == "batch"]
    evidence: dict[str, Any] = {
        "pool": pool, "slo_ms": _r(slo), "duration_min": _r((end_ms - start_ms) / 60_000, 2),
        "peak_at": iso_utc(step_start_ms(int(peak["ts_ms"]), step_ms)),
        "holders_at_start": holders,
        "batch_gpus_at_start": _r(first["gpus_batch"]),
        "batch_held_since": min((h["held_since"] for h in batch_holders), default=None),
        "free_gpus_at_start": _r(first["gpus_idle"]),
        "pool_gpus_at_start": _r(first["gpus_total"]),
        "free_gpus_when_asked": _r(att.free_gpus_when_asked) if att else None,
        "asked_at": iso_utc(step_start_ms(att.asked_at_ms, step_ms)) if att and att.asked_at_ms is not None else None,
        # What the notes say too: an autoscaler, the inference from traffic, or (neither) the
        # ready replicas standing in (it said "autoscaler" while the notes said none was linked).
        "desired_replicas_source": (inferred.describe() if inferred else "autoscaler" if linked
                                    else "ready replicas (no autoscaler linked, too few uncontended steps "
                                         "to infer it from traffic)"),
        "desired_replicas_at_start": _r(first["desired"]), "ready_replicas_at_start": _r(first["ready"]),
        "desired_replicas_at_peak": _r(peak["desired"]), "ready_replicas_at_peak": _r(peak["ready"]),
        "replicas_without_batch_at_peak": _r(peak["c0"]),
        "shortfall_replicas_max": _r(att.shortfall_replicas_max) if att else None,
        "warmup_min": _r(scale_up.warmup_steps * cfg.step_s / 60, 2),
        # Capacity without batch waits for the pool's own scale-up: which warm-up, from where.
        "warmup_source": scale_up.warmup_source,
        "autoscaler_reaction": scale_up.reaction,
        "scale_up_min_without_batch": _r(scale_up.steps * cfg.step_s / 60, 2),
        "traffic_rps_at_peak": _r(peak["rps"]), "traffic_norm_rps_at_peak": _r(peak["expected"]),
        "traffic_norm_upper_rps_at_peak": _r(peak["upper"]),
        "traffic_vs_norm_at_peak": _r(peak["rps"] / peak["expected"]) if peak["expected"] else None,
        "traffic_above_band_share": _r(att.traffic_above_band_share) if att else None,
        # the longest run above the band: a surge (not noise) from min_duration_min on
        "traffic_surge_min": _r(att.surge_min, 2) if att else None,
        "p99_observed_ms_at_peak": _r(peak["p99_ms"]),
        "p99_load_explained_ms_at_peak": _r(np.exp(peak["l_tc"])) if model else None,
        "counterfactual_p99_ms_at_peak": ({
            "normal_traffic_without_batch": _r(np.exp(peak["l_t0c0"])),
            "actual_traffic_without_batch": _r(np.exp(peak["l_tc0"])),
            "normal_traffic_actual_capacity": _r(np.exp(peak["l_t0c"])),
            "actual_traffic_desired_replicas": _r(np.exp(peak["l_tcw"]))} if model else None),
        "latency_model": model.describe() if model else None,
        "regression": regression,
        "naive_reading": naive,
        # A surge inside batch contention, against the store's own surges of its size without batch.
        "surge_check": check,
        "incident": recorded,
    }
    return Event(id=_event_id(service, start_ms, slo, cfg), service=service, pool=pool,
                 start_ms=int(start_ms), end_ms=int(end_ms),
                 peak_p99_ms=float(peak["p99_ms"]) if peak["p99_ms"] is not None else float("nan"),
                 slo_ms=float(slo) if slo is not None else float("nan"), cause=cause, shares=shares,
                 misattributed=bool(misattributed), evidence=evidence)
