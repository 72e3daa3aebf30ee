"""Inference traffic: the daily and weekly rhythm, its noise, genuine surges, and arrivals.

The rhythm is a weekday curve (overnight trough, a ramp starting at ``ramp_hour_utc`` that
reaches the day's peak ~30 minutes later, an evening decline) scaled down on weekends, times a
multiplicative AR(1) noise and a per-day level. Surges multiply it on a few days. The
``servegen`` shape replaces the rhythm by the bundled production trace
(``data/servegen_m_large_rate.csv``).

Random streams are separate per purpose so that removing surges (a counterfactual run) leaves
the noise and the arrivals' randomness untouched (common random numbers).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy.signal import lfilter

from analytics.sample.cluster import ScenarioConfig, ServiceConfig

MIN_PER_DAY = 1440
SERVEGEN_CSV = Path(__file__).resolve().parents[2] / "data" / "servegen_m_large_rate.csv"


@dataclass(frozen=True)
class Surge:
    """One genuine surge: traffic of ``service`` times ``factor`` over ``[start_min, end_min)``."""

    service: str
    start_min: int
    end_min: int
    factor: float


def _smoothstep(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 0.0, 1.0)
    return x * x * (3.0 - 2.0 * x)


def weekday_shape(hour_utc: np.ndarray, trough: float, ramp_hour: float) -> np.ndarray:
    """Share of the peak at each hour of a weekday (1.0 at the day's plateau)."""
    early = trough + (0.3 - trough) * _smoothstep((hour_utc - (ramp_hour - 2.0)) / 2.0)
    ramp = early + (1.0 - early) * _smoothstep((hour_utc - ramp_hour) / 0.5)
    afternoon = 1.0 + 0.06 * np.sin((hour_utc - 12.0) / 5.0 * np.pi)
    evening = _smoothstep((hour_utc - 17.0) / 6.0)
    day = np.where(hour_utc < ramp_hour + 0.5, ramp, afternoon)
    return day * (1.0 - evening) + trough * evening


def rhythm(svc: ServiceConfig, scenario: ScenarioConfig, days: int) -> np.ndarray:
    """Normal traffic share of peak per minute (no noise, no surges)."""
    minute = np.arange(days * MIN_PER_DAY)
    if scenario.traffic == "servegen" and svc.kind == "vllm":
        return servegen_shape(days)
    hour = (minute % MIN_PER_DAY) / 60.0
    shape = weekday_shape(hour, svc.trough_ratio, scenario.ramp_hour_utc)
    weekday = (minute // MIN_PER_DAY) % 7  # the sample starts on a Monday
    weekend = weekday >= 5
    return np.where(weekend, svc.trough_ratio + (shape - svc.trough_ratio) * svc.weekend_ratio, shape)


def load_servegen_rate() -> tuple[np.ndarray, np.ndarray]:
    """The bundled aggregated ServeGen trace: (timestamp_s, rate_rps) at 10-minute bins."""
    with SERVEGEN_CSV.open() as fh:
        rows = [(float(r["timestamp_s"]), float(r["rate_rps"])) for r in csv.DictReader(fh)]
    arr = np.array(rows)
    return arr[:, 0], arr[:, 1]


def servegen_shape(days: int) -> np.ndarray:
    """ServeGen traffic as a share of its 95th percentile, per minute, tiled to ``days``.

    Assumption (the trace names no date or zone): its timestamp 0 is taken as 00:00 UTC of the
    sample's first day, a Monday. 14 days are tiled by whole weeks.
    """
    ts_s, rate = load_servegen_rate()
    per_min = np.interp(np.arange(int(ts_s[-1] // 60) + 10) * 60.0, ts_s, rate)
    per_min = per_min[: (len(per_min) // MIN_PER_DAY) * MIN_PER_DAY]
    reps = int(np.ceil(days * MIN_PER_DAY / len(per_min)))
    tiled = np.tile(per_min, reps)[: days * MIN_PER_DAY]
    return tiled / np.percentile(per_min, 95)


def ar1_noise(rng: np.random.Generator, n: int, sigma: float, phi: float = 0.97) -> np.ndarray:
    """Stationary AR(1) on the log scale with marginal sd ``sigma``."""
    eps = rng.standard_normal(n) * sigma * np.sqrt(1.0 - phi * phi)
    # lfilter is the vectorised x[t] = phi x[t-1] + eps[t] (from rest; the first value alone is
    # set to a stationary draw, which the next minutes forget within ~1/(1-phi) = 30 minutes)
    out = lfilter([1.0], [1.0, -phi], eps)
    out[0] = eps[0] / np.sqrt(1.0 - phi * phi)
    return out


def plan_surges(scenario: ScenarioConfig, days: int, rng: np.random.Generator) -> list[Surge]:
    """Pick the surge days, services, times and sizes (weekdays only); with ``weekly``, the
    first week's surges repeated every week."""
    cfg = scenario.surges
    if cfg.weekly and days > 7:
        first = plan_surges(replace(scenario, surges=replace(cfg, weekly=False)), 7, rng)
        return [Surge(s.service, s.start_min + w * 7 * MIN_PER_DAY, min(s.end_min + w * 7 * MIN_PER_DAY,
                                                                         days * MIN_PER_DAY), s.factor)
                for w in range((days + 6) // 7) for s in first if s.start_min + w * 7 * MIN_PER_DAY < days * MIN_PER_DAY]
    n = int(round(cfg.days * days / 21.0))
    weekdays = [d for d in range(days) if d % 7 < 5]
    if n <= 0 or not weekdays:
        return []
    chosen = sorted(rng.choice(weekdays, size=min(n, len(weekdays)), replace=False).tolist())
    morning = set(rng.permutation(chosen)[: cfg.morning_days].tolist()) if cfg.morning_days else set()
    names = [s.name for s in scenario.services]
    out = []
    for d in chosen:
        if d in morning:
            hour = scenario.ramp_hour_utc + rng.uniform(cfg.ramp_offset_min[0] / 60.0, cfg.ramp_offset_min[1] / 60.0)
            service = names[0]
        else:
            hour = rng.uniform(*cfg.hours_utc)
            service = names[0] if rng.random() < 0.7 or len(names) == 1 else names[1]
        start = d * MIN_PER_DAY + int(hour * 60)
        length = int(rng.integers(cfg.minutes[0], cfg.minutes[1] + 1))
        out.append(Surge(service, start, min(start + length, days * MIN_PER_DAY),
                         round(float(rng.uniform(*cfg.factor)), 2)))
    return out


def surge_multiplier(surges: list[Surge], service: str, n_min: int, rise_min: int) -> np.ndarray:
    """Per-minute multiplier of a service's traffic from its surges (1.0 outside them)."""
    mult = np.ones(n_min)
    t = np.arange(n_min)
    for s in surges:
        if s.service != service:
            continue
        up = _smoothstep((t - s.start_min + 1) / max(rise_min, 1))
        down = 1.0 - _smoothstep((t - s.end_min + 1) / max(rise_min, 1))
        env = np.minimum(up, down)
        mult *= 1.0 + (s.factor - 1.0) * env
    return mult


def arrivals(rate_rps: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Requests per minute: Poisson counts by their normal approximation on fixed draws ``z``.

    Fixed standard-normal draws (one per minute) keep counterfactual runs on the same noise.
    """
    mean = rate_rps * 60.0
    return np.maximum(0, np.rint(mean + np.sqrt(mean) * z)).astype(np.int64)
