"""Benchmark: the timelines for 14 days x 256 GPUs at 1-minute scrape, Tidelens vs plain pandas.

Builds a store (once, cached by size) with dcgm-exporter-like series whose pod labels change
with the holder every few hours (some devices unlabelled, one node time-sliced, one MIG-split),
and two services with histogram buckets on 8 pods each. Then, each in its own process (so peak
memory is its own), builds the timelines with :func:`analytics.timeline.timelines` (pool,
holdings and service timelines from one device pass) and with a straightforward pandas
implementation of the same result (read the long tables out of DuckDB, merge the normalised
label columns onto the samples, bucket, group, apply), checks they agree, and prints wall and
CPU seconds (user + system of the process: the machine is shared, wall time is not its own),
peak RSS and ratios. ``--baseline DIR`` also runs Tidelens from another checkout's
``analytics/`` (e.g. ``git archive HEAD analytics | tar -x -C DIR``) with separate calls, for
a before/after in the same run. (Merging the raw label JSON onto every sample too needs more
than 20 GB at this size and is left out.)

Measured, 14 days x 256 GPUs (21.2M samples), 2 cores shared with other jobs, one run:

=================================  ======  =====  ========
implementation                     wall s  CPU s  peak MiB
=================================  ======  =====  ========
Tidelens before (separate calls)    13.53  24.05      2071
Tidelens (``timelines()``)           4.58   8.24      2243
pandas                              65.00  65.08     13921
=================================  ======  =====  ========

Tidelens now: 3.0x faster (2.9x less CPU, 8% more memory) than before, 14x faster (7.9x less
CPU, 6.2x less memory) than pandas; results agree with both. "Before" is the three calls the
app made then (``pool_timeline``, ``holdings``, ``service_timeline``; this bench used to time
the first and last only: 24.9 s on a busier machine). The gains: one device pass for both pool
timeline and holdings; holders per step read off one packed-key aggregate instead of a
self-join; integer keys instead of label strings in the kube-state-metrics and gauge
aggregations; counter increases in numpy (chunks of series, no window sort);
``histogram_quantile`` in numpy per bucket count, without polars' multi-key sort; the service
timeline on a second connection, in a thread, beside the device pass.

Run by hand::

    .venv/bin/python bench/timeline.py                 # 14 days x 256 GPUs
    .venv/bin/python bench/timeline.py --days 2 --gpus 32 --baseline /tmp/head
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import orjson
import polars as pl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
if os.environ.get("TIDELENS_BENCH_ROOT"):  # --baseline: another checkout's analytics/ first
    sys.path.insert(0, os.environ["TIDELENS_BENCH_ROOT"])

from analytics.store import Store  # noqa: E402

MIN = 60_000
T0 = 1_767_225_600_000  # 2026-01-01T00:00Z
BLOCK_MIN = 360  # a holder keeps a GPU for 6 hours
LES = ["0.005", "0.01", "0.025", "0.05", "0.075", "0.1", "0.15", "0.2", "0.25", "0.35", "0.5", "0.75", "1",
       "2.5", "5", "+Inf"]
PODS_PER_SERVICE = 8


# --- the data ---------------------------------------------------------------------------------
def holder_of(g: int, block: int) -> tuple[str | None, str | None]:
    """Who holds GPU ``g`` in 6-hour block ``block``: (pod, namespace), or (None, None) unlabelled."""
    kind = (g * 7 + block) % 5
    if kind == 0:
        return None, None
    if kind in (1, 2):
        return f"chat-vllm-7d9c8b6f5-{g:03d}{block:03d}", "inference"
    if kind == 3:
        return f"nightly-finetune-{g}-{block}", "ml-training"
    return f"dev-notebook-{g}-{block}", "dev"


class DirectWriter:
    """Collects what a parser writes and inserts it into the store's tables in one go.

    Bypasses :meth:`Store.load`'s staging and merge (what is benchmarked here is reading the
    store, not loading it; one 20M-sample source through the merge takes tens of minutes on a
    busy 2-core machine).
    """

    def __init__(self) -> None:
        self.series: list[pl.DataFrame] = []
        self.samples: list[pl.DataFrame] = []

    def add_series(self, frame: pl.DataFrame) -> None:
        self.series.append(frame)

    def add_samples(self, frame: pl.DataFrame) -> None:
        self.samples.append(frame.select(pl.col("skey").cast(pl.Int64), pl.col("ts_ms").cast(pl.Int64),
                                         pl.col("value").cast(pl.Float64)))

    def finish(self, st: Store) -> None:
        from analytics.labels import NORMALISED_COLUMNS, normalise_labels
        from analytics.signals import canonical_metric
        from analytics.store import series_key
        rows = []
        for skey, metric, labels_json in pl.concat(self.series).iter_rows():
            labels = orjson.loads(labels_json)
            m = canonical_metric(metric)
            rows.append({"skey": skey, "key": series_key(m, labels), "metric": m, **normalise_labels(labels),
                         "labels": orjson.dumps(labels, option=orjson.OPT_SORT_KEYS).decode()})
        frame = pl.DataFrame(rows, schema={"skey": pl.Int64, "key": pl.Utf8, "metric": pl.Utf8,
                                           **{c: pl.Utf8 for c in NORMALISED_COLUMNS}, "labels": pl.Utf8})
        # the same labels announced again (a GPU unlabelled in several blocks) is the same series
        frame = frame.with_columns((pl.col("skey").min().over("key") + 1).alias("id"))
        series_in = frame.unique("key", keep="first", maintain_order=True).drop("skey")
        samples_in = (pl.concat(self.samples).join(frame.select("skey", "id"), on="skey")
                      .select(pl.col("id").alias("series_id"), "ts_ms", "value"))
        st.con.register("bench_series_in", series_in)
        st.con.register("bench_samples_in", samples_in)
        st.con.execute("INSERT INTO series SELECT id, key, metric, gpu, uuid, hostname, model, namespace, pod, "
                       "container, mig_profile, mig_id, labels FROM bench_series_in").fetchall()
        st.con.execute("INSERT INTO samples SELECT * FROM bench_samples_in ORDER BY series_id, ts_ms").fetchall()
        st.con.execute("CHECKPOINT").fetchall()


def build_store(path: Path, days: int, gpus: int) -> None:
    n_min = days * 1440
    rng = np.random.default_rng(1)
    minutes = np.arange(1, n_min + 1, dtype=np.int64)
    ts = T0 + minutes * MIN
    with Store(path) as st:
        def parse(sink):
            skey = 0
            for g in range(gpus):
                host, minor = f"gpu-node-{g // 8:02d}", g % 8
                base = {"gpu": str(minor), "UUID": f"GPU-{g:04d}", "device": f"nvidia{minor}",
                        "modelName": "NVIDIA H100 80GB HBM3", "Hostname": host}
                mig = g == 8  # one MIG-split GPU: 3g + 2g + 1g + 1g
                instances = [("3g.40gb", "1"), ("2g.20gb", "5"), ("1g.10gb", "13"), ("1g.10gb", "14")] if mig \
                    else [(None, None)]
                for prof, gi in instances:
                    lab0 = dict(base, **({"GPU_I_PROFILE": prof, "GPU_I_ID": gi} if prof else {}))
                    util = np.clip(rng.normal(50, 20, n_min), 0, 100)
                    fb = np.clip(rng.normal(40_000, 10_000, n_min), 0, 80_000)
                    for block in range(-(-n_min // BLOCK_MIN)):
                        sl = slice(block * BLOCK_MIN, min(n_min, (block + 1) * BLOCK_MIN))
                        pod, ns = holder_of(g + (int(gi) % 3 if gi else 0), block)
                        holders = [(pod, ns)]
                        if g == 16 and pod:  # one time-sliced GPU: 3 pods share it
                            holders = [(f"{pod}-ts{k}", ns) for k in range(3)]
                        for hp, hns in holders:
                            lab = dict(lab0, **({"pod": hp, "namespace": hns, "container": "main"} if hp else {}))
                            metrics = [("DCGM_FI_PROF_GR_ENGINE_ACTIVE", util / 100), ("DCGM_FI_DEV_FB_USED", fb)]
                            if not prof:
                                metrics.append(("DCGM_FI_DEV_GPU_UTIL", util))
                            for metric, vals in metrics:
                                sink.add_series(pl.DataFrame({"skey": [skey], "metric": [metric],
                                                              "labels": [orjson.dumps(lab).decode()]}))
                                sink.add_samples(pl.DataFrame({"skey": np.full(sl.stop - sl.start, skey),
                                                               "ts_ms": ts[sl], "value": vals[sl]}))
                                skey += 1
            for svc, metric, scale in (("chat-vllm", "vllm:time_to_first_token_seconds", 0.05),
                                       ("recommender", "http_server_request_duration_seconds", 0.02)):
                bounds = np.array([float(x) for x in LES])
                for p in range(PODS_PER_SERVICE):
                    lab = {"pod": f"{svc}-7d9c8b6f5-p{p:04d}", "namespace": "inference", "service": svc}
                    n_req = rng.poisson(300, n_min)
                    # per-minute bucket counts from a lognormal mixture, cumulative over time
                    lat = rng.lognormal(math.log(scale), 0.7, size=(n_min, 64))
                    frac = (lat[:, :, None] <= bounds[None, None, :]).mean(axis=1)
                    cum = np.cumsum(np.round(frac * n_req[:, None]), axis=0)
                    cum[n_min // 2:] -= cum[n_min // 2 - 1]  # a counter reset half way
                    for i, le in enumerate(LES):
                        sink.add_series(pl.DataFrame({"skey": [skey], "metric": [f"{metric}_bucket"],
                                                      "labels": [orjson.dumps({**lab, "le": le}).decode()]}))
                        sink.add_samples(pl.DataFrame({"skey": np.full(n_min, skey), "ts_ms": ts, "value": cum[:, i]}))
                        skey += 1
                    sink.add_series(pl.DataFrame({"skey": [skey], "metric": [f"{metric}_count"],
                                                  "labels": [orjson.dumps(lab).decode()]}))
                    sink.add_samples(pl.DataFrame({"skey": np.full(n_min, skey), "ts_ms": ts, "value": cum[:, -1]}))
                    skey += 1
            return None

        writer = DirectWriter()
        parse(writer)
        writer.finish(st)
        print(f"built {path}: {st.totals()}", file=sys.stderr)


# --- Tidelens -----------------------------------------------------------------------------------
def run_tidelens(db: Path) -> dict:
    from analytics.timeline import TimelineConfig
    cfg = TimelineConfig(step_s=60)
    with Store(db, read_only=True) as st:
        try:
            from analytics.timeline import timelines
        except ImportError:  # a baseline checkout from before timelines(): what the app called then
            from analytics.timeline import holdings, pool_timeline, service_timeline
            pool, svc = pool_timeline(st, cfg), service_timeline(st, cfg)
            holdings(st, cfg)
        else:
            both = timelines(st, cfg)
            pool, svc = both.pool, both.services
    return summary(pool.to_pandas(), svc.to_pandas())


# --- pandas -----------------------------------------------------------------------------------
def run_pandas(db: Path) -> dict:
    """The same result, the way one would write it in pandas: long tables with labels merged in."""
    import pandas as pd
    from analytics.timeline.pool import mig_fraction
    from analytics.workloads import WorkloadMap, classify

    step = MIN
    with Store(db, read_only=True) as st:
        series = st.con.execute("SELECT id AS series_id, metric, uuid, mig_id, mig_profile, model, hostname, "
                                "namespace, pod, labels FROM series").df()
        samples = st.con.execute("SELECT series_id, ts_ms, value FROM samples").df()
    series["frac"] = [mig_fraction(p if isinstance(p, str) else None, m if isinstance(m, str) else None)
                      for p, m in zip(series["mig_profile"], series["model"])]
    # labels stay on the series table (inline on 21M samples they need > 20 GB: DESIGN "Measured facts")
    df = samples.merge(series.drop(columns=["labels"]), on="series_id")
    df["ts_end"] = ((df["ts_ms"] + step - 1) // step) * step

    # pool timeline
    dev = df[df["metric"].isin(["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_FB_USED"])].copy()
    dev["mig_id"] = dev["mig_id"].fillna("")
    dev["inst"] = dev["uuid"] + "/" + dev["mig_id"]
    last = dev.groupby(["inst", "ts_end"])["ts_ms"].transform("max")
    cur = dev[dev["ts_ms"] == last]
    holders = cur.drop_duplicates(["inst", "ts_end", "pod"])[["inst", "ts_end", "pod", "namespace", "frac"]]
    holders["n"] = holders.groupby(["inst", "ts_end"])["pod"].transform("count")
    wmap = WorkloadMap()
    pods = holders[["pod", "namespace"]].drop_duplicates().dropna(subset=["pod"])
    pods["cls"] = [classify(wmap, {"pod": p, "namespace": n}).cls for p, n in zip(pods["pod"], pods["namespace"])]
    holders = holders.merge(pods, on=["pod", "namespace"], how="left")
    holders["cls"] = holders["cls"].fillna("unknown")
    holders["gpus"] = np.where(holders["pod"].isna(), holders["frac"], holders["frac"] / holders["n"].clip(lower=1))
    mig_used = dev.drop_duplicates("inst").groupby("uuid")["frac"].sum()
    leftover = (1 - mig_used[mig_used < 1]).rename("leftover")
    pool = holders.pivot_table(index="ts_end", columns="cls", values="gpus", aggfunc="sum", fill_value=0.0)
    if len(leftover):
        present = dev[dev["uuid"].isin(leftover.index)].drop_duplicates(["uuid", "ts_end"])
        idle = present.merge(leftover, left_on="uuid", right_index=True).groupby("ts_end")["leftover"].sum()
        pool["idle"] = pool.get("idle", 0.0) + idle.reindex(pool.index, fill_value=0.0)
    for c in ("inference", "batch", "other", "unknown", "idle"):
        if c not in pool:
            pool[c] = 0.0
    pool = pool.rename(columns={c: f"gpus_{c}" for c in pool.columns})
    pool["gpus_total"] = pool.sum(axis=1)
    act = cur[cur["metric"] != "DCGM_FI_DEV_FB_USED"].copy()
    act["pct"] = np.where(act["metric"] == "DCGM_FI_PROF_GR_ENGINE_ACTIVE", act["value"] * 100, act["value"])
    act = act.sort_values("metric", ascending=False).drop_duplicates(["inst", "ts_end"])  # PROF before DEV
    act["w"] = act["pct"] * act["frac"]
    a = act.groupby("ts_end")[["w", "frac"]].sum()
    pool["activity_pct"] = a["w"] / a["frac"]
    mem = cur[cur["metric"] == "DCGM_FI_DEV_FB_USED"].drop_duplicates(["inst", "ts_end"])
    pool["mem_used_gib"] = mem.groupby("ts_end")["value"].sum() / 1024
    pool = pool.reset_index()

    # service timeline: increase per series and step, summed per (service, le), histogram_quantile
    h = df[df["metric"].str.endswith("_bucket") | df["metric"].str.endswith("_count")].copy()
    labs = series[series["series_id"].isin(h["series_id"].unique())][["series_id", "labels"]].copy()
    parsed = [json.loads(x) for x in labs["labels"]]
    labs["service"] = [p.get("service") for p in parsed]
    labs["le"] = [float(p["le"]) if "le" in p else np.nan for p in parsed]
    h = h.merge(labs.drop(columns=["labels"]), on="series_id").sort_values(["series_id", "ts_ms"])
    prev = h.groupby("series_id")["value"].shift(1)
    delta = h["value"] - prev
    h["inc"] = np.where(prev.isna(), 0.0, np.where(delta >= 0, delta, h["value"]))
    counts = h[h["metric"].str.endswith("_count")].groupby(["service", "ts_end"])["inc"].sum()
    b = h[h["metric"].str.endswith("_bucket")].groupby(["service", "ts_end", "le"])["inc"].sum().reset_index()

    def quantiles(g):
        g = g.sort_values("le")
        c = np.maximum.accumulate(g["inc"].to_numpy())
        le = g["le"].to_numpy()
        out = {}
        for name, q in (("p50_ms", 0.5), ("p95_ms", 0.95), ("p99_ms", 0.99)):
            if len(le) < 2 or not np.isinf(le[-1]) or c[-1] == 0:
                out[name] = np.nan
                continue
            rank = q * c[-1]
            i = int(np.searchsorted(c, rank, side="left"))
            if i == len(le) - 1:
                out[name] = le[-2] * 1000
                continue
            lo, plo = (0.0, 0.0) if i == 0 else (le[i - 1], c[i - 1])
            out[name] = (lo + (le[i] - lo) * (rank - plo) / (c[i] - plo)) * 1000
        return pd.Series(out)

    svc = b.groupby(["service", "ts_end"]).apply(quantiles, include_groups=False).reset_index()
    svc = svc.merge(counts.rename("n").reset_index(), on=["service", "ts_end"], how="left")
    svc["rps"] = svc["n"] / 60
    return summary(pool.rename(columns={"ts_end": "ts"}), svc.rename(columns={"ts_end": "ts"}))


def summary(pool, svc) -> dict:
    """What both implementations must agree on."""
    return {"pool_rows": int(len(pool)), "gpus_total": float(pool["gpus_total"].sum()),
            **{f"gpus_{c}": round(float(pool[f"gpus_{c}"].sum()), 3)
               for c in ("inference", "batch", "other", "unknown", "idle")},
            "activity_mean": round(float(pool["activity_pct"].mean()), 4),
            "mem_gib_sum": round(float(pool["mem_used_gib"].sum()), 1),
            "svc_rows": int(svc["p99_ms"].notna().sum()), "p99_ms_mean": round(float(svc["p99_ms"].mean()), 4),
            "rps_sum": round(float(svc["rps"].sum()), 3)}


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def child(impl: str, db: Path) -> None:
    t, c = time.perf_counter(), _cpu_s()
    out = run_pandas(db) if impl == "pandas" else run_tidelens(db)
    out["seconds"] = time.perf_counter() - t
    out["cpu_s"] = _cpu_s() - c
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--days", type=int, default=14)
    ap.add_argument("--gpus", type=int, default=256)
    ap.add_argument("--db", default=None, help="store to use (built when missing)")
    ap.add_argument("--baseline", default=None, help="also run Tidelens from this checkout (its analytics/)")
    ap.add_argument("--child", choices=("tidelens", "pandas", "baseline"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    db = Path(args.db or f"/tmp/tidelens-bench-timeline-v2-{args.days}d-{args.gpus}g.duckdb")
    if args.child:
        child(args.child, db)
        return
    if not db.exists():
        t = time.perf_counter()
        build_store(db, args.days, args.gpus)
        print(f"store built in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    results = {}
    impls = ("baseline", "tidelens", "pandas") if args.baseline else ("tidelens", "pandas")
    for impl in impls:
        env = dict(os.environ)
        if impl == "baseline":  # the child puts ROOT first on sys.path; PYTHONSAFEPATH-free override
            env["TIDELENS_BENCH_ROOT"] = str(Path(args.baseline).resolve())
        proc = subprocess.run([sys.executable, __file__, "--child", impl, "--db", str(db)],
                              capture_output=True, text=True, check=False, env=env)
        if proc.returncode:
            print(proc.stderr, file=sys.stderr)
            raise SystemExit(f"{impl} failed")
        results[impl] = json.loads(proc.stdout.strip().splitlines()[-1])
    tl = results["tidelens"]
    print(f"{args.days} days x {args.gpus} GPUs, 1-min step, pool, holdings and service timelines")
    print(f"{'':10s} {'wall s':>9s} {'CPU s':>9s} {'peak MiB':>9s}")
    for impl, r in results.items():
        print(f"{impl:10s} {r['seconds']:9.2f} {r['cpu_s']:9.2f} {r['peak_rss_mib']:9.0f}")
    for peer in [p for p in results if p != "tidelens"]:
        r = results[peer]
        print(f"ratio {peer}/tidelens: wall {r['seconds'] / tl['seconds']:.2f}x, CPU {r['cpu_s'] / tl['cpu_s']:.2f}x, "
              f"peak memory {r['peak_rss_mib'] / tl['peak_rss_mib']:.2f}x")
    meta = ("seconds", "cpu_s", "peak_rss_mib")
    for peer in [p for p in results if p != "tidelens"]:
        other = results[peer]
        diff = {k: (tl[k], other[k]) for k in tl if k not in meta
                and not math.isclose(tl[k], other[k], rel_tol=1e-6, abs_tol=1e-6)}
        print(f"results agree with {peer}" if not diff else f"results DIFFER from {peer}: {diff}")


if __name__ == "__main__":
    main()
