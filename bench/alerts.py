"""The live alerts against Tail events: scenarios, seeds and export variants, bench/RESULTS.md's table.

For each case of :data:`CASES` (the scenarios with their stories, and the export variants of
``tests/variant_matrix.py`` that change what the alerts read: autoscaler names, 15 s scrapes, a
day in UTC+8, ``exported_*`` labels, tensor-parallel replicas) and each seed: simulate, load into a
real DuckDB store, find the events as ``tidelens events`` does, take the alerts' inputs as
``tidelens export alerts`` does, read what the alerting rules fire on the store's timelines
(``tests/alert_scoring.py``), and score each alert against the events:

- **recall**: of the events of a cause the alert must name (``InferenceBlockedByBatch``:
  ``batch_contention`` and ``mixed``; ``InferenceTrafficSurge``: ``traffic_surge``), the share it
  fired on within 3 minutes of their start;
- **precision**: of the events it fired on within 3 minutes of their start, the share of a
  cause it names (``mixed`` counts for both);
- **forbidden**: events of the cause it must never fire during (``traffic_surge`` for the first,
  ``batch_contention`` for the second) where it did;
- **page precision**: of its runs of firing steps (pages), the share that reach into an event of
  a cause it names or the 3 minutes before it (a page on a tail shorter than the events' 5-minute
  minimum, away from any event, counts against it).

With ``--promtool`` it also holds the rules to that reading: a ``promtool test rules`` file per
event (from an hour before it to 30 minutes after), every step's firing alerts exactly, their
annotations included.

Usage::

    .venv/bin/python bench/alerts.py [--days 7] [--seeds 1,2,3] [--only TEXT] [--promtool] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]  # bench/requests.py is not requests
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from alert_scoring import run_store, window_test  # noqa: E402
from variant_matrix import Case  # noqa: E402

from analytics.rules.alerts import ALERTS  # noqa: E402
from analytics.sample import load_into, simulate  # noqa: E402
from analytics.store import Store  # noqa: E402
from analytics.workloads import WorkloadMap  # noqa: E402

CASES: tuple[Case, ...] = (
    Case("morning"), Case("mixed"), Case("partitioned"), Case("compound"),
    Case("morning", ("hpa-prefix", "no-ksm-pods")), Case("morning", ("keda",)), Case("morning", ("hpa-info", "tp2", "utc8")),
    Case("morning", ("exported-labels", "scrape-30s")), Case("mixed", ("exported-labels", "keda", "scrape-15s")),
    Case("partitioned", ("hpa-prefix", "no-ksm-pods")),
)


def promtool_check(run, store, wmap: WorkloadMap) -> tuple[int, int, float]:
    """Windows checked, windows passed, seconds: one promtool test per event's window."""
    t0 = time.perf_counter()
    ok = n = 0
    for e in run.analysis.events:
        lo = (e.start_ms - 3_600_000) // 3_600_000 * 3_600_000
        with tempfile.TemporaryDirectory() as d:
            path = window_test(run, store, wmap, lo, e.end_ms + 1_800_000, Path(d))
            done = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=600)
        n += 1
        ok += done.returncode == 0
        if done.returncode:
            print(f"  promtool FAILED on {e.service} {e.as_dict()['start']}:\n{(done.stdout + done.stderr)[:1500]}")
    return n, ok, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--gpus", type=int, default=64)
    ap.add_argument("--only", default=None, help="only the cases whose label contains this")
    ap.add_argument("--promtool", action="store_true", help="also hold the rules to the reading with promtool")
    ap.add_argument("--json", default=None, metavar="OUT")
    args = ap.parse_args()
    wmap = WorkloadMap()
    rows = []
    totals = {a: [0, 0, 0, 0, 0, 0, 0] for a in ALERTS}
    for case in CASES:
        if args.only and args.only not in case.label:
            continue
        for seed in (int(x) for x in args.seeds.split(",")):
            t0 = time.perf_counter()
            res = simulate(case.scenario, days=args.days, gpus=case.gpus or args.gpus, seed=seed, variants=case.variants)
            with Store(":memory:") as st:
                load_into(st, res)
                run = run_store(st, wmap)
                checked = promtool_check(run, st, wmap) if args.promtool else None
            causes: dict[str, int] = {}
            for e in run.analysis.events:
                causes[e.cause] = causes.get(e.cause, 0) + 1
            row = {"case": case.label, "seed": seed, "days": args.days, "events": causes,
                   "seconds": round(time.perf_counter() - t0, 1), "alerts": {a: run.scores[a].row() for a in ALERTS}}
            if checked:
                row["promtool"] = {"windows": checked[0], "passed": checked[1], "seconds": round(checked[2], 1)}
            rows.append(row)
            for a in ALERTS:
                s = run.scores[a]
                for i, v in enumerate((s.required, s.hit, s.fired_on, s.fired_right, s.forbidden, s.pages,
                                       s.pages_in_events)):
                    totals[a][i] += v
                for what in s.missed:
                    print(f"  {case.label} seed {seed}: {a} missed {what}")
                for what in s.wrong:
                    print(f"  {case.label} seed {seed}: {a} wrong on {what}")
                for what in s.stray:
                    print(f"  {case.label} seed {seed}: {a} paged outside the events: {what}")
            print(json.dumps(row), flush=True)
    print("\n| alert | events it must name | recall | precision | fired during a forbidden cause | pages | page precision |")
    print("|---|---|---|---|---|---|---|")
    for a, (req, hit, on, right, bad, pages, good) in totals.items():
        print(f"| {a} | {req} | {hit / req if req else 1:.3f} | {right / on if on else 1:.3f} | {bad} | {pages} "
              f"| {good / pages if pages else 1:.3f} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "totals": totals}, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
