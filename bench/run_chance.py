"""The recurring run's chance alone, on many of the simulator's batch schedules: calibrated, or luck?

The forecast's evening collision chance is, on the simulator's contention stores, mostly the chance
the nightly fine-tune runs (``analytics.forecast.runs_ahead.run_probability``: the share of past
days of the same day of the week it ran, shrunk towards its weekdays' share). This scores that
chance on its own, without simulating a pool: for each seed, the ``morning`` scenario's batch
schedule (``analytics.sample.batch.plan_jobs``, the simulator's own draw, 21 days) and each day with
a week before it, the chance at 18:00 the day before against whether the run started. Seeds 9 and
up (``bench/forecast.py`` scores seeds 1-8); the run's true weekday chance is the scenario's 0.85,
and ``--rates`` tries others.

It prints, per true chance: the Brier score, the reliability bins (days said, mean chance, share
that ran) over all seeds, and how often a group of 8 seeds (each day counted three times, as the
three contention scenarios share each seed's nights in ``bench/forecast.py``'s pooled row) meets
the done-when's "every bin with 10 or more days within 0.15": the spread of that clause by luck.

Usage::

    .venv/bin/python bench/run_chance.py [--seeds 200] [--rates 0.85,0.7,0.5]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

import numpy as np  # noqa: E402

from analytics.forecast.runs_ahead import run_probability  # noqa: E402
from analytics.forecast.skill import brier, reliability  # noqa: E402
from analytics.sample.batch import FINETUNE, plan_jobs  # noqa: E402
from analytics.sample.scenarios import SCENARIOS  # noqa: E402
from analytics.sample.sim import _rng  # noqa: E402  (the simulator's batch stream, as it draws it)
from analytics.times import parse_iso  # noqa: E402

DAY_MS = 86_400_000
DAYS = 21


def said_and_ran(rate: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Per scored day of one seed's schedule: the chance said at 18:00 the day before, and whether it ran."""
    sc = SCENARIOS["morning"]
    batch = replace(sc.batch, finetune_weekday_prob=rate)
    start = parse_iso(sc.start_iso)
    first_ms, first_day = int(start.timestamp() * 1000), int(start.timestamp() * 1000) // DAY_MS
    usual_ms = int(batch.finetune_hour_utc * 3_600_000)
    jobs = plan_jobs(batch, DAYS, start.date().toordinal(), _rng(seed, "batch"))
    started = {first_day + j.submit_min // 1440 for j in jobs if j.job == FINETUNE}
    said, ran = [], []
    for d in range(7, DAYS):
        day = first_day + d
        said.append(run_probability(started, usual_ms, first_ms, day * DAY_MS - 6 * 3_600_000, day)[0])
        ran.append(day in started)
    return np.array(said), np.array(ran, float)


def clause_met(p: np.ndarray, y: np.ndarray) -> bool:
    """The done-when's bins clause, as ``bench/forecast.py`` judges it (``skill.reliability``)."""
    return all(r["within"] for r in reliability(p, y) if r["within"] is not None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=200, help="seeds 9 .. 9 + N - 1 (default 200)")
    ap.add_argument("--rates", default="0.85,0.7,0.5", help="the run's true weekday chances to try")
    args = ap.parse_args()
    seeds = list(range(9, 9 + args.seeds))
    for rate in (float(x) for x in args.rates.split(",")):
        per_seed = [said_and_ran(rate, s) for s in seeds]
        p = np.concatenate([a for a, _ in per_seed])
        y = np.concatenate([b for _, b in per_seed])
        print(f"\ntrue weekday chance {rate:g}: {len(seeds)} seeds, {p.size} days; Brier {brier(p, y):.4f}")
        for r in reliability(p, y):
            off = abs(r["said"] - r["collided"])
            print(f"  [{r['from']:.1f}, {r['to']:.1f}) {r['days']:5d} days  said {r['said']:.2f}  ran {r['collided']:.2f}  "
                  f"{'OFF BY' if r['within'] is False else 'within'} {off:.2f}")
        groups = [per_seed[i:i + 8] for i in range(0, len(per_seed) - 7, 8)]
        met = sum(clause_met(np.tile(np.concatenate([a for a, _ in g]), 3), np.tile(np.concatenate([b for _, b in g]), 3))
                  for g in groups)
        print(f"  groups of 8 seeds (each day three times, as the pooled row): the bins clause met in {met} of "
              f"{len(groups)}")


if __name__ == "__main__":
    main()
