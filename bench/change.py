"""Before and after a change: the issue's done-when on the simulator, and how fast a drag answers.

**The story** (``--story``): the ``morning`` pool, 14 days x 64 GPUs, shared until the midnight
of day 8 (index 7), then partitioned with 28 GPUs reserved for inference (and, as a second case,
tidal with batch admitted 20:00-08:00 and drained at 08:00); for each seed it prints whether
Tidelens proposes the change (the day and the policy), each service's minutes over the SLO
before and after against the simulator's truth (target: within 15%), the what-if's prediction
from the first 7 days against the observed after-period (target: within 25% or 15 minutes), the
after-period replayed under the enacted policy (the backtest's bounds), and whether the
capacity review's section shows the same numbers.

**The drag** (``--drag``): on the bundled sample (21 days x 64 GPUs), the basis built once, then
the change moved hour by hour and the periods lengthened as a slider would, each answer timed
(target: under a second); the scoring's first call for a period (it calibrates both sides)
against its repeat (cached).

Usage::

    .venv/bin/python bench/change.py [--story] [--drag] [--seeds 4,5] [--days 14] [--day 7] [--json ROWS.json]
    .venv/bin/python bench/change.py --calibrate ROWS.json...   # the range's calibration, cross-fitted
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

import numpy as np  # noqa: E402

from analytics.change.basis import change_basis  # noqa: E402
from analytics.change.candidates import propose_from  # noqa: E402
from analytics.change.compare import CompareConfig, compare_change  # noqa: E402
from analytics.change.record import PolicyChange  # noqa: E402
from analytics.change.score import PREDICTION_FLOOR_MIN  # noqa: E402
from analytics.ranges import RangeCalibration  # noqa: E402
from analytics.slo import resolve_slos  # noqa: E402
from analytics.store import Store  # noqa: E402


def _near(got: float, want: float, rel: float, floor: float) -> bool:
    return abs(got - want) <= max(rel * want, floor)


def _range(rng: list[float] | None) -> str:
    return f"{rng[0]:,.0f}-{rng[1]:,.0f}" if rng else "none"


def calibrate(paths: list[str]) -> None:
    """The range's calibration from kept rows (``--json``): split conformal on each half of the
    seeds, scored on the other half (cross-fitted coverage), and on all of them (the constant
    ``analytics.change.score.RANGE_CALIBRATION`` carries), with its tails together (the rule it
    ships) and apart (the forecast's rule) side by side."""
    rows = [r for p in paths for r in json.loads(Path(p).read_text()) if r["raw"]]
    seeds = sorted({r["seed"] for r in rows})
    halves = (seeds[: len(seeds) // 2], seeds[len(seeds) // 2:])

    def fit(part: list[dict], tails: str) -> RangeCalibration | None:
        return RangeCalibration.fit(np.array([r["raw"][0] for r in part]), np.array([r["raw"][1] for r in part]),
                                    np.array([r["observed"] for r in part]), floor=PREDICTION_FLOOR_MIN, tails=tails)

    def covered(cal: RangeCalibration | None, part: list[dict]) -> int:
        ranges = [cal.apply(*r["raw"]) if cal else r["raw"] for r in part]
        return sum(lo <= r["observed"] <= hi for (lo, hi), r in zip(ranges, part))

    print("| tails | fitted on seeds | widths moved below / above | scored on seeds | rows | inside, raw "
          "| inside, calibrated |")
    print("|---|---|---|---|---|---|---|")
    for tails in ("together", "apart"):
        for a, b in (halves, halves[::-1]):
            cal = fit([r for r in rows if r["seed"] in a], tails)
            for weekly in sorted({r["weekly"] for r in rows}):
                t = [r for r in rows if r["seed"] in b and r["weekly"] == weekly]
                print(f"| {tails} | {','.join(map(str, a))} | {-cal.q_lo:+.3f} / {cal.q_hi:+.3f} "
                      f"| {','.join(map(str, b))} ({'weekly' if weekly else 'random'} surges) | {len(t)} "
                      f"| {covered(None, t)} | {covered(cal, t)} |")
    for tails in ("together", "apart"):
        cal = fit(rows, tails)
        print(f"\n{tails}, all {len(rows)} rows: q_lo = {cal.q_lo:.4f}, q_hi = {cal.q_hi:.4f} (n {cal.n}); inside, "
              f"raw {covered(None, rows)}, calibrated {covered(cal, rows)} (in-sample)")


def story(seeds: list[int], days: int, day: int, weekly: bool = False, keep: str | None = None) -> None:
    from analytics.change.findings import change_section
    from analytics.sample import load_into, simulate, truth
    from analytics.sample.cluster import PoolChange

    print(f"## The story: morning, {days} days x 64 GPUs, shared until day {day + 1}, then ..."
          + (" (the surges recur weekly alike)" if weekly else " (the surges on random weekdays)") + "\n")
    print("| seed | change | proposed | service | minutes before: Tidelens / truth | after: Tidelens / truth "
          "| predicted / observed after | within 25% or 15 | the range its days make | given the after's inputs | after replayed / observed "
          "| replay within | review |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    tally = {"rows": 0, "strict": 0, "range": 0, "either": 0, "given": 0, "replay": 0, "truth": 0}
    kept: list[dict] = json.loads(Path(keep).read_text()) if keep and Path(keep).exists() else []
    for seed in seeds:
        for policy in ("partitioned", "tidal"):
            t0 = time.perf_counter()
            res = simulate("morning", days=days, gpus=64, seed=seed, change=PoolChange(day=day, policy=policy,
                                                                                       weekly_surges=weekly))
            tr = truth(res)["change"]
            with tempfile.TemporaryDirectory() as tmp:
                with Store(str(Path(tmp) / "s.duckdb")) as st:
                    load_into(st, res)
                    basis = change_basis(st, slos=resolve_slos(st))
                    found = propose_from(st, basis.timelines, basis.step_s)
            hit = [c for c in found if c.change.policy == policy and abs(c.change.at_ms - tr["at_ms"]) < 86_400_000]
            proposed = f"yes, {hit[0].change.describe()}" if hit else "NO (" + "; ".join(c.change.describe() for c in found) + ")"
            change = PolicyChange(at_ms=tr["at_ms"], policy=policy, reservation_gpus=tr.get("reservation_gpus"),
                                  tidal_window=tuple(tr["tidal_window"]) if "tidal_window" in tr else None)
            for svc in ("chat-vllm", "recommender"):
                comparison = compare_change(basis, tr["at_ms"], CompareConfig(before_days=day, after_days=days - day,
                                                                              service=svc), change)
                section = change_section(comparison)
                out = comparison.as_dict()  # the JSON of `tidelens change compare --json`
                mb, ma = out["before"]["minutes_over_slo"][svc], out["after"]["minutes_over_slo"][svc]
                tb, ta = tr["minutes_over_slo"]["before"][svc], tr["minutes_over_slo"]["after"][svc]
                ok_b, ok_a = _near(mb, tb, 0.15, 0.0), _near(ma, ta, 0.15, 0.0)
                w = out.get("within", {})
                rep = out.get("after_replay", {})
                rows = {r[0]: r for t in section.tables for r in t[1]}
                review_same = (rows["after (observed)"][1] == f"{out['after']['violation_minutes']:,.1f}"
                               and rows["after, replayed under the enacted policy"][1]
                               == f"{rep['violation_minutes']:,.1f}") if rep else False
                print(f"| {seed} | {policy} | {proposed} | {svc} | {mb:,.0f} / {tb:,.0f}{'' if ok_b else ' MISS'} | "
                      f"{ma:,.0f} / {ta:,.0f}{'' if ok_a else ' MISS'} | "
                      f"{out['predicted']['violation_minutes']:,.0f} / {out['after']['violation_minutes']:,.0f} | "
                      f"{'yes' if w.get('prediction_violation_minutes') else 'no: ' + '; '.join(out['differences'])} | "
                      f"{_range(out['predicted'].get('range_violation_minutes'))}"
                      f"{'' if w.get('prediction_range_violation_minutes') else ' (outside)'} | "
                      f"{out['predicted_given_after_inputs']['violation_minutes']:,.0f}"
                      f"{'' if w.get('prediction_given_after_inputs_violation_minutes') else ' (miss)'} | "
                      f"{rep.get('violation_minutes', 0):,.0f} / {rep.get('observed_violation_minutes', 0):,.0f} min, "
                      f"{rep.get('batch_gpu_hours', 0):,.0f} / {rep.get('observed_batch_gpu_hours', 0):,.0f} GPU-h | "
                      f"{'yes' if w.get('after_replay') else 'no: ' + '; '.join(rep.get('misses', []))} | "
                      f"{'same' if review_same else 'DIFFERS'} |")
                if keep:
                    kept.append({"seed": seed, "policy": policy, "service": svc, "weekly": weekly,
                                 "raw": out["predicted"].get("range_raw_violation_minutes"),
                                 "range": out["predicted"].get("range_violation_minutes"),
                                 "predicted": out["predicted"]["violation_minutes"],
                                 "observed": out["after"]["violation_minutes"]})
                    Path(keep).write_text(json.dumps(kept, indent=1))
                tally["rows"] += 1
                tally["strict"] += bool(w.get("prediction_violation_minutes"))
                tally["range"] += bool(w.get("prediction_range_violation_minutes"))
                tally["either"] += bool(w.get("prediction_violation_minutes") or w.get("prediction_range_violation_minutes"))
                tally["given"] += bool(w.get("prediction_given_after_inputs_violation_minutes"))
                tally["replay"] += bool(w.get("after_replay"))
                tally["truth"] += ok_b and ok_a
            print(f"<!-- seed {seed} {policy}: {time.perf_counter() - t0:.0f} s -->", file=sys.stderr)
    n = tally["rows"]
    print(f"\nOf {n} rows: before/after within 15% of the truth {tally['truth']}; prediction within 25% or 15 "
          f"minutes {tally['strict']}; observed inside the range the before-period's days make {tally['range']} "
          f"(an 80% range: about {0.8 * n:.0f} expected); either {tally['either']}; the before-model given the "
          f"after's inputs within 25% or 15 {tally['given']}; after replay within the backtest's bounds {tally['replay']}")


def drag() -> None:
    from analytics.sample import ensure_default_store

    path = ensure_default_store()
    print("## The drag: the bundled sample (21 days x 64 GPUs), a change at day 14 moved and its periods resized\n")
    with Store(path, read_only=True) as st:
        t0 = time.perf_counter()
        basis = change_basis(st, slos=resolve_slos(st))
        built = time.perf_counter() - t0
    at0 = basis.first_ms + 14 * 86_400_000
    change = PolicyChange(at_ms=at0, policy="partitioned", reservation_gpus=28)
    times = []
    for k in range(24):  # the change dragged hour by hour, the periods changed on some moves
        cfg = CompareConfig(before_days=7.0 - (k % 4) * 0.5, after_days=7.0 - (k % 3) * 0.5)
        t0 = time.perf_counter()
        compare_change(basis, at0 + (k - 12) * 3_600_000, cfg, change, score=False)
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    compare_change(basis, at0, CompareConfig(), change)
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    compare_change(basis, at0, CompareConfig(), change)
    warm = time.perf_counter() - t0
    print("| what | seconds |\n|---|---|")
    print(f"| the basis (whole span's timelines, tail events, Kueue), once per store | {built:.2f} |")
    print(f"| a drag's answer (24 moves of the change or the periods): median | {statistics.median(times):.3f} |")
    print(f"| a drag's answer: slowest | {max(times):.3f} (target < 1 s: {'met' if max(times) < 1 else 'MISSED'}) |")
    print(f"| the scored compare, first time for its periods (calibrates both) | {cold:.2f} |")
    print(f"| the scored compare again (calibrations reused) | {warm:.3f} ({cold / max(warm, 1e-9):.0f}x faster) |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--story", action="store_true")
    ap.add_argument("--drag", action="store_true")
    ap.add_argument("--seeds", default="4")
    ap.add_argument("--days", type=int, default=14)
    ap.add_argument("--day", type=int, default=7, help="the change's day (0 = the first; 7 = day 8)")
    ap.add_argument("--weekly-surges", action="store_true",
                    help="the surges recur every week alike: the weeks differ only by the policy")
    ap.add_argument("--json", default=None, help="keep each row's range and outcome in this file (appended)")
    ap.add_argument("--calibrate", nargs="+", default=None, metavar="ROWS.json",
                    help="fit the range's calibration on kept rows and print its cross-fitted coverage")
    a = ap.parse_args()
    if a.calibrate:
        calibrate(a.calibrate)
        return
    if not (a.story or a.drag):
        a.story = a.drag = True
    if a.drag:
        drag()
        print()
    if a.story:
        story([int(s) for s in a.seeds.split(",")], a.days, a.day, a.weekly_surges, a.json)


if __name__ == "__main__":
    main()
