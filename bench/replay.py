"""The what-if backtest across export variants: does the shared replay reproduce what happened?

Runs every case of :data:`variant_matrix.MATRIX` (the export variants the verdicts are tested
on) for ``--days`` days on each of ``--seeds``, and the independently written export
(``tests/independent_export.py``, its four cases), calibrates the what-if on each service
exactly as the app does (``calibrate_frames`` over the store's timelines) and prints, per case
and service, the minutes over the SLO observed and replayed, the batch GPU-hours observed and
replayed, and whether the replay is within the backtest's tolerances (15% or 10 minutes; 10%).
The peer on the same replayed curve: the minutes a replay counts when it calls each step by
the model's p99 alone (what the backtest counted before the fitted reading noise), beside the
expected count the product shows.

A case that misses is a finding about the model, never a tolerance to widen.

Usage::

    .venv/bin/python bench/replay.py [--days 7] [--seeds 1,2] [--gpus 64] [--cases LABEL,...]
        [--independent CASE,...]

Beside each backtest: N, the minutes the tail events attribute to batch contention (each event's
minutes over the SLO times its batch share) and M, the shared minutes partitioning with the
automatic reservation removes (both replays move the runs that happened;
:mod:`analytics.whatif.agree`). Target: M within 25% or 15 minutes of N on contention cases;
both about 0 on the partitioned control.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

SIM_SERVICES = ("chat-vllm", "recommender")


def _row(label: str, seed: int, service: str, cal: Any, events: Any) -> dict[str, Any]:
    from analytics.whatif.agree import agreement

    bt = cal.backtest
    # The pages' sentence on the whole period: N (tail events, share-weighted) and M (shared less
    # partitioned, both moving the runs that happened; the shared row is this backtest's replay).
    ag = agreement(events, cal.scenario)
    frame = bt["frame"]
    busy = frame["traffic_rps"].to_numpy() > 0
    calls = float((busy & (frame["p99_ms"].to_numpy() > cal.scenario.service.slo_ms)).sum()
                  * cal.observation.step_min)
    return {"case": label, "seed": seed, "service": service,
            "observed_min": bt["observed_violation_minutes"], "replayed_min": bt["model_violation_minutes"],
            "calls_min": calls, "error": bt["violation_minutes_error"],
            "observed_batch_h": bt["observed_batch_gpu_hours"], "replayed_batch_h": bt["model_batch_gpu_hours"],
            "noise": cal.scenario.service.p99_noise_log_sd, "within": bt["within"],
            "n_batch_min": ag.tail_batch_minutes, "m_removed_min": ag.removed_minutes,
            "shared_min": ag.shared_minutes, "reserved": ag.reserved_gpus, "agrees": ag.agrees}


def simulated(case: Any, *, days: int, gpus: int, seed: int) -> list[dict[str, Any]]:
    """Backtest rows of one simulator case, one per service."""
    from analytics.events import EventsConfig, analyse
    from analytics.slo import SloTable
    from analytics.timeline import store_timelines
    from analytics.sample import load_into, simulate, truth
    from analytics.store import Store
    from analytics.whatif.calibrate import calibrate_frames

    res = simulate(case.scenario, days=days, gpus=case.gpus or gpus, seed=seed, variants=case.variants)
    slos = {k: v["p99_ms"] for k, v in truth(res)["slos"].items()}
    with Store(":memory:") as st:
        load_into(st, res)
        tl = store_timelines(st, EventsConfig().timeline_config())
    events = analyse(tl.services, tl.pool, tl.holdings, cfg=EventsConfig(), slos=SloTable.from_ms(slos))
    present = set(tl.services["service"].unique().to_list())  # compound's story has one service
    return [_row(case.label, seed, svc, calibrate_frames(tl.services, tl.pool, tl.holdings,
                                                         service=svc, slos=SloTable.from_ms(slos)), events)
            for svc in SIM_SERVICES if svc in present]


def independent(case: str, *, days: int, seed: int) -> list[dict[str, Any]]:
    """Backtest rows of the independent export's ``case``, ingested through the real ingest path."""
    from independent_export import write_story

    from analytics.events import EventsConfig, analyse
    from analytics.slo import SloTable
    from analytics.timeline import store_timelines
    from analytics.ingest import ingest_path
    from analytics.store import Store
    from analytics.whatif.calibrate import calibrate_frames

    with tempfile.TemporaryDirectory() as d:
        tr = write_story(Path(d) / "export", case=case, days=days, seed=seed)
        with Store(Path(d) / "s.duckdb") as st:
            for f in tr["files"]:
                ingest_path(st, Path(d) / "export" / f)
            tl = store_timelines(st, EventsConfig().timeline_config())
    slos = {k: v["p99_ms"] for k, v in tr["slos"].items()}
    events = analyse(tl.services, tl.pool, tl.holdings, cfg=EventsConfig(), slos=SloTable.from_ms(slos))
    return [_row(f"independent export: {case}", seed, svc,
                 calibrate_frames(tl.services, tl.pool, tl.holdings, service=svc, slos=SloTable.from_ms(slos)),
                 events)
            for svc in slos]


def pooled_table(rows: list[dict[str, Any]]) -> str:
    """One Markdown row per case: backtests within, the worst |error| of the replay and of the
    calls by model p99 (the peer), minutes observed and replayed summed over its runs."""
    out = ["| case | backtests within | minutes observed / replayed | worst error: replayed "
           "| worst error: calls by model p99 |", "|---|---|---|---|---|"]
    for case in dict.fromkeys(r["case"] for r in rows):
        rs = [r for r in rows if r["case"] == case]
        worst = max(rs, key=lambda r: abs(r["error"]))
        worst_calls = max(rs, key=lambda r: abs(r["calls_min"] - r["observed_min"]) / max(r["observed_min"], 1))
        calls_err = (worst_calls["calls_min"] - worst_calls["observed_min"]) / max(worst_calls["observed_min"], 1)
        out.append(f"| {case} | {sum(r['within'] for r in rs)} / {len(rs)} | "
                   f"{sum(r['observed_min'] for r in rs):,.0f} / {sum(r['replayed_min'] for r in rs):,.0f} | "
                   f"{worst['error']:+.0%} | {calls_err:+.0%} |")
    return "\n".join(out)


def main() -> int:
    from variant_matrix import MATRIX

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--gpus", type=int, default=64)
    ap.add_argument("--cases", default=None,
                    help="comma-separated case labels ('morning', 'partitioned + hpa-prefix + no-ksm-pods'): "
                         "only those matrix cases (a small run)")
    ap.add_argument("--independent", default="hpa-renamed,hpa-info,idle-unlabelled,both",
                    help="the independent export's cases ('' for none)")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    wanted = [c for c in args.cases.split(",") if c] if args.cases else None
    for case in MATRIX:
        if wanted is not None and case.label not in wanted:
            continue
        for seed in seeds:
            rows += simulated(case, days=args.days, gpus=args.gpus, seed=seed)
            print(f"{case.label} seed {seed} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    for case in [c for c in args.independent.split(",") if c]:
        for seed in seeds:
            rows += independent(case, days=min(args.days, 5), seed=seed)

    print(f"\nWhat-if backtest across export variants: {args.days} days x {args.gpus} GPUs (independent "
          f"export: {min(args.days, 5)} days x 16 GPUs), seeds {', '.join(map(str, seeds))}. Within: minutes "
          "over the SLO within 15% or 10 minutes and batch GPU-hours within 10%. Peer: the same replay "
          "calling each step by the model's p99 alone.\n")
    print("| case | seed | service | minutes observed | replayed (error) | calls by model p99 (error) "
          "| batch GPU-h observed / replayed | reading noise | within | N: tail events' batch minutes "
          "| M: partitioned removes (R GPUs) | M vs N |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ov = r["observed_min"]
        call_err = (r["calls_min"] - ov) / ov if ov else float("nan")
        print(f"| {r['case']} | {r['seed']} | {r['service']} | {ov:,.0f} | {r['replayed_min']:,.1f} "
              f"({r['error']:+.0%}) | {r['calls_min']:,.0f} ({call_err:+.0%}) | {r['observed_batch_h']:,.0f} / "
              f"{r['replayed_batch_h']:,.0f} | {r['noise']:.3f} | {'yes' if r['within'] else 'MISSED'} | "
              f"{r['n_batch_min']:,.0f} | {r['m_removed_min']:,.0f} of {r['shared_min']:,.0f} ({r['reserved']}) | "
              f"{'agrees' if r['agrees'] else 'DISAGREES'} |")
    print("\nPooled per case (every seed and service):\n")
    print(pooled_table(rows))
    missed = [r for r in rows if not r["within"]]
    apart = [r for r in rows if not r["agrees"]]
    print(f"\nN vs M (M within 25% or 15 minutes of N): {len(rows) - len(apart)} of {len(rows)} agree"
          + "".join(f"\n- {r['case']} seed {r['seed']} {r['service']}: N {r['n_batch_min']:,.0f}, "
                    f"M {r['m_removed_min']:,.0f}" for r in apart))
    errs = np.array([abs(r["error"]) for r in rows if r["observed_min"] > 0])
    print(f"\n{len(rows)} service backtests in {time.perf_counter() - t0:.0f} s; {len(missed)} missed; "
          f"|error| median {np.median(errs):.1%}, max {errs.max():.1%}"
          + "".join(f"\n- {r['case']} seed {r['seed']} {r['service']}" for r in missed))
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
