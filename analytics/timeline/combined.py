"""All three timelines from one pass: what the app, the events analysis and calibration read.

:func:`holdings` and :func:`pool_timeline` each read the device samples; calling both costs
that pass twice. :func:`timelines` reads it once, classifies the pods once and resolves the
services once, and returns frames equal to the three separate calls. The service timeline is
built on a second DuckDB connection to the same database, in a thread, while the device pass
runs: DuckDB, polars and numpy release the GIL, so the single-threaded parts of one overlap the
other (the app's sample, 28M samples on 2 cores: about a fifth less wall time).
"""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

import polars as pl

from analytics.resultcache import Scope, peek, remembered
from analytics.sql.requests import HAS_REQUESTS_TABLE
from analytics.store import Store
from analytics.text import html_card
from analytics.timeline.config import TimelineConfig
from analytics.times import iso_utc
from analytics.timeline.counters import step_range
from analytics.timeline.facts import TimelineFacts, gather_facts
from analytics.timeline.pool import device_pass, empty_holdings, empty_pool, pool_frame
from analytics.timeline.service import SERVICE_SCHEMA, autoscaler_by_pool, service_frame, service_series
from analytics.workloads import WorkloadMap, classify_pods

T = TypeVar("T")


@dataclass(frozen=True)
class TimelinesOrigin:
    """What built one :class:`Timelines`: the store's content (:class:`analytics.resultcache.Scope`),
    the step, the range as asked (milliseconds, ``None`` open) and the workload map. A result
    computed from the timelines is cached under it (:meth:`Timelines.remembered`)."""

    scope: Scope
    step_s: int
    start_ms: int | None
    end_ms: int | None
    map_digest: str

    def peek(self, kind: str, settings: Any) -> Any:
        """What :meth:`Timelines.remembered` keeps for ``kind`` and ``settings`` of these timelines,
        or ``None``: a warm command's answer without reading the timelines themselves."""
        return peek(self.scope, kind, (self, settings))


@dataclass(frozen=True)
class Timelines:
    """The pool timeline, the holdings behind it and the service timeline, at one step and range,
    with what the pass learned of the store beside them (:class:`TimelineFacts`), and what built
    them (``origin``; ``None`` for frames no store file identifies, which are never cached)."""

    pool: pl.DataFrame
    holdings: pl.DataFrame
    services: pl.DataFrame
    facts: TimelineFacts = TimelineFacts()
    origin: TimelinesOrigin | None = None

    def remembered(self, kind: str, settings: Any, build: Callable[[], T]) -> T:
        """``build()`` computed once per these timelines' origin and ``settings`` in the one result
        cache (:func:`analytics.resultcache.remembered`); computed every time without an origin."""
        if self.origin is None:
            return build()
        return remembered(self.origin.scope, kind, (self.origin, settings), build)

    def _repr_html_(self) -> str:
        """The timelines as a notebook cell shows them: the range, the services, each frame's size."""
        ts = self.pool["ts"].dt.epoch("ms") if "ts" in self.pool.columns and self.pool.height else None
        span = (f"{iso_utc(int(ts.min()))} to {iso_utc(int(ts.max()))} ({self.pool.height:,} pool steps)"
                if ts is not None else "no steps in this range")
        names = self.service_names()
        return html_card("Timelines", [span, f"services: {', '.join(names) if names else 'none'}"],
                         ["frame", "rows", "columns"],
                         [[name, f"{frame.height:,}", ", ".join(frame.columns)]
                          for name, frame in (("pool", self.pool), ("holdings", self.holdings),
                                              ("services", self.services))])

    def service_names(self) -> list[str]:
        """The services of the service timeline, sorted."""
        return sorted(self.services["service"].drop_nulls().unique().to_list())

    def estimated_bytes(self) -> int:
        """The frames' memory (what a cache of timelines budgets)."""
        return sum(f.estimated_size() for f in (self.pool, self.holdings, self.services))

    def digest(self) -> str:
        """A digest of the three frames' content and the GPU models (equal timelines, equal
        digests, within one process: polars' row hash is not promised across versions): what a
        cache of a result computed from the timelines is keyed on, whoever built them (the
        app's cache or :func:`analytics.timeline.store_timelines`). About 30 ms for three weeks.

        Floats count to 9 significant digits: two builds of one store differ in the last bits of
        a sum (DuckDB adds in parallel, in no fixed order), which is not a different store."""
        h = hashlib.sha1(repr(self.facts.gpu_models).encode())
        for frame in (self.pool, self.holdings, self.services):
            h.update(repr(frame.schema).encode())
            rounded = frame.with_columns(pl.col(pl.Float64).round_sig_figs(9))
            h.update(rounded.hash_rows(seed=0).to_numpy().tobytes())
        return h.hexdigest()



def timelines(store: Store, cfg: TimelineConfig = TimelineConfig(), wmap: WorkloadMap | None = None,
              *, with_teams: bool = False) -> Timelines:
    """:func:`pool_timeline`, :func:`holdings` and :func:`service_timeline` in one go.

    Parameters
    ----------
    store, cfg, wmap:
        As for the separate functions (the default map when ``wmap`` is ``None``).
    with_teams:
        As for :func:`analytics.timeline.pool_timeline`.

    Returns
    -------
    Timelines
        Frames equal to ``pool_timeline(store, cfg, wmap, with_teams=...)``,
        ``holdings(store, cfg, wmap)`` and ``service_timeline(store, cfg, wmap)``.
    """
    wmap = wmap or WorkloadMap()
    rng = step_range(store, cfg)
    if rng is None:
        return Timelines(empty_pool(), empty_holdings(), pl.DataFrame(schema=SERVICE_SCHEMA),
                         gather_facts(store, wmap, service_series(store, wmap)))
    step_ms, lo_ms, hi_ms = rng
    params = {"step_ms": step_ms, "lo_ms": lo_ms, "hi_ms": hi_ms}
    classified = classify_pods(store, wmap)
    svc = service_series(store, wmap, classified)
    with _Cursor(store) as other, ThreadPoolExecutor(max_workers=1) as pool_of_one:
        services = pool_of_one.submit(service_frame, other, rng, svc)  # type: ignore[arg-type]
        passed = device_pass(store, params, wmap, classified)
        if passed is None:
            pool, hold = empty_pool(), empty_holdings()
        else:
            pods, hold, stats = passed
            pool = pool_frame(store, params, pods, hold, wmap, with_teams=with_teams,
                              autoscaler=autoscaler_by_pool(store, params, wmap, svc), stats=stats)
        facts = gather_facts(store, wmap, svc)
        return Timelines(pool, hold, services.result(), facts)


class _Cursor:
    """What the service timeline uses of a :class:`Store` (``con``, ``query``), on its own
    connection to the same database: its temp tables are its own, so it can run beside the
    device pass."""

    def __init__(self, store: Store) -> None:
        self.path = store.path
        self.con = store.con.cursor()

    def query(self, sql: str, params: dict[str, Any] | None = None) -> pl.DataFrame:
        return self.con.sql(sql, params=params or None).pl()

    def has_requests(self) -> bool:
        return bool(self.con.execute(HAS_REQUESTS_TABLE).fetchall()[0][0])

    def __enter__(self) -> "_Cursor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.con.close()
