"""What ``tidelens export rules`` costs as the workload map grows: 50, 100, 200 and 500 rules.

Run by hand::

    .venv/bin/python bench/rules_export.py [--sizes 50,100,200,500] [--repeat 3] [--repo PATH]

Each size is a ``tidelens.toml`` of that many rules (namespace and pod patterns, a class and a
team each, every tenth a hostname rule placing a pool), exported by a whole ``python -m analytics
export rules`` process (start included), the median of ``--repeat`` runs; with the file's size and
the process's peak memory. The growth ratio is each size's CPU time (less the 0-rule map's) over the
previous size's, against the ratio of the sizes: about the same ratio is linear, its square
quadratic; the file's growth the same way, which no other load on the machine moves. ``--repo`` times another checkout (its own ``.venv``) on the same maps, e.g. the
version before a change.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def write_map(path: Path, n: int) -> Path:
    """A map of ``n`` rules, as a user's might be written."""
    rules = []
    for i in range(n):
        if i % 10 == 9:
            rules.append(f'[[rule]]\nname = "pool {i}"\nhostname = "gpu-node-{i:03d}-.*"\npool = "pool-{i}"\n')
        else:
            cls = ("batch", "inference", "other")[i % 3]
            rules.append(f'[[rule]]\nname = "rule {i}"\nnamespace = "team-{i}(-.*)?"\npod = "(job|svc)-{i}-[a-z0-9]+"\n'
                         f'class = "{cls}"\nteam = "team-{i}"\n')
    path.write_text("\n".join(rules), encoding="utf-8")
    return path


# The command as `tidelens` runs it, then its CPU seconds (the interpreter's start left out) and the
# process's peak memory (KiB) on its last line: on a shared machine the CPU time is what the growth is read from, the wall time beside.
_RUN = ("import resource, sys, time\nfrom analytics.cli import main\nt = time.process_time()\n"
        "rc = main(sys.argv[1:])\nprint(time.process_time() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "
        "file=sys.stderr)\nsys.exit(rc)")


def export_once(repo: Path, config: Path, out: Path) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and peak memory (KiB) of one whole ``export rules`` process."""
    python = repo / ".venv" / "bin" / "python"
    t0 = time.perf_counter()
    done = subprocess.run([str(python), "-c", _RUN, "export", "rules", "--out", str(out), "--config", str(config)],
                          cwd=repo, check=True, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - t0
    cpu, rss = done.stderr.strip().splitlines()[-1].split()
    return wall, float(cpu), int(rss)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="50,100,200,500", help="map sizes (rules), comma-separated")
    ap.add_argument("--repeat", type=int, default=3, help="runs per size; the median counts")
    ap.add_argument("--repo", default=str(ROOT), help="the checkout to time (default: this one)")
    args = ap.parse_args()
    repo = Path(args.repo).resolve()
    sizes = [0, *(int(x) for x in args.sizes.split(","))]
    print(f"{repo}: export rules, whole process, median of {args.repeat}")
    print(f"{'rules':>6} {'wall s':>7} {'CPU s':>6} {'MB file':>8} {'peak MB':>8} {'growth':>7} {'file':>6} {'sizes':>6}")
    rows: list[tuple[int, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            config = write_map(Path(tmp) / f"map{n}.toml", n)
            out = Path(tmp) / f"rules{n}.yml"
            runs = [export_once(repo, config, out) for _ in range(args.repeat)]
            wall, seconds = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
            size_mb = out.stat().st_size / 1e6
            growth = file_growth = sizes_ratio = ""
            if len(rows) >= 2:  # each ratio of what the rules add to the 0-rule map's
                (n0, s0, m0), (_, base, base_mb) = rows[-1], rows[0]
                growth = f"{(seconds - base) / max(s0 - base, 1e-3):.2f}"
                file_growth = f"{(size_mb - base_mb) / (m0 - base_mb):.2f}"
                sizes_ratio = f"{n / n0:.2f}"
            rows.append((n, seconds, size_mb))
            print(f"{n:>6} {wall:>7.2f} {seconds:>6.2f} {size_mb:>8.2f} {max(r[2] for r in runs) / 1024:>8.0f} "
                  f"{growth:>7} {file_growth:>6} {sizes_ratio:>6}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
