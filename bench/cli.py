"""CLI start-up: ``tidelens --help``, ``tidelens sources`` and ingesting a small file, end to end;
with ``--analyses DB``, the analysis commands cold and warm.

Each is a whole process (median of ``--repeat`` runs) against two floors measured in the same
run: the interpreter alone (``python -c pass``) and importing what any store command needs
(``import polars, duckdb``). Targets: ``--help`` under 0.3 s; ``sources`` and a small ingest
under 0.6 s. ``--detail`` prints the slowest imports of each (``python -X importtime``).

``--analyses DB`` (the sample: ``tidelens sample --out DIR --db DB``, 21 days, 64 GPUs) runs
``events``, ``whatif``, ``review --out``, ``rhythm``, ``forecast`` and ``report --event ev-nope`` cold (an
empty result cache, ``$TIDELENS_CACHE_DIR``: nothing computed before) and warm (the same
command again, a new process: everything read from the cache), each with its peak memory
(the process's maximum resident set), beside the issue's targets and the load average.

Usage::

    .venv/bin/python bench/cli.py [--repeat 5] [--detail] [--analyses DB]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS_S = {"tidelens --help": 0.3, "tidelens sources": 0.6, "tidelens ingest (1 small file)": 0.6}
# Issue 53's targets, seconds warm / cold (None: none set), and the peak memory's on the sample.
ANALYSES = {
    "events": (["events", "--json"], 1.5, 4.0),
    "whatif": (["whatif", "--json"], 2.0, 8.0),
    "review --out": (["review", "--out", "{tmp}/review.html"], 3.0, 10.0),
    "rhythm": (["rhythm", "--json"], 1.0, None),
    # Issue 56: the forecast of a 21-day store in under 3 s (warm: its services' fits kept).
    "forecast": (["forecast", "--json"], 3.0, 3.0),
    "report --event ev-nope": (["report", "--event", "ev-000000000000", "--out", "{tmp}/pm.html"], 1.0, 1.0),
}
PEAK_TARGET_MB = 600


def _measured(cmd: list[str], env: dict[str, str]) -> tuple[float, float, int, float]:
    """Wall seconds, peak resident MiB, exit code and CPU seconds of one whole process."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return (time.perf_counter() - t, usage.ru_maxrss / 1024, proc.returncode,
            usage.ru_utime + usage.ru_stime)


def analyses(db: str, repeat: int) -> bool:
    """Each analysis command cold (an empty cache) and warm (median of ``repeat``); True when
    every target is met."""
    py = sys.executable
    ok = True
    print(f"\nanalysis commands on {db}, whole processes; load average before: "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"{'command':24s} {'cold s':>7s} {'CPU s':>6s} {'target':>6s} {'cold MiB':>8s} {'warm s':>7s} "
          f"{'CPU s':>6s} {'target':>6s} {'warm MiB':>8s}  verdict")
    with tempfile.TemporaryDirectory() as tmp:
        for name, (argv, warm_target, cold_target) in ANALYSES.items():
            argv = [a.format(tmp=tmp) for a in argv]
            cache = os.path.join(tmp, f"cache-{name.split()[0]}")
            env = {**os.environ, "TIDELENS_CACHE_DIR": cache}
            cmd = [py, "-m", "analytics", argv[0], "--db", db, *argv[1:]]
            cold_s, cold_mb, rc, cold_cpu = _measured(cmd, env)
            warm = [_measured(cmd, env) for _ in range(repeat)]
            warm_s = statistics.median(w[0] for w in warm)
            warm_cpu = statistics.median(w[3] for w in warm)
            warm_mb = max(w[1] for w in warm)
            met = (warm_s <= warm_target and (cold_target is None or cold_s <= cold_target)
                   and max(cold_mb, warm_mb) <= PEAK_TARGET_MB)
            ok &= met
            print(f"{name:24s} {cold_s:7.2f} {cold_cpu:6.2f} {cold_target or '':>6} {cold_mb:8.0f} "
                  f"{warm_s:7.2f} {warm_cpu:6.2f} {warm_target:6.1f} {warm_mb:8.0f}  "
                  f"{'met' if met else 'MISSED'} (exit {rc})")
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; peak memory target "
          f"{PEAK_TARGET_MB} MiB")
    return ok


def _time(cmd: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _slowest_imports(cmd: list[str], n: int = 8) -> list[str]:
    out = subprocess.run([sys.executable, "-X", "importtime", *cmd], cwd=ROOT, capture_output=True, text=True)
    rows = []
    for line in out.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cumulative, name = line.split("|")
            if cumulative.strip().isdigit():
                rows.append((int(cumulative), name.rstrip()))
    return [f"{us / 1e6:6.3f} s {name}" for us, name in sorted(rows, reverse=True)[:n]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--detail", action="store_true")
    ap.add_argument("--analyses", default=None, metavar="DB",
                    help="also time the analysis commands cold and warm on this store")
    args = ap.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as d:
        db = os.path.join(d, "bench.duckdb")
        small = os.path.join(d, "one.prom")
        Path(small).write_text('DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-0",Hostname="n"} 5 1764316800000\n')
        subprocess.run([py, "-m", "analytics", "ingest", "--db", db, small], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL)
        floors = {"python -c pass": _time([py, "-c", "pass"], args.repeat),
                  "import polars, duckdb": _time([py, "-c", "import polars, duckdb"], args.repeat)}

        def fresh_ingest() -> list[str]:
            return [py, "-m", "analytics", "ingest", "--db", os.path.join(d, f"i{time.perf_counter_ns()}.duckdb"),
                    small]

        cases = {"tidelens --help": [py, "-m", "analytics", "--help"],
                 "tidelens sources": [py, "-m", "analytics", "sources", "--db", db]}
        results = {name: _time(cmd, args.repeat) for name, cmd in cases.items()}
        results["tidelens ingest (1 small file)"] = statistics.median(
            _time(fresh_ingest(), 1) for _ in range(args.repeat))
        print(f"CLI start-up, median of {args.repeat} whole-process runs")
        print(f"{'case':34s} {'seconds':>8s} {'target':>7s} {'x python':>9s} {'x polars+duckdb':>16s}")
        for name, t in floors.items():
            print(f"{name:34s} {t:8.3f} {'':>7s}")
        ok = True
        for name, t in results.items():
            target = TARGETS_S[name]
            ok &= t < target
            print(f"{name:34s} {t:8.3f} {target:7.2f} {t / floors['python -c pass']:9.1f} "
                  f"{t / floors['import polars, duckdb']:16.2f} {'met' if t < target else 'MISSED'}")
        if args.detail:
            for name, cmd in cases.items():
                print(f"\nslowest imports of {name}:")
                print("\n".join("  " + x for x in _slowest_imports(cmd[1:])))
    if args.analyses:
        ok &= analyses(args.analyses, args.repeat)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
