"""What each recorded rule costs the engine: every rule's expression timed over one window.

Run by hand on a ``bench/scale.py --workdir`` (its raw blocks and its rules' backfill kept)::

    .venv/bin/python bench/rules_cost.py --workdir /work/scale-run [--window-h 2] [--top 15] [--alerts]

With ``--backfill``, first backfills the raw fleet files again into a fresh TSDB under the
workdir and times the rules' backfill there (``tests/prom_server.backfill_rules``: every pass,
promtool's writing and the restarts included), so two versions of the rules compare in the same
conditions; the per-rule times then read that TSDB.

Starts Prometheus on the workdir's TSDB and runs each rule of the built-in map's rules file as
``promtool tsdb create-blocks-from rules`` does (one range query per rule and 2-hour window,
at the rules' interval), with ``stats=all``: the wall time, the engine's evaluation time and the
samples it touched, per rule and per evaluation; the rules' total is what one evaluation of the
whole group costs.

With ``--alerts``, the alerting rules of ``tidelens export alerts`` are timed the same way after
the recording rules: compiled from the workdir's ``files.duckdb`` (its services, norms and
autoscaler links), their own recorded series backfilled over the window first (in passes, into
the workdir's TSDB: they read each other's), then each of their expressions, the two alerts'
included, as a range query over the window.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import requests  # noqa: E402

import prom_server  # noqa: E402
from analytics.cli.export_cmd import alert_inputs  # noqa: E402
from analytics.events import EventsConfig, analyse_store  # noqa: E402
from analytics.rules import compile_rules  # noqa: E402
from analytics.rules.alerts import AlertsConfig, compile_alerts  # noqa: E402
from analytics.rules.compile import RulesConfig, passes  # noqa: E402
from analytics.slo import resolve_slos  # noqa: E402
from analytics.store import Store  # noqa: E402
from analytics.workloads import WorkloadMap  # noqa: E402

T0_S = 1_767_571_200  # bench/scale.py's fleet start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", required=True, help="a bench/scale.py --workdir after its run")
    ap.add_argument("--window-h", type=float, default=2.0, help="hours timed (promtool's block: 2)")
    ap.add_argument("--offset-h", type=float, default=2.0, help="window start, hours after the fleet's")
    ap.add_argument("--repeat", type=int, default=2, help="runs per rule; the fastest counts")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--backfill", action="store_true",
                    help="backfill the fleet files and the rules into <workdir>/rules-cost first, timed")
    ap.add_argument("--alerts", action="store_true",
                    help="also time the alerting rules of `tidelens export alerts` (their records backfilled first)")
    args = ap.parse_args()
    bins = prom_server.require_binaries()
    if bins is None:
        print("prometheus/promtool not installed (apt-get install prometheus)")
        return 1
    doc = compile_rules(WorkloadMap())
    interval = int(doc["groups"][0]["interval"].rstrip("s"))
    start = T0_S + int(args.offset_h * 3600)
    end = start + int(args.window_h * 3600) - interval
    evals = (end - start) // interval + 1
    blocks = ("--storage.tsdb.min-block-duration=2h", "--storage.tsdb.max-block-duration=2h")
    data = Path(args.workdir) / "data"
    if args.backfill:
        files = sorted((Path(args.workdir) / "fleet").glob("*.om"))
        data = Path(args.workdir) / "rules-cost" / "data"
        shutil.rmtree(data.parent, ignore_errors=True)
        data.mkdir(parents=True)
        prom_server.backfill_windows(bins[1], files, data, jobs=2)
        first = min(int(f.stem.split("-")[1]) for f in files) * 7200
        end_ms = (first + len(files) * 7200 - interval) * 1000
        cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        prom_server.backfill_rules(bins[0], bins[1], data, doc, first * 1000, end_ms, extra_args=blocks).stop()
        took = time.perf_counter() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)  # promtool and the servers, all waited for
        cpu_s = after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime
        n_evals = len(files) * 7200 // interval
        print(f"rules backfill: {took:.1f} s ({cpu_s:.1f} s CPU of promtool and Prometheus) for {n_evals} "
              f"evaluations of {len(passes(doc))} passes: {took / n_evals * 1e3:.1f} ms per evaluation, "
              f"{cpu_s / n_evals * 1e3:.1f} ms CPU (load {os.getloadavg()[0]:.1f})", flush=True)
    server = prom_server.start(bins[0], data, attempts=3000, extra_args=blocks)
    try:
        rows = time_rules(server.url, passes(doc), start, end, interval, args.repeat)
    finally:
        server.stop()
    report("recording rules", rows, args.window_h, evals, interval, args.top)
    if args.alerts:
        alerts = alerts_doc(Path(args.workdir) / "files.duckdb")
        records = {**alerts["groups"][0], "rules": [r for r in alerts["groups"][0]["rules"] if "record" in r]}
        t = time.perf_counter()
        server = prom_server.backfill_rules(bins[0], bins[1], data, {"groups": [records]}, start * 1000, end * 1000,
                                            extra_args=blocks)
        print(f"alerts' records backfilled over the window in {time.perf_counter() - t:.1f} s", flush=True)
        try:
            stages = [*passes({"groups": [records]}), [r for r in alerts["groups"][0]["rules"] if "alert" in r]]
            rows = time_rules(server.url, stages, start, end, interval, args.repeat)
        finally:
            server.stop()
        report("alerting rules (tidelens export alerts)", rows, args.window_h, evals, interval, args.top)
    return 0


def alerts_doc(db: Path) -> dict:
    """The alerting rules as ``tidelens export alerts --db DB`` writes them."""
    wmap = WorkloadMap()
    with Store(db, read_only=True) as st:
        analysis = analyse_store(st, EventsConfig(), wmap, slos_ms=resolve_slos(st))
        got = alert_inputs(st, wmap, analysis)
    return compile_alerts(wmap, got["targets"], got["norms"], RulesConfig(), AlertsConfig(policy=got["policy"]))


def time_rules(url: str, stages: list[list[dict]], start: int, end: int, interval: int, repeat: int) -> list[tuple]:
    """Each rule's expression as a range query over ``[start, end]``: ``(stage, name, wall s, engine s,
    samples)``, the fastest of ``repeat`` runs."""
    rows = []
    for n_pass, rules in enumerate(stages, start=1):
        for rule in rules:
            best = None
            for _ in range(repeat):
                t = time.perf_counter()
                r = requests.post(f"{url}/api/v1/query_range", timeout=600, data={
                    "query": rule["expr"], "start": start, "end": end, "step": interval, "stats": "all"})
                wall = time.perf_counter() - t
                r.raise_for_status()
                if best is None or wall < best[0]:
                    stats = r.json()["data"].get("stats", {})
                    best = (wall, stats.get("timings", {}).get("evalTotalTime", 0.0),
                            stats.get("samples", {}).get("totalQueryableSamples", 0))
            labels = rule.get("labels", {})
            name = f"{rule.get('record') or rule['alert']} {labels.get('tidelens_rule', labels.get('service', ''))}".strip()
            rows.append((n_pass, name, *best))
    return rows


def report(what: str, rows: list[tuple], window_h: float, evals: int, interval: int, top: int) -> None:
    total = sum(r[2] for r in rows)
    print(f"{what}: {len(rows)} rules over {window_h:g} h ({evals} evaluations at {interval} s): "
          f"{total:.2f} s, {total / evals * 1e3:.1f} ms per evaluation of the group")
    for n_pass in sorted({r[0] for r in rows}):
        part = [r for r in rows if r[0] == n_pass]
        print(f"  pass {n_pass}: {len(part)} rules, {sum(r[2] for r in part) / evals * 1e3:.1f} ms per evaluation")
    print(f"costliest {top} (ms per evaluation: wall, engine; samples touched per evaluation):")
    for n_pass, name, wall, engine, samples in sorted(rows, key=lambda r: -r[2])[:top]:
        print(f"  {wall / evals * 1e3:7.2f} {engine / evals * 1e3:7.2f} {samples / evals:12,.0f}  pass {n_pass}  {name}")


if __name__ == "__main__":
    raise SystemExit(main())
