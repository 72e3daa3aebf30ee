"""The seeded pool simulator that writes Tidelens' sample data.

Mechanics, not painted curves: traffic with a daily and weekly rhythm and surges
(:mod:`.traffic`), an autoscaler that needs a free GPU and minutes of warm-up (:mod:`.autoscaler`,
:mod:`.pool`), batch jobs admitted onto free GPUs (:mod:`.batch`), request latency drawn from
each service's queue (:mod:`.latency`), the series a real cluster exports (:mod:`.series`), their
writers (:mod:`.export`), and the counterfactual truth of every tail event (:mod:`.truth`).

>>> from analytics.sample import SCENARIOS
>>> sorted(SCENARIOS)
['mixed', 'morning', 'partitioned', 'real-traffic']
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from analytics.sample.export import FORMATS, load_into, truth, truth_p99, write_exports
from analytics.sample.scenarios import SCENARIOS
from analytics.sample.sim import SAMPLE_VERSION, SimResult, simulate
from analytics.store import Store

__all__ = ["SCENARIOS", "FORMATS", "SAMPLE_VERSION", "SimResult", "simulate", "write_exports", "load_into",
           "truth", "truth_p99", "ensure_default_store", "DEFAULT_CACHE_DIR"]

DEFAULT_CACHE_DIR = Path(__file__).resolve().parents[2] / "data" / "cache"


def ensure_default_store(path: Path | None = None) -> Path:
    """The DuckDB file of the default sample (``morning``, 21 days, 64 GPUs, seed 7).

    Built on first call and cached (by default under ``data/cache/``, keyed by
    :data:`SAMPLE_VERSION`); later calls return the cached file at once. The file appears
    atomically: it is built under a temporary name and renamed.
    """
    target = Path(path) if path else DEFAULT_CACHE_DIR / f"sample-v{SAMPLE_VERSION}-morning-21d-64gpus-seed7.duckdb"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{int(time.time() * 1000)}.tmp")
    try:
        result = simulate("morning", days=21, gpus=64, seed=7)
        with Store(tmp) as st:
            load_into(st, result)
            st.con.execute("CHECKPOINT")
        os.replace(tmp, target)
        if path is None:  # caches of older simulator versions are stale: drop them
            for old in DEFAULT_CACHE_DIR.glob("sample-v*-morning-21d-64gpus-seed7.duckdb"):
                if old != target:
                    old.unlink(missing_ok=True)
    finally:
        for p in (tmp, tmp.with_name(tmp.name + ".wal")):
            if p.exists():
                p.unlink()
    return target
