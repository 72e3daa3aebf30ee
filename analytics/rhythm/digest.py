"""The rhythm of a store's signals, as the CLI prints it and the page shows it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from analytics.errors import NotEnoughDataError
from analytics.ingest.servegen import ASSUMPTION_NOTE
from analytics.rhythm.config import RhythmConfig
from analytics.rhythm.decompose import Decomposition, decompose
from analytics.rhythm.inputs import RhythmSignal, SignalSource
from analytics.rhythm.summary import RhythmSummary, daily_profile, hour_of_week, summarise
from analytics.store import Store
from analytics.timeline import TimelineConfig, Timelines
from analytics.timeline.cache import timelines_origin

ONE_DAY_NOTE = "one day: not a rhythm yet"
# Hours of the day a short range must cover before its hour-of-day profile is worth a chart.
PROFILE_MIN_HOURS = 6


@dataclass
class SignalRhythm:
    """One signal's decomposition and summary (or why there is none).

    ``profile``: where the range is too short for a rhythm (under two days), the hour-of-day
    means it does have (``hour, mean``), shown as :data:`ONE_DAY_NOTE` rather than nothing.
    """

    signal: RhythmSignal
    decomposition: Decomposition | None
    summary: RhythmSummary | None
    error: str | None = None
    profile: pl.DataFrame | None = None

    def profile_peak_trough(self) -> tuple[int | None, int | None]:
        """The hours of the short range's highest and lowest mean (``None`` without a profile)."""
        if self.profile is None:
            return None, None
        known = self.profile.drop_nulls("mean")
        if known.height == 0:
            return None, None
        return (int(known.sort("mean", descending=True)["hour"][0]),
                int(known.sort("mean")["hour"][0]))

    def as_dict(self) -> dict:
        if self.summary is None:
            out = {"signal": self.signal.name, "kind": self.signal.kind, "error": self.error}
            if self.profile is not None:
                peak, trough = self.profile_peak_trough()
                out.update(note=ONE_DAY_NOTE, peak_hour=peak, trough_hour=trough,
                           hour_of_day=[{"hour": int(h), "mean": m}
                                        for h, m in self.profile.select("hour", "mean").iter_rows()])
            return out
        return {"kind": self.signal.kind, **self.summary.as_dict(), "signal": self.signal.name}


def analyse_signal(source: SignalSource, signal: RhythmSignal | str, cfg: RhythmConfig) -> SignalRhythm:
    """Decompose and summarise one signal; too little data becomes ``error``, not an exception."""
    sig = source.find(signal) if isinstance(signal, str) else signal
    frame = source.frame(sig)
    if sig.kind == "latency":
        cfg = replace(cfg, log_scale=True)  # tails are multiplicative
    try:
        dec = decompose(frame, "value", cfg)
    except NotEnoughDataError as exc:
        error = str(exc).replace("value:", f"{sig.name}:", 1)
        return SignalRhythm(sig, None, None, error=error, profile=_short_profile(frame, cfg))
    dec.value_col = sig.name
    notes = [ASSUMPTION_NOTE] if source.is_servegen() and sig.kind == "traffic" else []
    notes += source.problems
    batch = source.batch_for(sig) if sig.kind == "traffic" else None
    summary = summarise(dec, cfg, batch=batch, signal=sig.name, extra_notes=notes)
    return SignalRhythm(sig, dec, summary)


def _short_profile(frame: pl.DataFrame, cfg: RhythmConfig) -> pl.DataFrame | None:
    """The hour-of-day means of a range too short for a rhythm, when it covers enough hours."""
    values = (frame.with_columns(pl.col("value").cast(pl.Float64).fill_nan(None))
              .filter(pl.col("value").is_not_null()))
    if values.height < 2:
        return None
    profile = daily_profile(values, "value", cfg.timezone)
    return profile if profile["mean"].drop_nulls().len() >= PROFILE_MIN_HOURS else None


def rhythm_report(store: Store, cfg: RhythmConfig | None = None, *, signals: list[str] | None = None,
                  step_s: int = 60, wmap: Any = None) -> list[SignalRhythm]:
    """The rhythm of the named signals, or of every traffic and batch signal of the store
    (``wmap``: the workload map that classes batch, ``None`` the defaults); computed once per
    store content and settings, and shared (never changed in place)."""
    cfg = cfg or RhythmConfig()
    # Once per store content, step, map, signals and settings (analytics.resultcache); a warm
    # call reads the answer without reading the timelines.
    origin = timelines_origin(store, TimelineConfig(step_s=step_s), wmap)
    found = origin.peek("rhythm", (signals, cfg)) if origin is not None else None
    if found is not None:
        return found  # type: ignore[no-any-return]
    source = SignalSource(store, step_s=step_s, wmap=wmap)
    return source.timelines().remembered("rhythm", (signals, cfg),
                                         lambda: _signals_rhythm(source, cfg, signals))


def _signals_rhythm(source: SignalSource, cfg: RhythmConfig, signals: list[str] | None) -> list[SignalRhythm]:
    store = source.store
    if signals:
        chosen = [source.find(name) for name in signals]
    else:
        chosen = [s for s in source.signals() if s.kind in ("traffic", "batch")]
    if not chosen:
        problems = "; ".join(source.problems)
        raise NotEnoughDataError((
            f"{store.path}: no request-rate or batch signal found; load a service's metrics, a "
            f"pool's dcgm-exporter data, or a CSV of a request-rate metric (e.g. 'request_rate')")
            + (f" ({problems})" if problems else ""))
    return [analyse_signal(source, s, cfg) for s in chosen]


@dataclass
class RhythmPageData:
    """Everything the Rhythm page draws, from one call."""

    signals: list[RhythmSignal]
    chosen: SignalRhythm | None
    traffic_how: pl.DataFrame | None = None
    batch_how: pl.DataFrame | None = None
    p99: SignalRhythm | None = None
    assumption_notes: list[str] = field(default_factory=list)


def rhythm_page_data(store: Store, cfg: RhythmConfig, *, signal: str | None = None, step_s: int = 60,
                     start_ms: int | None = None, end_ms: int | None = None, wmap: Any = None,
                     timelines: Timelines | None = None) -> RhythmPageData:
    """The chosen signal's rhythm (default: the first traffic signal), hour-of-week frames of its
    traffic and of batch holdings in its pool, and its service's p99 rhythm where there is one.

    ``wmap``: the workload map that classes batch and inference (``None``: defaults).
    ``timelines``: this step's and range's service and pool timelines, made with ``wmap``,
    when the caller has them (the app's shared ones): the store is then read only for the
    request-rate metrics outside any service.
    """
    source = SignalSource(store, step_s=step_s, start_ms=start_ms, end_ms=end_ms, wmap=wmap,
                          timelines=timelines)
    # Once per store content, range, map, signal and settings (analytics.resultcache).
    return source.timelines().remembered("rhythm-page", (signal, cfg),
                                         lambda: _page_data(source, cfg, signal))


def _page_data(source: SignalSource, cfg: RhythmConfig, signal: str | None) -> RhythmPageData:
    signals = source.signals()
    if not signals:
        return RhythmPageData(signals=[], chosen=None, assumption_notes=list(source.problems))
    sig = next((s for s in signals if s.name == signal), signals[0])  # a stale choice falls back
    chosen = analyse_signal(source, sig, cfg)
    traffic_sig = sig if sig.kind == "traffic" else next((s for s in signals if s.kind == "traffic"), None)
    data = RhythmPageData(signals=signals, chosen=chosen,
                          assumption_notes=([ASSUMPTION_NOTE] if source.is_servegen() else [])
                          + source.problems)
    if traffic_sig is not None:
        data.traffic_how = hour_of_week(source.frame(traffic_sig), "value", cfg.timezone)
        batch = source.batch_for(traffic_sig)
        if batch is not None and batch.height:
            data.batch_how = hour_of_week(batch, "gpus_batch", cfg.timezone)
        p99_name = f"p99_ms:{traffic_sig.entity}"
        p99_sig = next((s for s in signals if s.name == p99_name), None)
        if p99_sig is not None:
            data.p99 = analyse_signal(source, p99_sig, cfg)
    return data
