"""Which recognised signals a store holds, and what each missing one costs the analyses."""

from __future__ import annotations

import polars as pl

from analytics.signals import SIGNALS
from analytics.sql import requests as rq
from analytics.sql import rhythm as rhq
from analytics.sql import timeline as q
from analytics.store import Store

_SUFFIXES = ("_bucket", "_count", "_sum")


def signal_report(store: Store) -> pl.DataFrame:
    """One row per signal of :data:`analytics.signals.SIGNALS`.

    Returns
    -------
    polars.DataFrame
        ``signal, found (bool), metrics_found (comma-separated), needed_for, cost_if_missing``
        (null for a signal that was found: it costs nothing; the page and the CLI show this frame).
    """
    present = set(store.query(q.SIGNAL_METRICS)["metric"].to_list())
    bases = present | {m[: -len(s)] for m in present for s in _SUFFIXES if m.endswith(s)}
    # a per-request log gives both traffic and latency; a rate gauge (request_rate, rps ...) traffic
    logged = ""
    if store.has_requests():
        n = int(store.query(rq.REQUEST_SERVICE_COUNT)["services"][0])
        if n:
            logged = f"request log ({n} service{'s' if n != 1 else ''})"
    rates = set(store.query(rhq.RATE_METRICS)["metric"].to_list())
    rows = []
    for sig in SIGNALS:
        found = [m for m in (*sig.metrics, *sig.aliases) if m in bases]
        if sig.name in ("request_latency", "request_rate") and logged:
            found.append(logged)
        if sig.name == "request_rate":
            found += sorted(rates - set(found))
        rows.append({"signal": sig.name, "found": bool(found), "metrics_found": ", ".join(found),
                     "needed_for": sig.needed_for, "cost_if_missing": None if found else sig.cost_if_missing})
    return pl.DataFrame(rows, schema={"signal": pl.Utf8, "found": pl.Boolean, "metrics_found": pl.Utf8,
                                      "needed_for": pl.Utf8, "cost_if_missing": pl.Utf8})
