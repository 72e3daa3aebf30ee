"""Scale of live pulls: a synthetic fleet backfilled into a real Prometheus, pulled, and compared.

Run by hand (Debian's ``prometheus``/``promtool`` on PATH)::

    .venv/bin/python bench/scale.py --gpus 1000 --days 7 --workdir /work/scale-run   # the issue's size
    .venv/bin/python bench/scale.py --gpus 64 --days 1          # a quick look
    .venv/bin/python bench/scale.py --gpus 4000 --days 14 --stream --skip-fleet --skip-timeline-pull \
        --workdir /work/scale-4000   # ~80 GB of raw files never all on disk; 1 h 55 min on two cores (2026-12-05)

Writes the fleet (8 GPUs per node, holders changing every few hours, 4 device metrics per GPU,
a vLLM service with 22 TTFT buckets on 8 pods whose tail follows its load per ready replica, the
HPA and the Deployment's ready replicas; each day a traffic surge, training withholding replicas,
both at once, and a slow spell with neither: :func:`episodes`) as OpenMetrics at a 1-minute scrape,
one file per 2-hour window (one promtool pass and one block each), backfills them with
``promtool`` two at a time, starts Prometheus, then:

- pulls it through the aggregated (timeline) path: series and bytes transferred, pull time,
  store size; and through the compact fleet catalogue (``tidelens:*`` counts);
- loads the same raw export from its files (the peer, in the same run; the files one after
  another, the load time is the sum): load time, store size;
- times the Overview's data path (pool timeline, holdings, service timeline, KPIs) on both
  stores, and prints ratios pull/file;
- with ``--rules`` (the default), side by side in the same run: compiles the workload map to
  recording rules (``tidelens export rules``), backfills them over the fleet with ``promtool tsdb
  create-blocks-from rules`` in passes against the same Prometheus, pulls through them
  (``analytics.live.route``), and compares that pull with the file load: time, bytes, and
  the verdicts (Overview KPIs, Tail events with their causes, the What-if backtest), which
  must be identical.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
# bench/requests.py would shadow the requests package the live client imports
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("POLARS_MAX_THREADS", "2")  # before polars loads: the machine is shared

import numpy as np  # noqa: E402
import prom_server  # noqa: E402

from analytics import signals as s  # noqa: E402
from analytics.ingest import ingest_path  # noqa: E402
from analytics.live.client import ClientConfig, PromClient  # noqa: E402
from analytics.live.pull import pull  # noqa: E402
from analytics.overview import summarise  # noqa: E402
from analytics.promql import fleet_queries  # noqa: E402
from analytics.slo import SloTable  # noqa: E402
from analytics.store import Store  # noqa: E402
from analytics.timeline import TimelineConfig, timelines  # noqa: E402
from analytics.workloads import WorkloadMap  # noqa: E402

T0_S = 1_767_571_200  # 2026-01-05T00:00:00Z, a multiple of WINDOW_S
WINDOW_S = 7200  # promtool's block length: one file per aligned window makes one block
STREAM_SUMMARY = "stream.json"  # a --stream run's file load and sizes, for --reuse
DCGM_METRICS = ((s.DCGM_GPU_UTIL, 100.0), (s.DCGM_GR_ENGINE_ACTIVE, 1.0),
                (s.DCGM_FB_USED, 80000.0), (s.DCGM_POWER, 700.0))


def episodes(days: int, seed: int) -> list[tuple[str, int, int]]:
    """The days' tail episodes as ``(kind, first minute, end minute)``, deterministic per seed.

    Each day has one of each kind at its own (drawn) hour, so no hour is the traffic's norm:
    ``surge`` (requests x2.2-2.6 while the HPA is at its 8 replicas), ``contention`` (training
    takes the idle GPUs and four replicas' GPUs: ready 4 of the 8 the HPA wants) and
    ``compound`` (both: x1.6-1.8 on 5 ready), and ``slow`` (the tail x3 with neither: what the
    attribution must leave unexplained), each 60-90 minutes.
    """
    rng = np.random.default_rng([seed, 41])
    out = []
    for d in range(days):
        for kind, lo, hi in (("surge", 1, 5), ("slow", 6, 8), ("contention", 9, 14), ("compound", 17, 21)):
            start = d * 1440 + int(rng.integers(lo * 60, hi * 60))
            out.append((kind, start, start + int(rng.integers(60, 91))))
    return out


def service_load(n: int, days: int, seed: int, rng: np.random.Generator,
                 pods: int = 8) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per minute: ready replicas, whether training holds the contended GPUs, and per pod the
    TTFT histogram's per-minute counts by bucket (``pods x n x (buckets + 1)``).

    20 requests a minute per pod of 8 in the norm, spread over the ready ones; TTFT exponential
    with a mean that grows as the load per ready replica ``x`` does beyond the norm ``x0``:
    ``0.08 s x max(1, x / x0) ** 1.5``, so a surge and a withheld replica both slow the tail.
    """
    factor = np.ones(n)
    ready = np.full(n, float(pods))
    contended = np.zeros(n, bool)
    slow = np.ones(n)
    for kind, a, b in episodes(days, seed):
        a, b = min(a, n), min(b, n)
        slow[a:b] = 3.0 if kind == "slow" else 1.0
        if kind in ("surge", "compound"):
            factor[a:b] = (2.2 + 0.4 * rng.random()) if kind == "surge" else (1.6 + 0.2 * rng.random())
        if kind in ("contention", "compound"):
            ready[a:b] = 4.0 if kind == "contention" else 5.0
            contended[a:b] = True
    serving = np.arange(pods)[:, None] < ready[None, :]  # the first `ready` pods serve
    lam = np.where(serving, 20.0 * pods / ready * factor, 0.0)
    counts = rng.poisson(lam)  # pods x n
    x = counts.sum(axis=0) / ready
    x0 = 20.0 * pods / pods
    mean_s = 0.08 * np.maximum(1.0, x / x0) ** 1.5 * slow
    bounds = np.array([*s.VLLM_TTFT_BUCKETS_S, np.inf])
    cdf = 1.0 - np.exp(-bounds[None, :] / mean_s[:, None])  # n x buckets
    probs = np.diff(cdf, prepend=0.0, axis=1)
    probs /= probs.sum(axis=1, keepdims=True)
    per_bucket = rng.multinomial(counts, probs[None, :, :]) if n else np.zeros((pods, 0, len(bounds)))
    return ready, contended, per_bucket


def write_fleet(folder: Path, gpus: int, days: int, scrape_s: int, seed: int = 7,
                on_window: Callable[[Path], None] | None = None) -> tuple[list[Path], int]:
    """Write the fleet's raw export as one OpenMetrics file per 2-hour window (``on_window``
    called with each file once it is whole: it may use and delete it).

    Returns the files (sorted by time) and the number of samples. Each file is a whole
    OpenMetrics document (metric families contiguous, ``# EOF``) covering one window aligned
    to a multiple of :data:`WINDOW_S` since the epoch, so promtool makes exactly one block of
    it in one pass. The service's latency follows its load per ready replica, and the
    :func:`episodes` (traffic surges, training withholding replicas, both) give the tail events
    causes; the Deployment's ready replicas and the HPA's desired tell the withheld ones.
    """
    if WINDOW_S % scrape_s or (T0_S % WINDOW_S):
        raise ValueError(f"--scrape-s must divide {WINDOW_S}")
    if scrape_s != 60:
        raise ValueError("--scrape-s: the service's episodes are drawn per minute; use 60")
    rng = np.random.default_rng(seed)
    n = days * 86400 // scrape_s
    ts = T0_S + np.arange(n) * scrape_s
    ts_txt = [f"{t:.3f}" for t in ts]
    block = 4 * 3600 // scrape_s  # holders change every 4 hours (two windows)
    per_window = WINDOW_S // scrape_s
    vals = np.empty((len(DCGM_METRICS), gpus, n))
    for m, (_, scale) in enumerate(DCGM_METRICS):
        for g in range(gpus):
            vals[m, g] = np.round(rng.random(n) * scale, 3)
    pods = [f"chat-vllm-6d9c7b5f4-{_suffix(p)}" for p in range(8)]
    ready, contended, per_bucket = service_load(n, days, seed, rng, len(pods))
    cum = per_bucket.cumsum(axis=1)  # pods x n x buckets: counts up to each minute
    buckets = cum.cumsum(axis=2)  # cumulative in le, as the histogram's _bucket series are
    les = [*map(str, s.VLLM_TTFT_BUCKETS_S), "+Inf"]
    burst = np.cumsum(np.r_[0, np.diff(contended.astype(int)) == 1])  # which contention it is
    bases = []
    for g in range(gpus):
        node, minor = divmod(g, 8)
        bases.append(f'gpu="{minor}",UUID="GPU-{g:05d}",device="nvidia{minor}",'
                     f'modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-{node:03d}",'
                     f'instance="10.1.{node // 250}.{node % 250}:9400",job="dcgm"')

    def labels_of(g: int, b: int) -> str:
        kind = (g * 7 + b) % 5
        if kind == 0:
            return bases[g]
        if kind in (1, 2):
            return bases[g] + f',pod="train-run{g % 50}-{b}",namespace="ml-training",container="trainer"'
        return (bases[g] + f',pod="chat-vllm-6d9c7b5f4-{_suffix(g)}",namespace="inference",'
                'container="vllm"')

    def taken(g: int, b: int) -> bool:  # the GPUs training takes in a contention: idle, half the replicas'
        kind = (g * 7 + b) % 5
        return kind == 0 or (kind in (3, 4) and g % 8 < 4)

    folder.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    samples = 0
    for w, i0 in enumerate(range(0, n, per_window)):
        i1 = min(n, i0 + per_window)
        tts = ts_txt[i0:i1]
        b = i0 // block
        # runs of minutes with and without contention in this window
        cut = [i0, *(np.flatnonzero(np.diff(contended[i0:i1].astype(int))) + i0 + 1).tolist(), i1]
        runs = [(a, z, bool(contended[a])) for a, z in zip(cut[:-1], cut[1:])]
        path = folder / f"fleet-{(T0_S + i0 * scrape_s) // WINDOW_S:08d}.om"
        with path.open("w") as fh:
            for m, (metric, _) in enumerate(DCGM_METRICS):
                for g in range(gpus):
                    usual = labels_of(g, b)
                    for a, z, busy in (runs if taken(g, b) else [(i0, i1, False)]):
                        labels = (bases[g] + f',pod="train-burst-{burst[a]}",namespace="ml-training",'
                                  'container="trainer"') if busy else usual
                        head = f"{metric}{{{labels}}} "
                        fh.writelines([f"{head}{v} {t}\n" for v, t in
                                       zip(vals[m, g, a:z].tolist(), ts_txt[a:z])])
            for le_i, le in enumerate(les):
                for p, pod in enumerate(pods):
                    head = (f'{s.VLLM_TTFT}_bucket{{le="{le}",pod="{pod}",namespace="inference",'
                            f'model_name="llama",job="vllm"}} ')
                    fh.writelines([f"{head}{v} {t}\n" for v, t in zip(buckets[p, i0:i1, le_i].tolist(), tts)])
            for p, pod in enumerate(pods):
                head = f'{s.VLLM_TTFT}_count{{pod="{pod}",namespace="inference",model_name="llama",job="vllm"}} '
                fh.writelines([f"{head}{v} {t}\n" for v, t in zip(buckets[p, i0:i1, -1].tolist(), tts)])
            head = f'{s.KSM_HPA_DESIRED}{{namespace="inference",horizontalpodautoscaler="chat-vllm"}} '
            fh.writelines([f"{head}8 {t}\n" for t in tts])
            head = f'{s.KSM_DEPLOY_READY}{{namespace="inference",deployment="chat-vllm"}} '
            fh.writelines([f"{head}{int(r)} {t}\n" for r, t in zip(ready[i0:i1].tolist(), tts)])
            fh.write("# EOF\n")
        samples += (i1 - i0) * (len(DCGM_METRICS) * gpus + (len(les) + 1) * len(pods) + 2)
        paths.append(path)
        if on_window is not None:
            on_window(path)
    return paths, samples


def _suffix(i: int) -> str:
    safe = "bcdfghjklmnpqrstvwxz2456789"
    out = ""
    for _ in range(5):
        i, r = divmod(i, len(safe))
        out += safe[r]
    return out


def overview_s(store: Store) -> float:
    """The Overview page's data path, as the app runs it: one shared device pass for the three
    timelines, then the KPIs."""
    t0 = time.perf_counter()
    cfg = TimelineConfig(step_s=60)
    tl = timelines(store, cfg)
    summarise(tl.pool, tl.holdings, tl.services, SloTable.every(500.0, "the bench"), cfg.step_s)
    return time.perf_counter() - t0


def verdicts(store: Store, slo_ms: float | None = None) -> dict:
    """What the pages conclude from a store: the Overview KPIs, the Tail events (ids, spans,
    causes), the What-if backtest; ``slo_ms`` defaults to twice the step p99s' median (so the
    episodes of :func:`episodes` are events)."""
    from dataclasses import asdict

    from analytics.events import EventsConfig
    from analytics.events.pipeline import analyse_timelines
    from analytics.whatif.calibrate import calibrate_frames

    cfg = TimelineConfig(step_s=60)
    tl = timelines(store, cfg, WorkloadMap())
    if slo_ms is None:  # twice the median step p99: the episodes' tails cross it, the norm's noise not
        slo_ms = 2 * float(tl.services["p99_ms"].median() or 250.0)
    slos = SloTable.every(slo_ms, "the bench")
    kpis = asdict(summarise(tl.pool, tl.holdings, tl.services, slos, cfg.step_s))
    ev = analyse_timelines(tl, EventsConfig(step_s=60), slos=slos)
    events = [(e.id, e.service, e.start_ms, e.end_ms, e.cause, round(e.peak_p99_ms, 6)) for e in ev.events]
    bt = calibrate_frames(tl.services, tl.pool, tl.holdings, step_s=60, slos=slos).backtest
    backtest = {k: (round(v, 9) if isinstance(v, float) else v) for k, v in bt.items()
                if k in ("observed_violation_minutes", "model_violation_minutes", "observed_batch_gpu_hours",
                         "model_batch_gpu_hours", "within", "observed_p99_ms", "model_p99_ms")}
    return {"slo_ms": slo_ms, "kpis": kpis, "events": events, "backtest": backtest}


def _differences(a: dict, b: dict, rel: float = 1e-9) -> list[str]:
    """Where two verdicts differ (floats within ``rel``)."""
    def plain(x: object) -> object:  # a frame as its rows, floats to 9 significant digits
        if hasattr(x, "to_dicts"):
            return [{k: float(f"{v:.9g}") if isinstance(v, float) else v for k, v in r.items()}
                    for r in x.to_dicts()]  # type: ignore[union-attr]
        return x

    out = []
    for key in ("kpis", "backtest"):
        for k in sorted(set(a[key]) | set(b[key])):
            x, y = plain(a[key].get(k)), plain(b[key].get(k))
            if isinstance(x, float) and isinstance(y, float):
                if not math.isclose(x, y, rel_tol=rel, abs_tol=1e-9) and not (math.isnan(x) and math.isnan(y)):
                    out.append(f"{key}.{k}: {x} vs {y}")
            elif x != y:
                out.append(f"{key}.{k}: {x} vs {y}")
    if a["events"] != b["events"]:
        out.append(f"events: {len(a['events'])} vs {len(b['events'])} "
                   f"(first differing: {next((x, y) for x, y in zip(a['events'] + [None], b['events'] + [None]) if x != y)})")
    return out


def _say(text: str) -> None:
    """One line of the report, flushed so a partial run (nohup ... > log) still tells something."""
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"[{time.strftime('%H:%M:%S')} load {load}] {text}", flush=True)


def _peak_rss_mb(pid: int) -> float:
    """Peak resident memory of a running process (Linux ``VmHWM``), in MB; 0 if unknown."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _remove_db(path: Path) -> None:
    """Remove a DuckDB file and its WAL (a stale WAL from an interrupted run would be replayed)."""
    path.unlink(missing_ok=True)
    path.with_name(path.name + ".wal").unlink(missing_ok=True)


def _progress(label: str, every: int) -> Callable[[int, int, str], None]:
    t0 = time.perf_counter()

    def report(done: int, total: int, message: str) -> None:
        if done == total or done % every == 0:
            _say(f"  {label} {done}/{total} requests, {time.perf_counter() - t0:.0f} s: {message}")
    return report


def _through_rules(prom: str, tool: str, server: prom_server.PromServer, work: Path, end_ms: int,
                   client_cfg: ClientConfig, reuse: bool, jobs: int) -> tuple[prom_server.PromServer, dict]:
    """Backfill the built-in map's rules over the fleet (in passes, against the same server,
    ``jobs`` promtool processes on whole-block slices of the range), then pull through them.
    Returns the server now running and what was measured. With ``reuse``, rules an earlier run
    backfilled for the same map are kept."""
    from analytics.live.route import rules_plan
    from analytics.rules import compile_rules

    with PromClient(server.url, config=client_cfg) as c:
        done = reuse and not any(v == "raw" for k, v in rules_plan(
            c, T0_S * 1000, end_ms, 60_000, WorkloadMap()).paths.items() if k.startswith("dev:"))
    t = time.perf_counter()
    if not done:
        server.stop()
        server = prom_server.backfill_rules(prom, tool, server.data_dir, compile_rules(WorkloadMap()), T0_S * 1000,
                                            end_ms, extra_args=("--storage.tsdb.min-block-duration=2h",
                                                                "--storage.tsdb.max-block-duration=2h"),
                                            timeout_s=None, jobs=jobs)
    backfill_s = time.perf_counter() - t if not done else 0.0
    _say("rules backfill (promtool tsdb create-blocks-from rules, in passes; the user's engine's work): "
         + (f"{backfill_s:.1f} s" if not done else "reused from the earlier run"))
    db = work / "rules.duckdb"
    _remove_db(db)
    with Store(db) as st, PromClient(server.url, config=client_cfg) as c:
        t = time.perf_counter()
        plan = rules_plan(c, T0_S * 1000, end_ms, 60_000, WorkloadMap())
        rep = pull(st, c, T0_S * 1000, end_ms, step_ms=60_000, max_series=1_000_000, queries=plan.queries,
                   progress=_progress("rules pull", 5))
        pull_s = time.perf_counter() - t
        tot = st.totals()
        raw = sorted(k for k, v in plan.paths.items() if v == "raw")
        _say(f"pull through the rules: {pull_s:.1f} s, {rep.requests} requests, "
             f"{rep.bytes_received / 1e6:,.2f} MB received, store {tot['series']:,} series / "
             f"{tot['samples']:,} samples; raw path for {raw}; notes {plan.notes}")
        v = verdicts(st)
    return server, {"db": db, "pull_s": pull_s, "bytes": rep.bytes_received, "totals": tot, "verdicts": v,
                    "backfill_s": backfill_s}


def _compare_rules(rules: dict, load_s: float, raw_bytes: int, file_db: Path, file_mb: float, ftot: dict,
                   args: argparse.Namespace) -> None:
    """The pull through the rules against the file load: cost and verdicts."""
    with Store(file_db, read_only=True) as st:
        t = time.perf_counter()
        v_file = verdicts(st, rules["verdicts"]["slo_ms"])
        verdict_s = time.perf_counter() - t
    rules_mb = rules["db"].stat().st_size / 1e6
    tot = rules["totals"]
    _say(f"rules/file: time {rules['pull_s'] / load_s:.3f}, transferred/raw-file bytes "
         f"{rules['bytes'] / raw_bytes:.4f}, store bytes {rules_mb / file_mb:.3f}, series "
         f"{tot['series'] / ftot['series']:.4f}, samples {tot['samples'] / ftot['samples']:.4f}")
    diff = _differences(v_file, rules["verdicts"])
    v = rules["verdicts"]
    causes = ", ".join(f"{c} {sum(e[4] == c for e in v['events'])}" for c in sorted({e[4] for e in v["events"]}))
    _say(f"verdicts at SLO {v['slo_ms']:.1f} ms (files {verdict_s:.1f} s to compute): {len(v['events'])} events "
         f"({causes or 'none'}), backtest within={v['backtest'].get('within')}, "
         f"KPIs {len(v['kpis'])}: " + ("IDENTICAL to the file load" if not diff else "DIFFER: " + "; ".join(diff[:8])))
    steps = args.days * 86400 // 60
    pools = 1
    per_pool_step_s = rules["pull_s"] / (steps * pools)
    per_pool_step_b = rules["bytes"] / (steps * pools)
    big = 90 * 86400 // 60
    _say(f"cost per pool-step through the rules: {per_pool_step_s * 1e3:.3f} ms, {per_pool_step_b:,.0f} bytes; "
         f"10,000 GPUs x 90 days (1-minute steps, the same signals per pool, time and bytes per pool-step as "
         f"here): {per_pool_step_s * big * pools:,.0f} s, {per_pool_step_b * big * pools / 1e6:,.0f} MB per pool")
    if rules["backfill_s"] > 0:
        # The engine's side: one evaluation of the whole group per step, its cost linear in GPUs
        # (bench/rules_cost.py); the backfill's wall time spread over its promtool processes.
        eval_s = rules["backfill_s"] * args.jobs / steps
        per_kgpu_s = eval_s / (args.gpus / 1000)
        _say(f"engine: {eval_s * 1e3:,.0f} ms an evaluation ({rules['backfill_s']:,.0f} s wall, {args.jobs} promtool "
             f"at a time), {per_kgpu_s * 1e3:,.0f} ms per 1,000 GPUs; 10,000 GPUs recorded live: "
             f"{per_kgpu_s * 10:,.2f} s a minute ({per_kgpu_s * 10 / 60:.1%} of a core); 90 days' history "
             f"backfilled: {per_kgpu_s * 10 * big / 3600:,.0f} core-hours")


def _stream_fleet(tool: str, om_dir: Path, work: Path, args: argparse.Namespace) -> dict:
    """Write the fleet a 2-hour file at a time; backfill each into ``work/data`` and load it into
    ``work/files.duckdb`` (timed: the peer's load), then delete it."""
    shutil.rmtree(om_dir, ignore_errors=True)
    shutil.rmtree(work / "data", ignore_errors=True)
    file_db = work / "files.duckdb"
    _remove_db(file_db)
    got: dict = {"results": [], "load_s": 0.0, "raw_bytes": 0, "backfill_s": 0.0}
    with Store(file_db) as st:
        def each(path: Path) -> None:
            got["raw_bytes"] += path.stat().st_size
            t = time.perf_counter()
            prom_server.backfill_windows(tool, [path], work / "data", jobs=1)
            got["backfill_s"] += time.perf_counter() - t
            t = time.perf_counter()
            got["results"].extend(ingest_path(st, path))
            got["load_s"] += time.perf_counter() - t
            path.unlink()

        t = time.perf_counter()
        got["paths"], got["samples"] = write_fleet(om_dir, args.gpus, args.days, args.scrape_s, on_window=each)
    _say(f"fleet streamed: {time.perf_counter() - t:.1f} s in all; promtool backfill {got['backfill_s']:.1f} s, "
         f"file load {got['load_s']:.1f} s (each file deleted after both)")
    # What a later --reuse needs of this phase: the files are gone, their load stays measured.
    summary = {"gpus": args.gpus, "days": args.days, "scrape_s": args.scrape_s, "files": len(got["paths"]),
               "samples": got["samples"], "raw_bytes": got["raw_bytes"], "load_s": got["load_s"],
               "backfill_s": got["backfill_s"],
               "not_loaded": [str(r) for r in got["results"] if r.status != "loaded"]}
    (work / STREAM_SUMMARY).write_text(json.dumps(summary, indent=1))
    return {**summary, "paths": got["paths"]}


def _streamed_before(work: Path, args: argparse.Namespace) -> dict | None:
    """The summary an earlier ``--stream`` run of the same size left in ``work``, else None."""
    try:
        got = json.loads((work / STREAM_SUMMARY).read_text())
    except (OSError, ValueError):
        return None
    same = (got.get("gpus"), got.get("days"), got.get("scrape_s")) == (args.gpus, args.days, args.scrape_s)
    return got if same and (work / "data").is_dir() and (work / "files.duckdb").exists() else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=1000)
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--scrape-s", type=int, default=60)
    ap.add_argument("--jobs", type=int, default=2, help="promtool processes at a time")
    ap.add_argument("--max-points", type=int, default=11_000,
                    help="points per series per range request (the server allows 11,000); the pull also "
                         "keeps series x points under ClientConfig.max_samples, so a week of per-GPU "
                         "series comes in shorter requests")
    ap.add_argument("--skip-fleet", action="store_true",
                    help="skip the compact fleet catalogue's pull (20 minutes at 1,000 x 7)")
    ap.add_argument("--prom-memlimit", default="4GiB", help="GOMEMLIMIT for Prometheus (Go's soft heap limit)")
    ap.add_argument("--workdir", default=None, help="kept afterwards when given (default: a temp dir, removed)")
    ap.add_argument("--no-rules", dest="rules", action="store_false",
                    help="skip the recording rules' backfill and the pull through them")
    ap.add_argument("--skip-timeline-pull", action="store_true",
                    help="skip the raw timeline pull (178 s at 1,000 x 7): only the rules and the files")
    ap.add_argument("--reuse", action="store_true",
                    help="reuse the workdir's fleet files and backfilled data from an earlier run (a "
                         "--stream run's: its backfilled data, its file store and the load it measured)")
    ap.add_argument("--stream", action="store_true",
                    help="backfill and load each 2-hour file as it is written, then delete it (the raw files "
                         "never all on disk: 4,000 x 14 is ~80 GB); the file load is still the sum of the files'")
    args = ap.parse_args()
    if args.stream and args.reuse:
        ap.error("--stream deletes the files --reuse would read (--reuse alone picks up a streamed run)")
    bins = prom_server.require_binaries()
    if bins is None:
        print("prometheus/promtool not installed (apt-get install prometheus)")
        return 1
    prom, tool = bins
    work = Path(args.workdir or tempfile.mkdtemp(prefix="tidelens-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    om_dir = work / "fleet"
    n_windows = args.days * 86400 // WINDOW_S
    reuse = args.reuse and len(list(om_dir.glob("*.om"))) == n_windows and (work / "data").is_dir()
    streamed = _streamed_before(work, args) if args.reuse and not reuse else None
    if streamed is not None:
        reuse = True
        om_paths, n_samples, raw_bytes = [], streamed["samples"], streamed["raw_bytes"]
        _say(f"streamed fleet, its backfill and its file store reused from {work}")
    elif reuse:
        om_paths = sorted(om_dir.glob("*.om"))
        n_samples = args.days * 86400 // args.scrape_s * (len(DCGM_METRICS) * args.gpus
                                                          + (len(s.VLLM_TTFT_BUCKETS_S) + 2) * 8 + 2)
        _say(f"fleet and backfill reused from {work}")
    elif args.stream:
        (work / STREAM_SUMMARY).unlink(missing_ok=True)
        streamed = _stream_fleet(tool, om_dir, work, args)
        om_paths, n_samples, raw_bytes = streamed["paths"], streamed["samples"], streamed["raw_bytes"]
    else:
        shutil.rmtree(om_dir, ignore_errors=True)
        t = time.perf_counter()
        om_paths, n_samples = write_fleet(om_dir, args.gpus, args.days, args.scrape_s)
        _say(f"fleet written: {time.perf_counter() - t:.1f} s")
    if streamed is None:
        raw_bytes = sum(f.stat().st_size for f in om_paths)
    _say(f"fleet: {args.gpus} GPUs x {args.days} d at {args.scrape_s} s: {n_samples:,} samples, "
         f"{raw_bytes / 1e6:,.0f} MB OpenMetrics in {streamed['files'] if streamed else len(om_paths)} 2-hour files")
    if not reuse and not args.stream:
        t = time.perf_counter()
        shutil.rmtree(work / "data", ignore_errors=True)
        prom_server.backfill_windows(tool, om_paths, work / "data", jobs=args.jobs)
        _say(f"promtool backfill: {time.perf_counter() - t:.1f} s")
    n_blocks = sum(1 for d in (work / "data").iterdir() if (d / "meta.json").exists())
    _say(f"TSDB: {n_blocks} blocks, "
         f"{sum(f.stat().st_size for f in (work / 'data').rglob('*') if f.is_file()) / 1e6:,.0f} MB")
    os.environ["GOMEMLIMIT"] = args.prom_memlimit  # inherited by Prometheus (Go >= 1.19)
    # Compaction off (as under a Thanos sidecar) so the server doesn't merge 2 h blocks on the
    # shared cores during the pull; a long-running server would query fewer, larger blocks.
    t = time.perf_counter()
    server = prom_server.start(prom, work / "data", scrape_s=args.scrape_s, attempts=3000,
                               extra_args=("--storage.tsdb.min-block-duration=2h",
                                           "--storage.tsdb.max-block-duration=2h"))
    _say(f"prometheus ready: {time.perf_counter() - t:.1f} s")
    end_ms = (T0_S + args.days * 86400 - args.scrape_s) * 1000
    pulled_db = work / "pulled.duckdb"
    _remove_db(pulled_db)
    client_cfg = ClientConfig(timeout_s=600, max_points=args.max_points)
    rep = None
    try:
        if not args.skip_timeline_pull:
            with Store(pulled_db) as st, PromClient(server.url, config=client_cfg) as c:
                t = time.perf_counter()
                rep = pull(st, c, T0_S * 1000, end_ms, step_ms=60_000, max_series=1_000_000,
                           progress=_progress("timeline pull", 5))
                pull_s = time.perf_counter() - t
                tot = st.totals()
                _say(f"pull (timeline catalogue): {pull_s:.1f} s, {rep.requests} requests, "
                     f"{rep.bytes_received / 1e6:,.1f} MB received, {rep.series_returned:,} series-chunks, "
                     f"store {tot['series']:,} series / {tot['samples']:,} samples")
                ov_pull = overview_s(st)
            pulled_mb = pulled_db.stat().st_size / 1e6
            _say(f"pulled store {pulled_mb:,.1f} MB; Overview data {ov_pull:.2f} s")
        if not args.skip_fleet:
            with Store(":memory:") as st, PromClient(server.url, config=client_cfg) as c:
                t = time.perf_counter()
                frep = pull(st, c, T0_S * 1000, end_ms, step_ms=60_000, max_series=1_000_000,
                            queries=fleet_queries(60_000), progress=_progress("fleet pull", 5))
                fleet_s = time.perf_counter() - t
                ftot_fleet = st.totals()
            _say(f"pull (fleet catalogue, tidelens:* counts): {fleet_s:.1f} s, {frep.requests} requests, "
                 f"{frep.bytes_received / 1e6:,.1f} MB received, store {ftot_fleet['series']:,} series / "
                 f"{ftot_fleet['samples']:,} samples")
        _say(f"prometheus peak RSS {_peak_rss_mb(server.process.pid):,.0f} MB")
        if args.rules:
            server, rules = _through_rules(prom, tool, server, work, end_ms, client_cfg, reuse, args.jobs)
    finally:
        server.stop()
    # The peer: the same raw export loaded from its files, one after another (the load is the sum).
    file_db = work / "files.duckdb"
    if streamed is not None:  # loaded while the files were written
        failed, n_files, load_s = streamed["not_loaded"], streamed["files"], streamed["load_s"]
    else:
        _remove_db(file_db)
    with Store(file_db) as st:
        if streamed is None:
            t = time.perf_counter()
            results = ingest_path(st, om_dir)
            load_s = time.perf_counter() - t
            failed, n_files = [r for r in results if r.status != "loaded"], len(results)
        if failed:
            raise RuntimeError(f"file load: {len(failed)} of {n_files} files not loaded: {failed[0]}")
        ftot = st.totals()
        _say(f"files (peer): load {load_s:.1f} s ({n_files} files), store {ftot['series']:,} series / "
             f"{ftot['samples']:,} samples")
        ov_file = overview_s(st)
    file_mb = file_db.stat().st_size / 1e6
    _say(f"file store {file_mb:,.1f} MB; Overview data {ov_file:.2f} s")
    if rep is not None:
        _say(f"ratios pull/file: time {pull_s / load_s:.2f}, store bytes {pulled_mb / file_mb:.2f}, series "
             f"{tot['series'] / ftot['series']:.2f}, samples {tot['samples'] / ftot['samples']:.2f}, "
             f"transferred/raw-file bytes {rep.bytes_received / raw_bytes:.3f}, Overview {ov_pull / ov_file:.2f}")
    if args.rules:
        _compare_rules(rules, load_s, raw_bytes, file_db, file_mb, ftot, args)
    own_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    _say(f"this process peak RSS {own_mb:,.0f} MB, children (promtool, prometheus) peak {children_mb:,.0f} MB")
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
