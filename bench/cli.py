"""CLI start-up: ``tidelens --help``, ``tidelens sources`` and ingesting a small file, end to end.

Each is a whole process (median of ``--repeat`` runs) against two floors measured in the same
run: the interpreter alone (``python -c pass``) and importing what any store command needs
(``import polars, duckdb``). Targets: ``--help`` under 0.3 s; ``sources`` and a small ingest
under 0.6 s. ``--detail`` prints the slowest imports of each (``python -X importtime``).

Usage::

    .venv/bin/python bench/cli.py [--repeat 5] [--detail]
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
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
