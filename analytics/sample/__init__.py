"""The seeded pool simulator that writes Tidelens' sample data.

Mechanics, not painted curves: traffic with a daily and weekly rhythm and surges
(:mod:`.traffic`), an autoscaler that needs a free GPU and minutes of warm-up (:mod:`.autoscaler`,
:mod:`.pool`), batch jobs admitted onto free GPUs (:mod:`.batch`), request latency drawn from
each service's queue (:mod:`.latency`), the series a real cluster exports (:mod:`.series`), their
writers (:mod:`.export`), and the counterfactual truth of every tail event (:mod:`.truth`).

The default run exports one "ideal" cluster; ``simulate(..., variants=(...))`` exports the same
story as other real clusters do (HPA naming, missing exporters, relabelled scrapes, 15 s scrapes,
tensor-parallel replicas, a UTC+8 day...): :mod:`.variants`, ``docs/variants.md``.

>>> from analytics.sample import SCENARIOS
>>> sorted(SCENARIOS)
['compound', 'mixed', 'morning', 'partitioned', 'real-traffic']
"""

from __future__ import annotations

import importlib
import os
import time
from pathlib import Path
from typing import Any

from analytics.sample.scenarios import SCENARIOS
from analytics.sample.version import SAMPLE_VERSION, STORE_LAYOUT

__all__ = ["SCENARIOS", "FORMATS", "SAMPLE_VERSION", "SimResult", "simulate", "write_exports", "load_into",
           "truth", "truth_p99", "ensure_default_store", "default_store_path", "DEFAULT_CACHE_DIR", "VARIANTS", "parse_variants"]

DEFAULT_CACHE_DIR = Path(__file__).resolve().parents[2] / "data" / "cache"

# The simulator and its writers import scipy (about 0.7 s): loaded on first use, so that
# finding the bundled sample's file (the app's first run) does not pay for them.
_LAZY = {"FORMATS": "export", "load_into": "export", "truth_p99": "export",
         "write_exports": "export", "SimResult": "sim", "simulate": "sim",
         "VARIANTS": "variants", "parse_variants": "variants"}

# ``truth`` is both a submodule and the writers' function this package exports. The import
# system binds a submodule to its package's name when it first loads it: load it now (it is
# light), so that the function below is what ``analytics.sample.truth`` stays.
importlib.import_module("analytics.sample.truth")


def truth(result: Any) -> dict[str, Any]:
    """What ``truth.json`` holds: :func:`analytics.sample.export.truth`."""
    from analytics.sample.export import truth as write_truth  # the simulator loads on first use

    return write_truth(result)


def __getattr__(name: str) -> Any:
    """The simulator's names, imported from their module on first use (PEP 562)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"analytics.sample.{_LAZY[name]}"), name)


def default_store_path() -> Path:
    """Where :func:`ensure_default_store` keeps the default sample (it may not be built yet)."""
    return DEFAULT_CACHE_DIR / f"sample-v{SAMPLE_VERSION}.{STORE_LAYOUT}-morning-21d-64gpus-seed7.duckdb"


def ensure_default_store(path: Path | None = None) -> Path:
    """The DuckDB file of the default sample (``morning``, 21 days, 64 GPUs, seed 7).

    Built on first call and cached (by default under ``data/cache/``, keyed by
    :data:`SAMPLE_VERSION`); later calls return the cached file at once. The file appears
    atomically: it is built under a temporary name and renamed.
    """
    target = Path(path) if path else default_store_path()
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{int(time.time() * 1000)}.tmp")
    # The simulator (numpy draws, scipy) loads only when the sample is built: the app's first
    # run asks for the cached file's name, nothing more.
    from analytics.sample.export import load_into
    from analytics.sample.sim import simulate
    from analytics.store import Store

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
