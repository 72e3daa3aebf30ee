"""Scale of live pulls: a synthetic fleet backfilled into a real Prometheus, pulled, and compared.

Run by hand (Debian's ``prometheus``/``promtool`` on PATH)::

    .venv/bin/python bench/scale.py --gpus 1000 --days 7        # the issue's size (slow: tens of minutes)
    .venv/bin/python bench/scale.py --gpus 64 --days 1          # a quick look

Writes the fleet (8 GPUs per node, holders changing every few hours, 4 device metrics per GPU,
a vLLM service with 22 TTFT buckets on 8 pods, the HPA) as OpenMetrics at a 1-minute scrape,
backfills it with ``promtool``, starts Prometheus, then:

- pulls it through the aggregated (timeline) path: series and bytes transferred, pull time,
  store size; and through the compact fleet catalogue (``tidelens:*`` counts);
- loads the same raw export from the file (the peer, in the same run): load time, store size;
- times the Overview's data path (pool timeline, holdings, service timeline, KPIs) on both
  stores, and prints ratios pull/file.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import numpy as np  # noqa: E402

import prom_server  # noqa: E402
from analytics import signals as s  # noqa: E402
from analytics.ingest import ingest_path  # noqa: E402
from analytics.live.client import ClientConfig, PromClient  # noqa: E402
from analytics.live.pull import pull  # noqa: E402
from analytics.live.queries import fleet_queries  # noqa: E402
from analytics.store import Store  # noqa: E402
from analytics.timeline import TimelineConfig, holdings, pool_timeline, service_timeline  # noqa: E402

T0_S = 1_767_571_200  # 2026-01-05T00:00:00Z


def write_fleet(path: Path, gpus: int, days: int, scrape_s: int, seed: int = 7) -> int:
    """Write the fleet's raw export; returns the number of samples."""
    rng = np.random.default_rng(seed)
    n = days * 86400 // scrape_s
    ts = T0_S + np.arange(n) * scrape_s
    ts_txt = [f"{t:.3f}" for t in ts]
    samples = 0
    block = 4 * 3600 // scrape_s  # holders change every 4 hours
    with path.open("w") as fh:
        for metric, scale in ((s.DCGM_GPU_UTIL, 100.0), (s.DCGM_GR_ENGINE_ACTIVE, 1.0),
                              (s.DCGM_FB_USED, 80000.0), (s.DCGM_POWER, 700.0)):
            for g in range(gpus):
                node, minor = divmod(g, 8)
                base = (f'gpu="{minor}",UUID="GPU-{g:05d}",device="nvidia{minor}",'
                        f'modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-{node:03d}",'
                        f'instance="10.1.{node // 250}.{node % 250}:9400",job="dcgm"')
                vals = np.round(rng.random(n) * scale, 3)
                for b0 in range(0, n, block):
                    kind = (g * 7 + b0 // block) % 5
                    if kind == 0:
                        labels = base
                    elif kind in (1, 2):
                        labels = (base + f',pod="train-run{g % 50}-{b0 // block}",namespace="ml-training",'
                                  'container="trainer"')
                    else:
                        labels = (base + f',pod="chat-vllm-6d9c7b5f4-{_suffix(g)}",namespace="inference",'
                                  'container="vllm"')
                    head = f"{metric}{{{labels}}} "
                    fh.writelines(f"{head}{vals[i]} {ts_txt[i]}\n" for i in range(b0, min(n, b0 + block)))
                    samples += min(n, b0 + block) - b0
        pods = [f"chat-vllm-6d9c7b5f4-{_suffix(p)}" for p in range(8)]
        rates = rng.poisson(20, size=(len(pods), n)).cumsum(axis=1)
        bounds = s.VLLM_TTFT_BUCKETS_S
        fracs = np.array([1 - math.exp(-b / 0.08) for b in bounds])
        for le_i, le in enumerate([*map(str, bounds), "+Inf"]):
            frac = fracs[le_i] if le_i < len(bounds) else 1.0
            for p, pod in enumerate(pods):
                head = (f'{s.VLLM_TTFT}_bucket{{le="{le}",pod="{pod}",namespace="inference",'
                        f'model_name="llama",job="vllm"}} ')
                vals = np.floor(rates[p] * frac)
                fh.writelines(f"{head}{vals[i]:.0f} {ts_txt[i]}\n" for i in range(n))
                samples += n
        for p, pod in enumerate(pods):
            head = f'{s.VLLM_TTFT}_count{{pod="{pod}",namespace="inference",model_name="llama",job="vllm"}} '
            fh.writelines(f"{head}{rates[p][i]} {ts_txt[i]}\n" for i in range(n))
            samples += n
        head = f'{s.KSM_HPA_DESIRED}{{namespace="inference",horizontalpodautoscaler="chat-vllm"}} '
        fh.writelines(f"{head}8 {ts_txt[i]}\n" for i in range(n))
        samples += n
        fh.write("# EOF\n")
    return samples


def _suffix(i: int) -> str:
    safe = "bcdfghjklmnpqrstvwxz2456789"
    out = ""
    for _ in range(5):
        i, r = divmod(i, len(safe))
        out += safe[r]
    return out


def overview_s(store: Store) -> float:
    t0 = time.perf_counter()
    cfg = TimelineConfig(step_s=60)
    pool_timeline(store, cfg)
    holdings(store, cfg)
    service_timeline(store, cfg)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=1000)
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--scrape-s", type=int, default=60)
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    bins = prom_server.require_binaries()
    if bins is None:
        print("prometheus/promtool not installed (apt-get install prometheus)")
        return 1
    prom, tool = bins
    work = Path(args.workdir or tempfile.mkdtemp(prefix="tidelens-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    om = work / "fleet.om"
    t = time.perf_counter()
    n_samples = write_fleet(om, args.gpus, args.days, args.scrape_s)
    print(f"fleet: {args.gpus} GPUs x {args.days} d at {args.scrape_s} s: {n_samples:,} samples, "
          f"{om.stat().st_size / 1e6:,.0f} MB OpenMetrics ({time.perf_counter() - t:.1f} s to write)")
    t = time.perf_counter()
    shutil.rmtree(work / "data", ignore_errors=True)
    prom_server.backfill(tool, om, work / "data")
    print(f"promtool backfill: {time.perf_counter() - t:.1f} s")
    server = prom_server.start(prom, work / "data", scrape_s=args.scrape_s, attempts=3000)
    try:
        end_ms = (T0_S + args.days * 86400 - args.scrape_s) * 1000
        pulled_db = work / "pulled.duckdb"
        pulled_db.unlink(missing_ok=True)
        with Store(pulled_db) as st, PromClient(server.url, config=ClientConfig(timeout_s=300)) as c:
            t = time.perf_counter()
            rep = pull(st, c, T0_S * 1000, end_ms, step_ms=60_000, max_series=1_000_000)
            pull_s = time.perf_counter() - t
            tot = st.totals()
            ov_pull = overview_s(st)
        print(f"pull (timeline catalogue): {pull_s:.1f} s, {rep.requests} requests, "
              f"{rep.bytes_received / 1e6:,.1f} MB received, {rep.series_returned:,} series-chunks, "
              f"store {tot['series']:,} series / {tot['samples']:,} samples / "
              f"{pulled_db.stat().st_size / 1e6:,.1f} MB; Overview data {ov_pull:.2f} s")
        with Store(":memory:") as st, PromClient(server.url, config=ClientConfig(timeout_s=300)) as c:
            t = time.perf_counter()
            frep = pull(st, c, T0_S * 1000, end_ms, step_ms=60_000, max_series=1_000_000,
                        queries=fleet_queries(60_000))
            fleet_s = time.perf_counter() - t
            ftot_fleet = st.totals()
        print(f"pull (fleet catalogue, tidelens:* counts): {fleet_s:.1f} s, {frep.requests} requests, "
              f"{frep.bytes_received / 1e6:,.1f} MB received, store {ftot_fleet['series']:,} series / "
              f"{ftot_fleet['samples']:,} samples")
        file_db = work / "files.duckdb"
        file_db.unlink(missing_ok=True)
        with Store(file_db) as st:
            t = time.perf_counter()
            ingest_path(st, om)
            load_s = time.perf_counter() - t
            ftot = st.totals()
            ov_file = overview_s(st)
        print(f"files (peer): load {load_s:.1f} s, store {ftot['series']:,} series / "
              f"{ftot['samples']:,} samples / {file_db.stat().st_size / 1e6:,.1f} MB; "
              f"Overview data {ov_file:.2f} s")
        print(f"ratios pull/file: time {pull_s / load_s:.2f}, store bytes "
              f"{pulled_db.stat().st_size / file_db.stat().st_size:.2f}, series "
              f"{tot['series'] / ftot['series']:.2f}, samples {tot['samples'] / ftot['samples']:.2f}, "
              f"transferred/raw-file bytes {rep.bytes_received / om.stat().st_size:.2f}, "
              f"Overview {ov_pull / ov_file:.2f}")
    finally:
        server.stop()
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("POLARS_MAX_THREADS", "2")
    raise SystemExit(main())
