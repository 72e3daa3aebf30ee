"""Benchmark: the what-if model's speed against the budget a slider needs, and the DES.

Run by hand: ``.venv/bin/python bench/whatif.py [--days 28]``. Prints, in one run, on the
same 28-day, 1-minute scenario (a preset, ``--preset``, morning-ramp by default):
- one policy (``simulate``), budget 50 ms; all seven (``compare``), budget 300 ms;
- a 50-point frontier, budget 3 s;
- the same demand in a discrete-event simulation (simpy, M/M/c per step) on a slice,
  extrapolated to the whole period, and the ratio DES / model;
- with ``--calibrate-days N`` (default 7; 0 skips): calibration from timelines of a simulated
  ``morning`` store of N days (the fit and the day-by-day backtest replay, timelines built
  beforehand and not timed), against the slider's budget for the whole page (1 s): it must
  stay out of the slider path, which is why the pages cache it;
- with ``--store PATH`` (the bundled sample: ``data/cache/sample-*.duckdb``): a slider move on
  that store as the What-if page makes it (each service calibrated once, not timed; all seven
  policies on the last 7 days, moving the batch runs that happened), budget 0.5 s.
Times are the median of several repetitions, CPU seconds of this process.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analytics.whatif import POLICIES, PRESETS, compare, frontier, simulate  # noqa: E402
from analytics.whatif.policies import capacity  # noqa: E402


def timed(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return statistics.median(times)


def des_seconds(scn, policy: str, minutes: int, max_requests: int) -> tuple[float, int]:
    """CPU seconds simpy takes to replay the busiest ``minutes`` steps of the policy's
    capacity, stopping after ``max_requests`` arrivals (the rate per request is what counts).
    """
    import simpy

    tr = capacity(scn, policy)
    start = int(np.argmax(scn.traffic_rps))  # the busiest stretch
    start = max(0, start - minutes // 2)
    rates = scn.traffic_rps[start:start + minutes]
    servers = tr.servers[start:start + minutes].astype(int)
    mu = float(tr.mu_rps[start])
    rng = np.random.default_rng(0)
    t0 = time.process_time()
    env = simpy.Environment()
    res = simpy.Resource(env, capacity=int(servers.max()))
    count = [0]

    def customer():
        with res.request() as req:
            yield req
            yield env.timeout(rng.exponential(1.0 / mu))
        count[0] += 1

    arrived = [0]

    def source():
        for lam in rates:
            end = env.now + scn.step_s
            while arrived[0] < max_requests:
                gap = rng.exponential(1.0 / lam)
                if env.now + gap >= end:
                    break
                yield env.timeout(gap)
                arrived[0] += 1
                env.process(customer())
            if arrived[0] >= max_requests:
                return
            yield env.timeout(max(0.0, end - env.now))

    env.process(source())
    env.run()
    return time.process_time() - t0, count[0]


def calibration_seconds(days: int):
    """CPU seconds of ``calibrate_frames`` on a simulated ``morning`` store of ``days`` days."""
    from analytics.slo import SloTable
    from analytics.whatif.calibrate import calibrate_frames
    from analytics.sample import load_into
    from analytics.sample import simulate as simulate_sample
    from analytics.store import Store
    from analytics.timeline import TimelineConfig, holdings, pool_timeline, service_timeline

    res = simulate_sample("morning", days=days, gpus=64, seed=7)
    with Store(":memory:") as st:
        load_into(st, res)
        cfg = TimelineConfig(step_s=60)
        frames = (service_timeline(st, cfg), pool_timeline(st, cfg), holdings(st, cfg))
    t0 = time.process_time()
    cal = calibrate_frames(*frames, service="recommender", slos=SloTable.every(120.0, "the bench"))
    return time.process_time() - t0, cal.scenario, cal.backtest


def store_slider(path: str, repeat: int) -> None:
    """CPU seconds of a slider move on a store, per service, as the What-if page replays it."""
    from analytics.errors import TidelensError
    from analytics.store import Store
    from analytics.whatif.calibrate import calibrate_store
    from analytics.whatif.form import MODEL_DAYS, last_days

    cals = {}
    with Store(path, read_only=True) as st:
        for svc in ("chat-vllm", "recommender"):
            try:
                cals[svc] = calibrate_store(st, service=svc)
            except TidelensError as exc:  # a store without that service
                print(f"{svc}: {exc}")
    for svc, cal in cals.items():
        scn = last_days(cal.scenario, MODEL_DAYS)
        compare(scn)
        t = timed(lambda: compare(scn), repeat)
        print(f"slider move on {Path(path).name}, {svc} ({scn.steps} steps, {len(scn.batch.jobs)} batch "
              f"runs): all seven {t * 1e3:.0f} ms; budget 500 ms; ratio {t / 0.5:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--days", type=int, default=28)
    ap.add_argument("--preset", default="morning-ramp", choices=sorted(PRESETS))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--des-minutes", type=int, default=2)
    ap.add_argument("--des-requests", type=int, default=200_000)
    ap.add_argument("--calibrate-days", type=int, default=7)
    ap.add_argument("--store", default=None, help="time a slider move on this store (the bundled sample)")
    ap.add_argument("--only-store", action="store_true", help="with --store: skip the rest")
    args = ap.parse_args()
    if args.store:
        store_slider(args.store, args.repeat)
        if args.only_store:
            return
    scn = PRESETS[args.preset](args.days)
    print(f"scenario: {scn.name}, {args.days} days, {scn.steps} steps of {scn.step_s} s, "
          f"{scn.pool.gpus} GPUs")
    compare(scn)  # warm caches and imports
    one = {p: timed(lambda p=p: simulate(scn, p), args.repeat) for p in POLICIES}
    worst = max(one.values())
    print("one policy (ms): " + ", ".join(f"{p} {t * 1e3:.1f}" for p, t in one.items()))
    print(f"  slowest {worst * 1e3:.1f} ms; budget 50 ms; ratio {worst / 0.050:.2f}")
    allp = timed(lambda: compare(scn), args.repeat)
    print(f"all seven: {allp * 1e3:.1f} ms; budget 300 ms; ratio {allp / 0.300:.2f}")
    fr = timed(lambda: frontier(scn, "reservation", points=50), max(1, args.repeat // 2))
    print(f"50-point frontier: {fr:.2f} s; budget 3 s; ratio {fr / 3.0:.2f}")
    des_s, n_req = des_seconds(scn, "partitioned", args.des_minutes, args.des_requests)
    total_req = float(scn.traffic_rps.sum() * scn.step_s)
    des_full = des_s / max(n_req, 1) * total_req
    model = one["partitioned"]
    print(f"DES (simpy) on the busiest minutes: {des_s:.2f} s for {n_req} requests;"
          f" the whole period ({total_req:.3g} requests) ~ {des_full:.3g} s")
    print(f"DES / model (partitioned, same scenario): {des_full / model:.3g}x")
    if args.calibrate_days > 0:
        cal_s, scn_c, bt = calibration_seconds(args.calibrate_days)
        slider = timed(lambda: compare(scn_c), args.repeat)
        print(f"calibration ({args.calibrate_days} days, fit + backtest): {cal_s:.2f} s; "
              f"a slider move (all seven on it) {slider * 1e3:.0f} ms; calibration / slider "
              f"{cal_s / slider:.1f}x; backtest violation-minute error "
              f"{bt['violation_minutes_error']:+.1%}, period p99 error {bt['p99_error']:+.1%}")


if __name__ == "__main__":
    main()
