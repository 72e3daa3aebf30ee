"""The forecast in words and tables: what the CLI prints, the page shows and the review's last section says.

A range is called an 80% range only when it was calibrated on the backtest's earlier days (the
project's contract: a range that has not been scored is not called one); otherwise it is the
outcomes' spread, and says so. Times are shown in the zone asked for.
"""

from __future__ import annotations

from typing import Any

from analytics.forecast.hindcast import Backtest
from analytics.forecast.horizon import DayForecast, Forecast
from analytics.forecast.skill import COVERAGE_BAND
from analytics.times import local_naive


def clock(ms: int, tz: str = "UTC") -> str:
    """``HH:MM`` of an epoch-ms time in ``tz``."""
    return local_naive(int(ms), tz).strftime("%H:%M")


def moment(ms: int, tz: str = "UTC") -> str:
    """A moment as a reader says it: ``Tue 2026-10-06 18:00 UTC``."""
    return local_naive(int(ms), tz).strftime("%a %Y-%m-%d %H:%M") + f" {tz}"


def hours_moved(h: float) -> str:
    """How far a run's end moves, in words (no leading sign: a table cell never starts with one).

    >>> hours_moved(-1.0), hours_moved(2.25), hours_moved(0.0)
    ('1.0 h earlier', '2.2 h later', 'not at all')
    """
    if abs(h) < 0.05:
        return "not at all"
    return f"{abs(h):.1f} h {'earlier' if h < 0 else 'later'}"


def range_text(rng: tuple[float, float] | list[float] | None, calibrated: bool) -> str:
    """A minutes range with what it is.

    >>> range_text((10.0, 90.0), True), range_text((10.0, 90.0), False)
    ('80% range 10-90', 'spread 10-90, not yet scored')
    """
    if not rng:
        return "no range"
    return f"80% range {rng[0]:,.0f}-{rng[1]:,.0f}" if calibrated else f"spread {rng[0]:,.0f}-{rng[1]:,.0f}, not yet scored"


def day_sentence(day: DayForecast, tz: str = "UTC", name: str = "") -> str:
    """One day's forecast in a sentence."""
    head = f"{name or day.day} ({day.day})" if name else day.day
    if not day.windows:
        return (f"{head}: no collision with batch expected (chance {day.collision_probability:.0%}); "
                f"{day.minutes_expected:,.0f} minutes over the SLO expected ({range_text(day.minutes_range, day.calibrated)}).")
    wins = "; ".join(f"{w.service} {clock(w.start_ms, tz)}-{clock(w.end_ms, tz)} ({w.probability:.0%})"
                     for w in day.windows)
    runs = sorted({r for w in day.windows for r in w.runs})
    return (f"{head}: a {day.collision_probability:.0%} chance of a collision with batch: {wins}; "
            f"{day.minutes_expected:,.0f} minutes over the SLO expected ({range_text(day.minutes_range, day.calibrated)})"
            + (f", the GPUs held by {', '.join(runs)}" if runs else "") + ".")


def action_sentence(fc: Forecast, day: DayForecast, tz: str = "UTC") -> str | None:
    """The recommended change for ``day``, or why there is none."""
    acts = [a for a in fc.actions if a.day == day.day]
    if not acts:
        return None
    best = next((a for a in acts if a.recommended), None)
    if best is None:
        return (f"No change tried tonight avoids it on the longest likely night ({len(acts)} tried: "
                + ", ".join(a.text for a in acts) + ").")
    cost = ("no batch work delayed or lost" if best.gpu_hours_delayed + best.gpu_hours_lost < 0.5 else
            f"{best.gpu_hours_delayed:,.0f} GPU-hours of batch work done later"
            + (f", {best.gpu_hours_lost:,.0f} lost" if best.gpu_hours_lost >= 0.5 else ""))
    return (f"The smallest change tonight that avoids it: {best.text} (chance left {best.probability_after:.0%}; "
            f"{cost}; the run ends {hours_moved(best.end_moves_h)}).")


def window_rows(fc: Forecast, tz: str = "UTC") -> list[list[Any]]:
    """One row per collision window: day, service, when, chance, minutes, range, runs."""
    return [[w.day, w.service, f"{clock(w.start_ms, tz)}-{clock(w.end_ms, tz)}",
             f"{clock(w.earliest_ms, tz)}-{clock(w.latest_ms, tz)}", f"{w.probability:.0%}", f"{w.minutes_expected:,.0f}",
             range_text(w.minutes_range, _day_of(fc, w.day).calibrated), ", ".join(w.runs)] for w in fc.windows()]


WINDOW_HEADER = ["day", "service", "when (median)", "as early / late as", "chance", "minutes over the SLO that day",
                 "range", "batch runs holding the GPUs"]


def _day_of(fc: Forecast, day: str) -> DayForecast:
    return next(d for d in fc.days if d.day == day)


def run_rows(fc: Forecast, tz: str = "UTC") -> list[list[Any]]:
    """One row per run ahead: workload, GPUs, chance, start, end (first to last quantile), why."""
    return [[r.workload, r.gpus, f"{r.probability:.0%}", ("running since " if r.running else "") + clock(r.start_ms, tz),
             f"{clock(r.ends_ms[0], tz)}-{clock(r.ends_ms[-1], tz)}", r.basis] for r in fc.runs]


RUN_HEADER = ["batch run", "GPUs", "chance", "start", "end (shortest to longest likely)", "from"]


def action_rows(fc: Forecast) -> list[list[Any]]:
    """One row per action tried: day, change, chance before and left, GPU-hours delayed and lost."""
    return [[a.day, a.text + (" (recommended)" if a.recommended else ""), f"{a.probability_before:.0%}",
             f"{a.probability_after:.0%}", f"{a.gpu_hours_delayed:,.0f}", f"{a.gpu_hours_lost:,.0f}",
             hours_moved(a.end_moves_h)] for a in fc.actions]


ACTION_HEADER = ["day", "change tonight", "chance before", "chance left", "batch GPU-h done later", "GPU-h lost",
                 "the run ends"]


def forecast_markdown(fc: Forecast, tz: str = "UTC") -> str:
    """Each day of the horizon as a list item, the change tonight that avoids its collision under it."""
    lines = []
    for day in fc.days:
        lines.append(f"- {day_sentence(day, tz)}")
        act = action_sentence(fc, day, tz)
        if act:
            lines.append(f"  - {act}")
    return "\n".join(lines)


def backtest_rows(bt: Backtest) -> list[list[Any]]:
    """One row per day: the 18:00 and 07:00 chances and what happened, minutes forecast and observed."""
    out = []
    for r in bt.rows:
        ev, mo = r.moments.get("evening", {}), r.moments.get("morning", {})
        out.append([r.day, r.weekday, _p(ev.get("probability")), _p(mo.get("probability")),
                    "yes" if ev.get("observed") else "no", _p(r.base_rate), "-" if r.last_week is None else _p(r.last_week),
                    f"{ev.get('minutes_expected', 0):,.0f}", range_text(ev.get("minutes_range"), bool(ev.get("calibrated"))),
                    f"{ev.get('minutes_observed', 0):,.0f}"])
    return out


BACKTEST_HEADER = ["day", "weekday", "chance at 18:00", "at 07:00", "collided", "weekday base rate", "last week",
                   "minutes forecast at 18:00", "range", "observed"]


def _p(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def _b(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def score_sentences(bt: Backtest) -> list[str]:
    """The backtest's scores in words."""
    s = bt.scores
    if not s.get("days"):
        return ["No day of the store has a week of history before it: nothing to score yet."]
    b = s["brier"]
    out = [f"Over {s['days']} days ({s['collided']} collided), the forecast made at 18:00 the day before scored a Brier "
           f"of {_b(b['evening'])} (0 is perfect) against {_b(b['weekday_base_rate'])} for the weekday's base rate and "
           f"{_b(b['last_week'])} for \"as the same weekday last week\"; the 07:00 update {_b(b['morning'])}."]
    cov = []
    for moment, label in (("evening", "18:00"), ("morning", "07:00")):
        c = s["coverage"][moment]
        parts = [f"{what} {c[key]['share']:.0%} of {c[key]['n']}" for key, what in
                 (("day_minutes", "the day's minutes"), ("service_minutes", "each service's"),
                  ("traffic_band", "traffic steps"), ("run_end", "runs' ends")) if c[key]["share"] is not None]
        if parts:
            cov.append(f"at {label}: " + ", ".join(parts))
    if cov:
        out.append(f"Its 80% ranges held (an 80% range holds {COVERAGE_BAND[0]:.0%}-{COVERAGE_BAND[1]:.0%}) "
                   + "; ".join(cov) + " (a day's minutes calibrated on the earlier days; the first days have none).")
    m = s["minutes"]["evening"]
    if m["mae"] is not None:
        out.append(f"The minutes over the SLO forecast at 18:00 were off by {m['mae']:,.0f} a day on average "
                   f"(bias {m['bias']:+,.0f}); at 07:00 by {s['minutes']['morning']['mae']:,.0f}.")
    return out
