"""Hostile input: time and peak memory of refusing each case, as a shared server would meet it.

Every case is one ``tidelens ingest`` process (its own peak RSS from ``wait4``), against the
floor of a valid small file in the same run. The cases: every file of ``tests/fixtures/hostile/``
and of its door folders (``datadog/``, ``lineprotocol/``, ``requests/``, ``csv/``; each mapping of
``mapping/`` as ``--columns`` over its table), the decompression bombs of issue 16 built here at
full size (10 MB of gzip holding 10 GB of zeros after a valid header; 26 MB of valid lines
expanding to 10 GB; a 10 MB CSV ``.gz`` holding 4 GB), the big cases of issue 43
(``make_doors.big_cases``: one 400 MB line-protocol line, a one-row CSV of 3 million columns, a
Datadog response of 2.1 million series, a request log with a 17 MiB line), those of issue 50 (a
10 MB line-protocol line of 950,000 fields, a tar.gz holding a 1 GiB sparse member, a zip of 100,000
members) and a 1.5 GB valid archive that must still load. Targets: each refusal < 10 s at < 1 GB
peak; the valid archive loads. Figures, not a timed test.

``--only series`` runs issue 50's series cases instead, per format (exposition, line protocol,
CSV; ``make_doors.series_cases``; ``--only "series csv"`` one of them): a file of 2.1 million series (a label that changes on every
line), refused at the series limit; beside it the floor, a valid file of the same size (the same
lines over 64 GPUs); and a load of as many series as the limit allows. Target: each under 1 GiB.

Usage::

    .venv/bin/python bench/hostile.py [--scale 1.0] [--skip-archive] [--skip-bombs] [--only WORDS]

``--scale 0.1`` builds the bombs and the archive at a tenth of the size (a quick look); the big
cases of issue 43 are always built at full size (a few hundred MB, seconds), since their size is
what crosses each limit. The smallest run: ``--scale 0.01 --skip-archive --skip-bombs``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = ROOT / "tests" / "fixtures" / "hostile"
T = 1_780_000_000_000
TARGET_S, TARGET_MIB = 10.0, 1024.0
BLOCK = 16 << 20


def _gzip_stream(path: Path, head: bytes, body: bytes, total: int, level: int = 6) -> None:
    """``head`` then ``body`` repeated to ``total`` bytes, gzipped as a stream (never in memory)."""
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=level, mtime=0) as gz:
        gz.write(head)
        reps = max(1, BLOCK // len(body))
        block = body * reps
        written = len(head)
        while written < total:
            gz.write(block[: min(len(block), total - written)])
            written += len(block)


def build_bombs(folder: Path, scale: float) -> dict[str, Path]:
    out = {}
    z = folder / "zeros-10GB.prom.gz"
    _gzip_stream(z, b'# TYPE up gauge\nup{job="a"} 1 ' + str(T).encode() + b"\n", b"\0" * 4096, int(10e9 * scale), 9)
    out["gzip: 10 GB of zeros after a valid line"] = z
    lines = folder / "lines-10GB.prom.gz"
    _gzip_stream(lines, b"# TYPE up gauge\n", f'up{{job="a"}} 1 {T}\n'.encode(), int(10e9 * scale), 9)
    out["gzip: valid lines expanding to 10 GB"] = lines
    csv = folder / "csv-4GB.csv.gz"
    _gzip_stream(csv, b"timestamp,metric,value\n", f"{T},m,1\n".encode(), int(4e9 * scale), 6)
    out["gzip: CSV with 4 GB inside"] = csv
    return out


def build_archive(folder: Path, scale: float) -> Path:
    """~1.5 GB of real-shaped scrapes (64 GPUs x 6 metrics, 1 min apart), gzipped."""
    path = folder / "archive-1.5GB.prom.gz"
    target = int(1.5e9 * scale)
    metrics = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE",
               "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_GPU_TEMP")
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1, mtime=0) as gz:
        written, minute = 0, 0
        while written < target:
            ts = T - 86_400_000 * 30 + minute * 60_000
            chunk = "".join(f'{m}{{gpu="{g % 8}",UUID="GPU-{g:04d}",Hostname="node-{g // 8}",'
                            f'pod="p-{g}",namespace="ml"}} {(g * 7 + minute) % 100} {ts}\n'
                            for m in metrics for g in range(64)).encode()
            gz.write(chunk)
            written += len(chunk)
            minute += 1
    return path


def door_cases() -> list[tuple[str, list[str]]]:
    """``(label, ingest arguments)`` of every file in the door folders (a mapping: --columns over its table)."""
    out = []
    for folder in sorted(p for p in HOSTILE.iterdir() if p.is_dir()):
        for p in sorted(folder.iterdir()):
            if folder.name == "mapping":
                if p.suffix == ".toml":
                    out.append((f"mapping: {p.name}", ["--columns", str(p), str(folder / "table.csv")]))
            else:
                out.append((f"{folder.name}: {p.name}", [str(p)]))
    return out


def run_case(path: Path | list[str], db: Path) -> tuple[float, float, int, str]:
    """(seconds, peak MiB, exit code, last line of output) of one ingest process."""
    env = {k: v for k, v in os.environ.items() if k != "TIDELENS_TIME_WINDOW"}
    args = [str(path)] if isinstance(path, Path) else path
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "analytics.cli", "ingest", "--db", str(db), *args],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    secs = time.perf_counter() - t
    lines = out.strip().splitlines() or [""]
    last = lines[-1] if proc.returncode else lines[0]  # a refusal's message, or the load's row and note
    return secs, usage.ru_maxrss / 1024, proc.returncode, last


def _built(function: str, folder: Path, *args: object) -> object:
    """``make_doors.<function>(folder, *args)``, run in a process of its own (a child's peak RSS
    starts at this process's size when it forks), its paths as JSON."""
    code = ("import importlib.util, json, sys; from pathlib import Path; "
            "s = importlib.util.spec_from_file_location('d', sys.argv[1]); m = importlib.util.module_from_spec(s); "
            "s.loader.exec_module(m); "
            f"print(json.dumps(m.{function}(Path(sys.argv[2]), *json.loads(sys.argv[3])), default=str))")
    out = subprocess.run([sys.executable, "-c", code, str(HOSTILE / "make_doors.py"), str(folder), json.dumps(args)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def series_table(folder: Path, scale: float, formats: list[str]) -> None:
    """Issue 50's series cases, per format (``formats``, else all): refused past the limit, beside
    the floor of the same size and a load at the limit (peak RSS of each ``tidelens ingest`` process)."""
    sys.path.insert(0, str(ROOT))
    from analytics.limits import IngestLimits

    limit = IngestLimits.from_env().max_series
    t = time.perf_counter()
    built = _built("series_cases", folder, limit, scale, formats)
    print(f"built the series cases in {time.perf_counter() - t:.0f} s (limit {limit:,} series)\n")
    print(f"| format | file | past the limit: time s, peak MiB | floor, same size, 64 series: time s, peak MiB "
          f"| {limit:,} series loaded: time s, peak MiB | under {TARGET_MIB:.0f} MiB |")
    print("|---|---|---|---|---|---|")
    for fmt, paths in built.items():  # type: ignore[union-attr]
        if formats and fmt not in formats:
            continue
        got = {}
        for kind in ("past", "floor", "at"):
            secs, mib, rc, last = run_case(Path(paths[kind]), folder / f"{fmt}-{kind}.duckdb")
            got[kind] = (secs, mib, rc, last)
        size = Path(paths["past"]).stat().st_size / 1e6
        ok = all(v[1] < TARGET_MIB for v in got.values())
        cells = [f"{got[k][0]:.1f} s, {got[k][1]:.0f} MiB (exit {got[k][2]})" for k in ("past", "floor", "at")]
        print(f"| {fmt} | {size:.0f} MB | {' | '.join(cells)} | {'yes' if ok else 'NO'} |", flush=True)
        said = got["past"][3].replace(f"{folder}/", "")[:100].replace("|", "/")
        print(f"|  | refusal: {said} |  |  |  |  |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=1.0, help="size of the built bombs and archive (1 = issue 16's)")
    ap.add_argument("--skip-archive", action="store_true", help="do not build and load the 1.5 GB archive")
    ap.add_argument("--skip-bombs", action="store_true", help="do not build the gzip bombs of issue 16")
    ap.add_argument("--only", default="", help="run only the cases whose label holds these words (e.g. 'archive:')")
    args = ap.parse_args()
    if args.only.split()[:1] == ["series"]:  # "series", or "series csv" for one format
        with tempfile.TemporaryDirectory() as tmp:
            series_table(Path(tmp), args.scale, args.only.split()[1:])
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        floor_file = folder / "floor.prom"
        floor_file.write_bytes(f'# TYPE up gauge\nup{{job="a"}} 1 {T}\n'.encode())
        floor_s, floor_mib, _, _ = run_case(floor_file, folder / "floor.duckdb")
        cases: list[tuple[str, Path | list[str]]] = [
            (f"corpus: {p.name}", p) for p in sorted(HOSTILE.iterdir())
            if p.is_file() and p.name not in ("make_corpus.py", "make_doors.py")]
        cases += door_cases()
        if not args.skip_bombs:
            t = time.perf_counter()
            bombs = build_bombs(folder, args.scale)
            print(f"built the bombs in {time.perf_counter() - t:.0f} s "
                  f"({', '.join(f'{p.stat().st_size / 1e6:.0f} MB' for p in bombs.values())} compressed)")
            cases += list(bombs.items())
        t = time.perf_counter()
        built = _built("big_cases", folder, 1.0)
        big = {k: Path(v) for k, v in built.items()}  # type: ignore[union-attr]  # full size always: it crosses each limit
        print(f"built the big cases in {time.perf_counter() - t:.0f} s "
              f"({', '.join(f'{p.stat().st_size / 1e6:.0f} MB' for p in big.values())})")
        cases += list(big.items())
        cases = [(label, path) for label, path in cases if args.only in label]
        print(f"floor (a valid 1-line file): {floor_s:.2f} s, {floor_mib:.0f} MiB peak\n")
        print(f"| case | exit | time s | x floor | peak MiB | within {TARGET_S:.0f} s / {TARGET_MIB:.0f} MiB | message |")
        print("|---|---|---|---|---|---|---|")
        worst = 0.0
        for label, path in cases:
            secs, mib, rc, last = run_case(path, folder / "c.duckdb")
            ok = secs < TARGET_S and mib < TARGET_MIB
            worst = max(worst, secs / TARGET_S, mib / TARGET_MIB)
            print(f"| {label} | {rc} | {secs:.2f} | {secs / floor_s:.1f} | {mib:.0f} | "
                  f"{'yes' if ok else 'NO'} | {last[-90:].replace('|', '/')} |", flush=True)
        print(f"\nworst case at {worst:.2f} of its target (time or memory)")
        if not args.skip_archive:
            t = time.perf_counter()
            archive = build_archive(folder, args.scale)
            print(f"\nbuilt a valid archive: {1.5 * args.scale:.2f} GB of text, "
                  f"{archive.stat().st_size / 1e9:.2f} GB gzip, in {time.perf_counter() - t:.0f} s")
            secs, mib, rc, last = run_case(archive, folder / "a.duckdb")
            print(f"valid archive: exit {rc}, {secs:.1f} s, {mib:.0f} MiB peak: {last}")


if __name__ == "__main__":
    main()
