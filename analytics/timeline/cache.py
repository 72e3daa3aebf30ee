"""The one owner of built timelines outside the app: a small in-process cache of :func:`timelines`.

The CLI's ``events``, ``review`` and ``whatif`` commands, the capacity review, the backtest, a
notebook or a test asking twice about the same store pay for the timelines (and the store facts
read with them) once. The key is the file, its loaded sources (ids, content hashes, counts, load
times), the step, the range and the workload map: loading anything new changes the sources and so
the key; ``:memory:`` stores are never cached (no file identifies them). The app keeps its own
copies across sessions and restarts (``pages/_caches.py``) but builds them with the same call.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import polars as pl

from analytics.timeline.combined import Timelines, timelines
from analytics.timeline.config import TimelineConfig

if TYPE_CHECKING:
    from analytics.store import Store
    from analytics.workloads import WorkloadMap

CACHE_SIZE = 4
_cache: "OrderedDict[tuple[Any, ...], Timelines]" = OrderedDict()
_lock = threading.Lock()


def cache_key(store: "Store", cfg: TimelineConfig, wmap: "WorkloadMap | None") -> tuple[Any, ...] | None:
    """What identifies one store's timelines (``None`` for an in-memory store)."""
    if store.path == ":memory:":
        return None
    src = store.sources()
    sources = tuple(src.select("id", "content_hash", "status", "samples", pl.col("loaded_at").cast(pl.Utf8)).rows())
    return (os.path.realpath(store.path), sources, cfg.step_s, cfg.start_ms, cfg.end_ms, repr(wmap))


def store_timelines(store: "Store", cfg: TimelineConfig = TimelineConfig(),
                    wmap: "WorkloadMap | None" = None) -> Timelines:
    """The :class:`Timelines` of ``store`` at ``cfg``'s step and range, built once per store
    file, its sources, the range and the map (:func:`timelines`); the frames are shared, never
    to be changed in place (polars frames are not)."""
    key = cache_key(store, cfg, wmap)
    with _lock:
        if key is not None and key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    out = timelines(store, cfg, wmap)
    if key is not None:
        with _lock:
            _cache[key] = out
            while len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)
    return out
