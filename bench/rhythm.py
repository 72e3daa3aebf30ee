"""Benchmark: rhythm decomposition against statsmodels' MSTL run directly, in one run (by hand).

    .venv/bin/python bench/rhythm.py [--peer-days 15] [--peer-timeout 900] [--skip-page]

Series: 28 days of synthetic traffic (daily cosine, weekend dip, noise) at 1-min and 5-min.
Contenders, each the median CPU time of 3 in-process runs unless said otherwise (CPU time, so a
busy shared machine does not skew the ratios):

- ``decompose`` (Tidelens): averages into 10-min (or 5-min) bins, MSTL with jump parameters,
  components interpolated back to the input steps, norm band;
- statsmodels ``MSTL(periods=(288, 2016))`` with defaults on the 5-min series (one run);
- statsmodels ``MSTL(periods=(1440, 10080))`` with defaults on the raw 1-min series: ~10 min on
  28 days, so it runs once on ``--peer-days`` days (15 is the least that keeps the weekly
  period) in a child process under ``--peer-timeout`` seconds, and is extrapolated linearly in
  the number of steps to 28 days (STL's cost is linear in length at a fixed period); the table
  says so.

It also times the Rhythm page's first render (cold caches) under Streamlit's AppTest on a store
holding the 28-day 1-minute series; the target is < 2 s.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analytics.rhythm import RhythmConfig, decompose  # noqa: E402

T0_MS = 1_700_438_400_000  # a Monday 00:00 UTC


def synth(days: int, step_s: int, seed: int = 0) -> pl.DataFrame:
    n = days * 86400 // step_s
    t = np.arange(1, n + 1) * step_s
    hour = ((t - step_s / 2) % 86400) / 3600
    dow = ((t - 1) // 86400) % 7
    rng = np.random.default_rng(seed)
    y = 100 + 40 * np.cos(2 * np.pi * (hour - 14) / 24) + np.where(dow >= 5, -15.0, 0.0) + rng.normal(0, 5, n)
    return pl.DataFrame({"ts": pl.Series(T0_MS + t * 1000).cast(pl.Datetime("ms", "UTC")), "rps": y})


def timed(fn, repeat: int = 3) -> tuple[float, object]:
    """Median CPU seconds of ``fn`` (CPU, not wall: a shared machine's load would skew wall time;
    everything here is single-threaded, so on an idle machine the two agree)."""
    times, out = [], None
    for _ in range(repeat):
        t = time.process_time()
        out = fn()
        times.append(time.process_time() - t)
    return statistics.median(times), out


def _mstl_default(y: np.ndarray, periods: tuple[int, ...]) -> np.ndarray:
    from statsmodels.tsa.seasonal import MSTL

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = MSTL(y, periods=periods).fit()
    return np.asarray(res.trend) + np.asarray(res.seasonal).sum(axis=1)


def _child(y: np.ndarray, periods: tuple[int, ...], q: mp.Queue) -> None:
    t = time.process_time()
    _mstl_default(y, periods)
    q.put(time.process_time() - t)


def peer_with_timeout(y: np.ndarray, periods: tuple[int, ...], timeout_s: float) -> tuple[float, bool]:
    """CPU seconds of the peer in a child process, and whether it finished within ``timeout_s``
    wall seconds (if not, the CPU seconds it had used when stopped: a lower bound)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    q: mp.Queue = mp.Queue()
    p = mp.Process(target=_child, args=(y, periods, q))
    p.start()
    p.join(timeout_s)
    if p.is_alive():
        p.terminate()
        p.join()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), False
    return q.get(), True


def page_first_render_s(frame: pl.DataFrame) -> float:
    from streamlit.testing.v1 import AppTest

    from analytics.store import Sink, Store, content_hash

    tmp = Path(tempfile.mkdtemp(prefix="tidelens-bench-rhythm-"))
    db = tmp / "rhythm.duckdb"

    def parse(sink: Sink) -> None:
        sink.add_series(pl.DataFrame({"skey": [1], "metric": ["request_rate"], "labels": ['{"service":"chat"}']}))
        sink.add_samples(frame.select(pl.lit(1).alias("skey"), pl.col("ts").dt.epoch("ms").alias("ts_ms"),
                                      pl.col("rps").alias("value")))

    with Store(db) as st:
        st.load("bench.csv", "csv-long", content_hash(b"bench-rhythm"), parse)
    import os

    os.environ["TIDELENS_UPLOADS_DB"] = str(tmp / "uploads.duckdb")
    os.environ["TIDELENS_CONFIG"] = str(tmp / "tidelens.toml")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params.update({"source": "duckdb", "db": str(db)})
    at.run()
    t = time.process_time()
    at.switch_page("pages/rhythm.py").run()
    elapsed = time.process_time() - t
    assert not at.exception, [e.value for e in at.exception]
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peer-days", type=int, default=15)
    ap.add_argument("--peer-timeout", type=float, default=900.0)
    ap.add_argument("--skip-peer-1min", action="store_true")
    ap.add_argument("--skip-page", action="store_true")
    args = ap.parse_args()

    one = synth(28, 60)
    five = synth(28, 300)
    rows: list[tuple[str, float, str]] = []

    t_1m_600, dec_1m = timed(lambda: decompose(one, "rps", RhythmConfig(resolution_s=600)))
    rows.append(("decompose 28 d @1-min input, 10-min decomposition", t_1m_600, "measured"))
    t_1m_300, _ = timed(lambda: decompose(one, "rps", RhythmConfig(resolution_s=300)))
    rows.append(("decompose 28 d @1-min input, 5-min decomposition", t_1m_300, "measured"))
    t_5m, dec_5m = timed(lambda: decompose(five, "rps", RhythmConfig(resolution_s=300)))
    rows.append(("decompose 28 d @5-min", t_5m, "measured"))

    y5 = five["rps"].to_numpy()
    t = time.process_time()
    peer5 = _mstl_default(y5, (288, 2016))
    t_peer5 = time.process_time() - t
    rows.append(("statsmodels MSTL defaults 28 d @5-min", t_peer5, "measured, 1 run"))
    spread = float(np.percentile(y5, 99) - np.percentile(y5, 1))
    diff5 = float(np.max(np.abs(dec_5m.frame["expected"].to_numpy() - peer5)))  # type: ignore[union-attr]

    t_peer1 = None
    if not args.skip_peer_1min:
        y1 = synth(args.peer_days, 60)["rps"].to_numpy()
        got, finished = peer_with_timeout(y1, (1440, 10080), args.peer_timeout)
        if not finished:
            rows.append((f"statsmodels MSTL defaults @1-min ({args.peer_days} d)", got,
                         f"STOPPED at {args.peer_timeout:.0f} s wall: CPU so far, a lower bound"))
            t_peer1 = got * 28 / args.peer_days
            rows.append(("  extrapolated to 28 d (lower bound)", t_peer1, "extrapolated"))
        else:
            rows.append((f"statsmodels MSTL defaults @1-min ({args.peer_days} d)", got, "measured, 1 run"))
            t_peer1 = got * 28 / args.peer_days
            rows.append(("  extrapolated to 28 d (x 28/%d, linear in steps)" % args.peer_days, t_peer1,
                         "extrapolated"))

    print(f"{'contender':<62} {'CPU s':>10}  note")
    for name, secs, note in rows:
        print(f"{name:<62} {secs:>10.3f}  {note}")
    print()
    print(f"MSTL defaults @5-min / decompose @5-min:          {t_peer5 / t_5m:8.1f}x")
    if t_peer1 is not None:
        print(f"MSTL defaults @1-min (28 d) / decompose @1-min:   {t_peer1 / t_1m_600:8.1f}x"
              " (peer extrapolated)")
    print(f"max |expected - MSTL defaults| @5-min: {diff5:.3f} = {diff5 / spread:.2%} of the series' "
          f"1-99% spread")
    print(f"decompose 28 d @1-min under 1 s: {'yes' if t_1m_600 < 1.0 else 'NO'} ({t_1m_600:.3f} s)")
    if not args.skip_page:
        first = page_first_render_s(one)
        print(f"Rhythm page first render (28 d @1-min store, cold cache): {first:.2f} CPU s "
              f"({'< 2 s' if first < 2 else 'OVER 2 s'})")


if __name__ == "__main__":
    main()
