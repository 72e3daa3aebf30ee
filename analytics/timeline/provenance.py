"""Where a service's traffic and latency came from: its request log, its histogram, or its
request-rate gauge (what the Data page's "Request logs" table, Tail events and the CLI say).

The timeline itself is :mod:`analytics.timeline.service`; these read its series and services.
"""

from __future__ import annotations

import polars as pl

from analytics.sql import rhythm as rhq
from analytics.store import Store
from analytics.timeline.service import LOG_TTFT, RATE, request_log_services, service_series
from analytics.times import iso_utc
from analytics.workloads import WorkloadMap

REQUEST_LOG_SCHEMA = {"service": pl.Utf8, "requests": pl.Int64, "errors": pl.Int64, "first_ts": pl.Utf8,
                      "last_ts": pl.Utf8, "latency": pl.Utf8, "histogram": pl.Utf8, "traffic": pl.Utf8,
                      "note": pl.Utf8}


def rate_gauges(series: pl.DataFrame) -> dict[str, str]:
    """Service -> its request-rate gauge(s) in words (``'qps' (3 series summed)``), from
    :func:`service_series` output."""
    rates = series.filter(pl.col("role") == RATE).group_by("service").agg(pl.col("metric").unique().sort(),
                                                                          pl.len().alias("n"))
    return {r["service"]: f"{', '.join(map(repr, r['metric']))} ({r['n']} series summed)"
            for r in rates.iter_rows(named=True)}


def traffic_source_notes(store: Store, wmap: WorkloadMap | None = None,
                         resolved: tuple[pl.DataFrame, pl.DataFrame] | None = None) -> list[str]:
    """One line per service whose traffic is its request-rate gauge, not its log's rows or its
    histogram's count (what Tail events and the CLI say).

    ``resolved``: :func:`service_series` output when the caller has it (the timeline pass)."""

    if store.query(rhq.RATE_METRICS).height == 0:
        return []
    series, services = resolved or service_series(store, wmap or WorkloadMap())
    other = {r["service"]: ", not from counting its request log's rows" if r["log_metric"]
             else f", not from its {r['slo_metric']} count" if r["slo_metric"]
             else "; it has no latency signal (no histogram, no request log), so no p99 and no tail events"
             for r in services.iter_rows(named=True)}
    return [f"{svc}: traffic from its request-rate gauge {what}{other.get(svc, '')}"
            for svc, what in sorted(rate_gauges(series).items())]


def request_log_summary(store: Store, wmap: WorkloadMap | None = None,
                        resolved: tuple[pl.DataFrame, pl.DataFrame] | None = None) -> pl.DataFrame:
    """One row per service of the store's request logs: how many requests and errors, the span,
    which latency its percentiles are (``latency`` / ``time to first token``), the histogram the
    service also has (null if none) and a note saying which wins where (what the Data page shows).

    ``resolved``: :func:`service_series` output when the caller has it (the timeline pass).
    """

    logs = request_log_services(store)
    if logs.height == 0:
        return pl.DataFrame(schema=REQUEST_LOG_SCHEMA)
    series, services = resolved or service_series(store, wmap or WorkloadMap())
    info = {r["service"]: r for r in services.iter_rows(named=True)}
    gauges = rate_gauges(series)
    rows = []
    for r in logs.iter_rows(named=True):
        s = info.get(r["service"], {})
        which = "time to first token" if s.get("log_metric") == LOG_TTFT else "latency"
        hist = s.get("slo_metric")
        gauge = gauges.get(r["service"])
        note = (("" if gauge else "traffic and ") + f"p50/p95/p99 ({which}) from the log on every step from its "
                "first to its last request, exact; " + (f"its {hist} histogram is used only outside that span"
                                                        if hist else "no histogram of it"))
        if gauge:
            note += f"; traffic from its request-rate gauge {gauge}, not from counting the log's rows"
        if not r["with_status"]:
            note += "; the log has no status: no request counts as an error"
        rows.append({"service": r["service"], "requests": r["requests"], "errors": r["errors"],
                     "first_ts": iso_utc(r["first_ms"]), "last_ts": iso_utc(r["last_ms"]), "latency": which,
                     "histogram": hist, "traffic": f"gauge {gauge}" if gauge else "request log", "note": note})
    return pl.DataFrame(rows, schema=REQUEST_LOG_SCHEMA)


def latency_source_notes(summary: pl.DataFrame) -> list[str]:
    """What an analysis page says of services whose request log wins over their histogram.

    >>> s = pl.DataFrame({"service": ["chat"], "histogram": ["vllm:time_to_first_token_seconds"],
    ...                   "latency": ["time to first token"], "traffic": ["request log"]})
    >>> latency_source_notes(s)[0].startswith("chat: traffic and latency come from its request log")
    True
    """
    return [f"{r['service']}: {'traffic and latency come' if r['traffic'] == 'request log' else 'latency comes'} "
            f"from its request log (exact per-step percentiles of "
            f"{r['latency']}, errors counted apart), not from its {r['histogram']} histogram, on the steps the "
            "log covers" for r in summary.filter(pl.col("histogram").is_not_null()).iter_rows(named=True)]
