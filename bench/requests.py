"""Benchmark: a 10M-row per-request log into the store, and its exact per-step percentiles,
against polars on the same rows, in one run (run by hand).

    .venv/bin/python bench/requests.py [--rows 10000000] [--dir /tmp/tidelens-bench-requests]

Generates (once, cached in --dir) a gateway log CSV (``timestamp, service, latency_ms, status,
pod``; 3 services over 7 days), then times, each in its own subprocess (peak memory is that
child's max RSS from ``getrusage(RUSAGE_CHILDREN)``):

- ``tidelens ingest`` of the CSV into a fresh DuckDB file (targets: < 10 s and < 2 GB);
- Tidelens' per-step p50/p95/p99 of every service over the whole span (the service timeline's
  request-log step: ``analytics.sql.requests.REQUEST_STEPS``) on the loaded store;
- the peer: polars reading the same CSV and ``quantile(q, interpolation="linear")`` per service
  and 1-minute step, the same rows; the two results are compared value by value.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
T0 = 1_767_571_200  # 2026-01-05 00:00 UTC

_OURS_STEPS = """
import json, sys, time
from analytics.store import Store
from analytics.sql import requests as rq
t = time.perf_counter()
with Store(sys.argv[1], read_only=True) as st:
    out = st.query(rq.REQUEST_STEPS, {"step_ms": 60000, "lo_ms": 0, "hi_ms": 2**62, "ttft_services": []})
out = out.sort("service", "ts_end_ms")
out.select("service", "ts_end_ms", "requests", *(out["q"].list.get(i).alias(c) for i, c in
           enumerate(("p50", "p95", "p99")))).write_parquet(sys.argv[2])
print(json.dumps({"wall_s": time.perf_counter() - t, "rows": out.height}))
"""
_PEER = """
import json, sys, time
import polars as pl
t = time.perf_counter()
f = pl.read_csv(sys.argv[1], schema_overrides={"latency_ms": pl.Float64, "status": pl.Int64})
f = f.with_columns(((pl.col("timestamp") * 1000).round(0).cast(pl.Int64)).alias("ts_ms"))
f = f.with_columns((((pl.col("ts_ms") + 59999) // 60000) * 60000).alias("ts_end_ms"))
ok = pl.col("status") < 500
out = f.group_by("service", "ts_end_ms").agg(
    pl.len().alias("requests"),
    *(pl.col("latency_ms").filter(ok).quantile(q, interpolation="linear").alias(c)
      for c, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)))).sort("service", "ts_end_ms")
out.write_parquet(sys.argv[2])
print(json.dumps({"wall_s": time.perf_counter() - t, "rows": out.height}))
"""


def generate(path: Path, rows: int) -> None:
    import numpy as np
    import polars as pl

    rng = np.random.default_rng(42)
    span = 7 * 86400
    # a day's rhythm: more requests in the afternoon
    u = rng.uniform(0, 1, rows * 2)
    t = rng.uniform(0, span, rows * 2)
    keep = u < 0.5 + 0.45 * np.sin(2 * np.pi * (t % 86400) / 86400 - np.pi / 2) ** 2
    t = np.sort(t[keep][:rows])
    n = t.size
    frame = pl.DataFrame({
        "timestamp": np.round(T0 + t, 3),
        "service": rng.choice(["chat-vllm", "recommender", "embed"], n, p=[0.6, 0.3, 0.1]),
        "latency_ms": np.round(rng.lognormal(3.0, 0.6, n), 2),
        "status": np.where(rng.uniform(size=n) < 0.01, 503, 200),
        "pod": np.char.add("pod-", rng.integers(0, 40, n).astype(str)),
    })
    frame.write_csv(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--dir", default="/tmp/tidelens-bench-requests")
    a = ap.parse_args()
    d = Path(a.dir)
    d.mkdir(parents=True, exist_ok=True)
    csv = d / f"gateway-{a.rows}.csv"
    if not csv.exists():
        t = time.perf_counter()
        generate(csv, a.rows)
        print(f"generated {csv} ({csv.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t:.1f} s")
    db = d / "store.duckdb"
    for p in (db, Path(f"{db}.wal")):
        p.unlink(missing_ok=True)
    ingest = _self_peak([PY, "-m", "analytics", "ingest", "--db", str(db), str(csv)])
    ours = _self_peak([PY, "-c", _OURS_STEPS, str(db), str(d / "ours.parquet")])
    peer = _self_peak([PY, "-c", _PEER, str(csv), str(d / "peer.parquet")])

    import polars as pl

    o = pl.read_parquet(d / "ours.parquet")
    p = pl.read_parquet(d / "peer.parquet")
    j = o.join(p, on=["service", "ts_end_ms"], suffix="_peer")
    assert j.height == o.height == p.height, (o.height, p.height, j.height)
    worst = max(float((j[c] - j[f"{c}_peer"]).abs().max()) for c in ("p50", "p95", "p99"))
    assert (j["requests"] == j["requests_peer"]).all() and worst < 1e-6, worst
    rows = pl.scan_csv(csv).select(pl.len()).collect().item()
    print(f"\n{rows:,} requests, {csv.stat().st_size / 1e6:.0f} MB CSV, {o.height:,} service-steps; per-step "
          f"p50/p95/p99 equal to polars' within {worst:.1e} ms\n")
    print("| work | wall s | CPU s | peak GB | note |")
    print("|---|---|---|---|---|")
    print(f"| tidelens ingest (whole process) | {ingest['wall_s']:.2f} | {ingest['cpu_s']:.2f} | {ingest['peak_gb']:.2f} "
          f"| targets < 10 s, < 2 GB: {'met' if ingest['wall_s'] < 10 and ingest['peak_gb'] < 2 else 'MISSED'} |")
    print(f"| Tidelens per-step quantiles on the store (query) | {ours['inner_wall_s']:.2f} | {ours['cpu_s']:.2f} | "
          f"{ours['peak_gb']:.2f} | whole process {ours['wall_s']:.2f} s |")
    print(f"| polars read_csv + per-step quantile (peer) | {peer['inner_wall_s']:.2f} | {peer['cpu_s']:.2f} | "
          f"{peer['peak_gb']:.2f} | whole process {peer['wall_s']:.2f} s |")
    print(f"\nratios: ingest + quantiles {ingest['wall_s'] + ours['inner_wall_s']:.2f} s vs the peer's read + quantiles "
          f"{peer['inner_wall_s']:.2f} s = {(ingest['wall_s'] + ours['inner_wall_s']) / peer['inner_wall_s']:.2f}x; "
          f"quantiles alone {ours['inner_wall_s'] / peer['inner_wall_s']:.2f}x the peer's whole read+quantile; "
          f"ingest peak memory {ingest['peak_gb'] / peer['peak_gb']:.2f}x the peer's")


def _self_peak(args: list[str]) -> dict:
    """Time ``args`` in a child whose own peak RSS is read by a tiny wrapper process (getrusage of
    the parent keeps the largest child so far, which would blur the second measurement)."""
    wrapper = ("import json, resource, subprocess, sys, time; t = time.perf_counter(); "
               "p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
               "r = resource.getrusage(resource.RUSAGE_CHILDREN); "
               "sys.stderr.write(p.stderr); "
               "print(p.stdout.strip()); "
               "print(json.dumps({'rc': p.returncode, 'child_wall_s': time.perf_counter() - t, "
               "'child_cpu_s': r.ru_utime + r.ru_stime, 'child_peak_gb': r.ru_maxrss / 1e6}))")
    proc = subprocess.run([PY, "-c", wrapper, *args], capture_output=True, text=True, cwd=ROOT)
    lines = [ln for ln in proc.stdout.strip().splitlines() if ln.startswith("{")]
    stats = json.loads(lines[-1])
    if stats["rc"] != 0:
        raise SystemExit(f"{args[:4]} failed:\n{proc.stdout}\n{proc.stderr}")
    out = {"wall_s": stats["child_wall_s"], "cpu_s": stats["child_cpu_s"], "peak_gb": stats["child_peak_gb"]}
    inner = [json.loads(ln) for ln in lines[:-1] if "wall_s" in ln]
    if inner:
        out["inner_wall_s"] = inner[-1]["wall_s"]
    return out


if __name__ == "__main__":
    main()
