"""Which recognised signals a store holds, what each missing one costs the analyses, and GPU keys
that many pods share at once (a pod-level table loaded without saying what a GPU is)."""

from __future__ import annotations

import polars as pl

from analytics.ingest.device import DEVICE_METRICS, FEW_PODS, gpu_key_text
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


def shared_gpu_keys(store: Store) -> pl.DataFrame:
    """GPU keys more than :data:`analytics.ingest.device.FEW_PODS` pods share at one time.

    Returns ``gpu_key, pods_at_once, note``: each such key (a host and index without a UUID, as
    :func:`analytics.ingest.device.gpu_key_text` writes it) counts as one GPU though its pods are
    likely each their own (a table with no UUID, hostname or gpu column); the note says what to do.
    """
    frame = store.query(q.SHARED_GPU_KEYS, {"metrics": list(DEVICE_METRICS), "few": FEW_PODS})
    nothing = pl.col("hostname").is_null() & pl.col("gpu").is_null()
    return frame.select(
        gpu_key_text(pl.col("hostname"), pl.col("gpu")).alias("gpu_key"), pl.col("pods_at_once").cast(pl.Int64),
        pl.format("{} pods at once count as one GPU: no UUID{}; reload the table with a mapping's [device] "
                  "per = \"pod\" (or columns = [...])", pl.col("pods_at_once"),
                  pl.when(nothing).then(pl.lit(", hostname or gpu column"))
                  .otherwise(pl.lit(" column"))).alias("note"))
