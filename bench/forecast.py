"""The collision forecast scored on its own past (issue 56's done-when), and how fast it answers.

**The backtest** (``--cases``): for each case (a simulator scenario, an export variant of one, the
nightly run's length drifting, the bundled sample) and seed, a 21-day store; every day with a
week of history is forecast at 18:00 the day before and at 07:00 (``analytics.forecast.hindcast``)
and scored against what happened: Brier beside the weekday's base rate and "as last week",
reliability bins, the minutes' error, the coverage of every 80% range. Each store's result is
kept as JSON in ``--keep`` (a store is simulated, loaded and scored once; a later run with
``--report`` pools what is kept), so the matrix can run in pieces of a few minutes each.

**The speed** (``--speed``): on the bundled sample (21 days x 64 GPUs), the forecast at its end
cold (the two services calibrated) and warm (the calibrations kept, as the app keeps them), and
the actions; target: under 3 s.

Cases: ``morning``, ``mixed``, ``compound`` (48 GPUs) are the contention scenarios the done-when
pools; ``partitioned`` is the clean control (batch never touches inference's GPUs: a probability
under 0.2 every day); ``morning+no-autoscaler``, ``morning+hpa-prefix+no-ksm-pods`` are export
variants; ``morning-drift`` is the morning pool whose nightly run grows 15 minutes longer each day
of its last week; ``sample`` is the bundled sample (seed 7).

Usage::

    .venv/bin/python bench/forecast.py --cases morning,mixed --seeds 1,2 [--keep DIR]
    .venv/bin/python bench/forecast.py --report [--keep DIR]
    .venv/bin/python bench/forecast.py --speed
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

import numpy as np  # noqa: E402

from analytics.change.basis import kueue_signals  # noqa: E402
from analytics.events import EventsConfig  # noqa: E402
from analytics.events.pipeline import analyse_timelines  # noqa: E402
from analytics.forecast import forecast  # noqa: E402
from analytics.forecast.action import actions_for  # noqa: E402
from analytics.forecast.hindcast import backtest, range_coverage  # noqa: E402
from analytics.forecast.frames import store_frames  # noqa: E402
from analytics.forecast.skill import COVERAGE_BAND, RELIABILITY_TOLERANCE, brier, reliability  # noqa: E402
from analytics.sample import SCENARIOS, ensure_default_store, load_into, simulate  # noqa: E402
from analytics.sample.scenarios import STORY_GPUS  # noqa: E402
from analytics.slo import resolve_slos  # noqa: E402
from analytics.store import Store  # noqa: E402

CONTENTION = ("morning", "mixed", "compound")
CLEAN = "partitioned"
DAYS = 21
DRIFT = {"finetune_drift_h_per_day": 0.25, "finetune_drift_from_day": 14}
KEEP = Path(tempfile.gettempdir()) / "tidelens-bench-forecast"


def _register_drift() -> None:
    """``morning-drift``: the morning pool whose nightly run grows longer each day of its last week."""
    base = SCENARIOS["morning"]
    SCENARIOS["morning-drift"] = replace(base, name="morning-drift", batch=replace(base.batch, **DRIFT),
                                         description=base.description + " Its last week the nightly run grows.")


def score_store(path: Path) -> dict:
    """The backtest of one store file, as JSON, with how long it took."""
    t0 = time.perf_counter()
    with Store(str(path), read_only=True) as st:
        tl = store_frames(st)
        slos = resolve_slos(st)
        kq = kueue_signals(st)
    events = analyse_timelines(tl, EventsConfig(step_s=60), slos=slos)
    bt = backtest(tl, slos=slos, events=events, kueue=kq)
    out = bt.as_json()
    out["seconds"] = time.perf_counter() - t0
    return out


def run_case(case: str, seed: int, keep: Path) -> dict:
    """Simulate (or open the bundled sample), load, backtest; kept in ``keep``."""
    done = keep / f"{case}-seed{seed}.json"
    if done.exists():
        return json.loads(done.read_text())
    t0 = time.perf_counter()
    if case == "sample":
        result = score_store(ensure_default_store())
    else:
        scenario, *variants = case.split("+")
        res = simulate(scenario, days=DAYS, gpus=STORY_GPUS.get(scenario, 64), seed=seed, variants=tuple(variants))
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "s.duckdb"
            with Store(str(path)) as st:
                load_into(st, res)
            result = score_store(path)
    result["case"], result["seed"], result["total_seconds"] = case, seed, time.perf_counter() - t0
    keep.mkdir(parents=True, exist_ok=True)
    done.write_text(json.dumps(result))
    return result


def _rows(results: list[dict], moment: str) -> tuple[np.ndarray, np.ndarray]:
    key = "collision_probability" if moment == "evening" else "update_0700"
    p, y = [], []
    for r in results:
        for d in r["days"]:
            src = d if moment == "evening" else d[key]
            if src.get("collision_probability") is None:
                continue
            p.append(src["collision_probability"])
            y.append(float(src["collision_observed"]))
    return np.array(p), np.array(y)


def _baselines(results: list[dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    base, last, y = [], [], []
    for r in results:
        for d in r["days"]:
            if d.get("collision_probability") is None:
                continue
            base.append(d["baseline_weekday_rate"])
            last.append(d["baseline_last_week"] if d["baseline_last_week"] is not None else d["baseline_weekday_rate"])
            y.append(float(d["collision_observed"]))
    return np.array(base), np.array(last), np.array(y)


def _pooled_coverage(results: list[dict], moment: str, what: str) -> tuple[float | None, int]:
    """Pooled coverage; a store's minutes ranges re-scored from its kept raw ranges by the library's
    own online calibration (``range_coverage``), the traffic band and runs' ends as kept."""
    hit = n = 0.0
    for r in results:
        if what in ("day_minutes", "service_minutes", "day_minutes_raw"):
            rows = [d if moment == "evening" else d["update_0700"] for d in r["days"]]
            c = range_coverage([x for x in rows if x.get("minutes_raw_range") is not None])[what]
        else:
            c = r["scores"].get("coverage", {}).get(moment, {}).get(what, {})
        if c.get("share") is not None:
            hit += c["share"] * c["n"]
            n += c["n"]
    return (hit / n if n else None), int(n)


def _fmt(x: float | None, nd: int = 3) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def summarise(label: str, results: list[dict]) -> dict:
    """Pooled scores of some stores' backtests."""
    pe, ye = _rows(results, "evening")
    pm, ym = _rows(results, "morning")
    base, last, yb = _baselines(results)
    out = {"label": label, "stores": len(results), "days": int(pe.size), "collided": int(ye.sum()),
           "brier_evening": brier(pe, ye), "brier_morning": brier(pm, ym), "brier_base": brier(base, yb),
           "brier_last_week": brier(last, yb), "max_probability_evening": float(pe.max()) if pe.size else None,
           "max_probability_morning": float(pm.max()) if pm.size else None,
           "reliability_evening": reliability(pe, ye), "reliability_morning": reliability(pm, ym)}
    for moment in ("evening", "morning"):
        for what in ("day_minutes", "service_minutes", "traffic_band", "run_end", "day_minutes_raw"):
            out[f"coverage_{moment}_{what}"] = _pooled_coverage(results, moment, what)
        errs = [abs(d["minutes_forecast"] - d["minutes_observed"]) if moment == "evening" else
                abs(d["update_0700"]["minutes_forecast"] - d["update_0700"]["minutes_observed"])
                for r in results for d in r["days"]
                if (d.get("minutes_forecast") if moment == "evening" else d["update_0700"].get("minutes_forecast")) is not None]
        out[f"minutes_mae_{moment}"] = float(np.mean(errs)) if errs else None
    return out


def _bins_ok(rows: list[dict]) -> bool:
    return all(r["within"] for r in rows if r["within"] is not None)


def _cov_ok(c: tuple[float | None, int]) -> bool:
    return c[0] is None or COVERAGE_BAND[0] <= c[0] <= COVERAGE_BAND[1]


def report(results: list[dict]) -> None:
    by_case: dict[str, list[dict]] = {}
    for r in results:
        by_case.setdefault(r["case"], []).append(r)
    rows = [summarise(f"{c} (seeds {','.join(str(r['seed']) for r in rs)})", rs) for c, rs in by_case.items()]
    pooled = [r for c in CONTENTION for r in by_case.get(c, [])]
    if pooled:
        rows.append(summarise("contention scenarios pooled (morning, mixed, compound)", pooled))
    print("| case | days (collided) | Brier 18:00 | 07:00 | weekday base rate | last week | reliability bins within 0.15 (18:00 / 07:00) "
          "| minutes MAE 18:00 / 07:00 | 80% coverage: day minutes 18:00 / 07:00 | service minutes | traffic band | run end |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s in rows:
        def cov(what: str) -> str:
            a, b = s[f"coverage_evening_{what}"], s[f"coverage_morning_{what}"]
            return f"{_fmt(a[0], 2)} / {_fmt(b[0], 2)} (n {a[1]}/{b[1]})"
        print(f"| {s['label']} | {s['days']} ({s['collided']}) | {_fmt(s['brier_evening'])} | {_fmt(s['brier_morning'])} "
              f"| {_fmt(s['brier_base'])} | {_fmt(s['brier_last_week'])} "
              f"| {'yes' if _bins_ok(s['reliability_evening']) else 'NO'} / {'yes' if _bins_ok(s['reliability_morning']) else 'NO'} "
              f"| {_fmt(s['minutes_mae_evening'], 0)} / {_fmt(s['minutes_mae_morning'], 0)} | {cov('day_minutes')} "
              f"| {cov('service_minutes')} | {cov('traffic_band')} | {cov('run_end')} |")
    for s in rows:
        if "pooled" in s["label"] or s["label"].startswith("sample"):
            for moment in ("evening", "morning"):
                print(f"\n{s['label']}, reliability at {'18:00' if moment == 'evening' else '07:00'}: "
                      + "; ".join(f"[{b['from']:.1f}, {b['to']:.1f}) {b['days']} days said {b['said']:.2f} collided "
                                  f"{b['collided']:.2f}" for b in s[f"reliability_{moment}"]))
    if CLEAN in by_case:
        c = next(s for s in rows if s["label"].startswith(CLEAN))
        print(f"\nclean control ({CLEAN}): highest probability any day, 18:00 {_fmt(c['max_probability_evening'], 2)}, "
              f"07:00 {_fmt(c['max_probability_morning'], 2)} (target under 0.2)")
    if pooled:
        s = rows[-1]
        checks = {
            "18:00 Brier no worse than the weekday base rate": s["brier_evening"] <= s["brier_base"],
            "18:00 Brier better than last week": s["brier_evening"] < s["brier_last_week"],
            "07:00 Brier better than 18:00": s["brier_morning"] < s["brier_evening"],
            f"every bin with 10+ days within {RELIABILITY_TOLERANCE}": _bins_ok(s["reliability_evening"])
            and _bins_ok(s["reliability_morning"]),
            "every 80% range covers 70-90%": all(_cov_ok(s[f"coverage_{m}_{w}"]) for m in ("evening", "morning")
                                                 for w in ("day_minutes", "service_minutes", "traffic_band", "run_end")),
        }
        print("\nDone-when on the contention scenarios pooled: " + "; ".join(f"{k}: {'met' if v else 'MISSED'}"
                                                                          for k, v in checks.items()))
    secs = [r["total_seconds"] for r in results]
    print(f"\n{len(results)} stores; a store's simulation, load and backtest took {statistics.median(secs):.0f} s "
          f"(median; the backtest alone {statistics.median([r['seconds'] for r in results]):.0f} s)")


def speed() -> None:
    path = ensure_default_store()
    with Store(str(path), read_only=True) as st:
        t0 = time.perf_counter()
        tl = store_frames(st)
        built = time.perf_counter() - t0
        slos = resolve_slos(st)
        kq = kueue_signals(st)
    cals: dict = {}
    t0 = time.perf_counter()
    fc = forecast(tl, slos=slos, kueue=kq, calibrations=cals)
    cold = time.perf_counter() - t0
    warm = []
    for _ in range(3):
        t0 = time.perf_counter()
        fc = forecast(tl, slos=slos, kueue=kq, calibrations=cals)
        warm.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    acts = actions_for(fc)
    act = time.perf_counter() - t0
    w = statistics.median(warm)
    print("| what (the bundled sample, 21 days x 64 GPUs, the forecast at its end, 36 h ahead) | seconds |\n|---|---|")
    print(f"| the store's timelines, once per store (shared with every page) | {built:.2f} |")
    print(f"| the forecast, cold: the services calibrated on the last week | {cold:.2f} |")
    print(f"| the forecast, warm: calibrations kept (median of 3) | {w:.2f} |")
    print(f"| the actions ({len(acts)}: each day's smallest change tonight, costed) | {act:.2f} |")
    print(f"| warm forecast and its actions | {w + act:.2f} (target < 3 s: {'met' if w + act < 3 else 'MISSED'}) |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="", help="comma-separated: morning, mixed, compound, partitioned, "
                                               "morning+VARIANT..., morning-drift, sample")
    ap.add_argument("--seeds", default="1")
    ap.add_argument("--keep", default=str(KEEP), help="folder each store's backtest is kept in")
    ap.add_argument("--report", action="store_true", help="pool every backtest kept and print the tables")
    ap.add_argument("--speed", action="store_true")
    a = ap.parse_args()
    _register_drift()
    keep = Path(a.keep)
    for case in filter(None, a.cases.split(",")):
        for seed in ([7] if case == "sample" else [int(s) for s in a.seeds.split(",")]):
            r = run_case(case, seed, keep)
            print(f"{case} seed {seed}: {len(r['days'])} days, Brier 18:00 {_fmt(r['scores']['brier']['evening'])} "
                  f"07:00 {_fmt(r['scores']['brier']['morning'])} base {_fmt(r['scores']['brier']['weekday_base_rate'])} "
                  f"({r['total_seconds']:.0f} s)", file=sys.stderr, flush=True)
    if a.report:
        report([json.loads(p.read_text()) for p in sorted(keep.glob("*.json"))])
    if a.speed:
        speed()


if __name__ == "__main__":
    main()
