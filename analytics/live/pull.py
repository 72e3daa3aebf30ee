"""Live pulls: which chunks to fetch, the series guard, incremental state, and landing in the store.

Each chunk (one query over one aligned time range) is one store source named
``prom://host[:port][/path]/<endpoint>?q=<key>&scope=..&step=..&start=..&end=..`` (no credentials)
and hashed over its query and response, so pulling the same period again is a no-op, and a
failed chunk leaves the store as it was. ``live_state`` remembers the contiguous range pulled
per server, query, step and scope, so a second pull asks only for what is new.
"""

from __future__ import annotations

import gc
import hashlib
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import orjson
import polars as pl

from analytics.errors import IngestError
from analytics.live.client import ClientConfig, PromClient, PullError, Response, SeriesGuardError, split_range
from analytics.promql import PullQuery, Scope, raw_query, timeline_queries
from analytics.secrets import printable
from analytics.signals import canonical_metric
from analytics.sql import live as q
from analytics.store import LoadResult, Sink, Store, series_key
from analytics.times import iso_utc

DEFAULT_MAX_SERIES = 20_000
DEFAULT_RAW_WINDOW_MS = 3_600_000
# Data younger than this may still be arriving (scrape interval, remote-write delay).
SETTLE_MS = 5 * 60_000

# progress(done, total, message): called after every request.
Progress = Callable[[int, int, str], None]


@dataclass
class PullReport:
    """What one pull did; ``as_dict`` is what the CLI prints with ``--json``."""

    server: str
    queries: list[PullQuery] = field(default_factory=list)
    results: list[LoadResult] = field(default_factory=list)
    requests: int = 0
    bytes_received: int = 0
    up_to_date: list[str] = field(default_factory=list)  # query keys with nothing new to fetch
    rules: dict[str, Any] | None = None  # analytics.live.route.RulesPlan.as_dict(): which path each signal took

    @property
    def samples(self) -> int:
        return sum(r.samples for r in self.results)

    @property
    def series_returned(self) -> int:
        return sum(r.extra.get("series_returned", 0) for r in self.results)

    def as_dict(self) -> dict[str, Any]:
        return {"server": self.server, "requests": self.requests,
                "bytes_received": self.bytes_received, "samples": self.samples,
                "loaded": sum(r.status == "loaded" for r in self.results),
                "skipped": sum(r.status == "skipped" for r in self.results),
                "up_to_date": self.up_to_date,
                **({"rules": self.rules} if self.rules is not None else {}),
                "sources": [r.as_dict() for r in self.results]}


def ensure_state(store: Store) -> None:
    store.con.execute(q.LIVE_STATE_CREATE).fetchall()


def pulled_range(store: Store, server: str, key: str, step_ms: int, scope: str) -> tuple[int, int] | None:
    """The contiguous ``(from_ms, to_ms)`` of step ends already pulled, or ``None``."""
    ensure_state(store)
    rows = store.con.execute(q.LIVE_STATE_GET, {"server": server, "query_key": key, "step_ms": step_ms,
                                                "scope": scope}).fetchall()
    return (int(rows[0][0]), int(rows[0][1])) if rows else None


def _record_range(store: Store, server: str, key: str, step_ms: int, scope: str,
                  from_ms: int, to_ms: int) -> None:
    old = pulled_range(store, server, key, step_ms, scope)
    if old and from_ms <= old[1] + step_ms and to_ms >= old[0] - step_ms:
        from_ms, to_ms = min(from_ms, old[0]), max(to_ms, old[1])
    elif old and to_ms < old[0]:
        return  # an older, disjoint range: keep tracking the newer one
    store.con.execute(q.LIVE_STATE_UPSERT, {"server": server, "query_key": key, "step_ms": step_ms,
                                            "scope": scope, "from_ms": from_ms, "to_ms": to_ms}).fetchall()


def missing_ranges(start_ms: int, end_ms: int, step_ms: int,
                   done: tuple[int, int] | None) -> list[tuple[int, int]]:
    """Step-end ranges of ``[start, end]`` not yet pulled.

    >>> missing_ranges(0, 600, 60, (120, 300))
    [(0, 60), (360, 600)]
    >>> missing_ranges(0, 600, 60, None)
    [(0, 600)]
    """
    first = math.ceil(start_ms / step_ms) * step_ms
    last = (end_ms // step_ms) * step_ms
    if last < first:
        return []
    if done is None or done[1] < first or done[0] > last:
        return [(first, last)]
    out = []
    if first < done[0]:
        out.append((first, done[0] - step_ms))
    if last > done[1]:
        out.append((done[1] + step_ms, last))
    return out


def _settled(now_ms: int | None) -> int:
    return (int(time.time() * 1000) if now_ms is None else now_ms) - SETTLE_MS


def _guard(client: PromClient, promql: str, at_ms: int, max_series: int, what: str,
           *, raw_range: tuple[int, int] | None = None) -> int:
    """Count what a query would return before asking for it; raise past ``max_series``."""
    if raw_range is not None:
        # A raw selector: every series it matches in the range (names kept, unlike PromQL).
        n = len(client.series(promql, *raw_range).data or [])
    else:
        resp = client.query(f"count({promql})", at_ms)
        result = resp.data.get("result") or []
        try:
            n = int(float(result[0]["value"][1])) if result else 0
        except (KeyError, IndexError, TypeError, ValueError, OverflowError):
            raise PullError(f"{client.describe()}: {what}: the series count came back as "
                            f"data.result[0].value = {_shown(result[0].get('value'))}, not a number: "
                            "is the URL a Prometheus-compatible query API?") from None
    if n > max_series:
        raise SeriesGuardError(
            f"{client.describe()}: {what} would return {n:,} series (limit {max_series:,}): narrow "
            "it with --scope label=value (e.g. namespace=inference or Hostname=~\"node-0.*\"), a "
            "more specific selector, or raise --max-series if the store can take it")
    return n


def _shown(value: Any) -> str:
    text = printable(repr(value))
    return text if len(text) <= 80 else text[:80] + "..."


def _check_series(resp: Response, max_series: int, what: str, server: str) -> None:
    n = len(resp.data.get("result") or [])
    if n > max_series:
        raise SeriesGuardError(f"{server}: {what} returned {n:,} series (limit {max_series:,}): "
                               "narrow it with --scope or a more specific selector, or raise --max-series")


def _matrix_to_sink(sink: Sink, name: str, result: list[dict[str, Any]], metric: str | None) -> None:
    """Write a matrix result to the sink: series labels as given, values as floats."""
    skeys: list[int] = []
    metrics: list[str] = []
    labels: list[str] = []
    s_skey: list[int] = []
    s_ts: list[int] = []
    s_val: list[float] = []
    starts: list[int] = []  # each series' first sample's index: a sample's place in the answer
    gc_was = gc.isenabled()
    gc.disable()  # millions of small lists: the collector would triple the parse time
    try:
        for i, item in enumerate(result):
            lab = dict(item.get("metric") or {})
            name_label = lab.pop("__name__", None)
            m = metric or name_label
            if not m:
                raise IngestError(name, "a series without a metric name in a raw pull",
                                  where=f"data.result[{i}].metric")
            skeys.append(i)
            starts.append(len(s_skey))
            metrics.append(m)
            labels.append(orjson.dumps(lab, option=orjson.OPT_SORT_KEYS).decode())
            for j, pair in enumerate(item.get("values") or ()):
                try:
                    s_ts.append(round(float(pair[0]) * 1000))
                    s_val.append(float(pair[1]))
                except (TypeError, ValueError, IndexError) as exc:
                    raise IngestError(name, f"bad sample {pair!r}",
                                      where=f"data.result[{i}].values[{j}]") from exc
                s_skey.append(i)
    finally:
        if gc_was:
            gc.enable()
    sink.add_series(pl.DataFrame({"skey": skeys, "metric": metrics, "labels": labels},
                                 schema={"skey": pl.Int64, "metric": pl.Utf8, "labels": pl.Utf8}))
    sink.add_samples(pl.DataFrame({"skey": s_skey, "ts_ms": s_ts, "value": s_val},
                                  schema={"skey": pl.Int64, "ts_ms": pl.Int64, "value": pl.Float64}),
                     locate=lambda k: {"where": f"data.result[{s_skey[k]}].values[{k - starts[s_skey[k]]}]"})


def _land(store: Store, name: str, fmt: str, promql: str, metric: str | None, resp: Response) -> LoadResult:
    result = resp.data.get("result") or []
    digest = hashlib.sha256()
    # The query is part of the identity: two queries can answer identical JSON (e.g. every
    # device reports GPU_UTIL) and each must land under its own metric name.
    digest.update(f"{metric}\n{promql}\n".encode())
    digest.update(resp.content)
    res = store.load(name, fmt, digest.hexdigest(),
                     lambda sink: _matrix_to_sink(sink, name, result, metric) or
                     (f"server warnings: {'; '.join(resp.warnings)}" if resp.warnings else None))
    res.extra["series_returned"] = len(result)
    res.extra["bytes"] = len(resp.content)
    return res


def _reshape(store: Store, pq: PullQuery, resp: Response, chunk_start_ms: int, step_ms: int,
             server: str = "") -> Response:
    """Name summed series by service, and turn per-step increases into running sums.

    A running sum continues from the value the store holds for the same series before this
    chunk; a series new to the store starts with a zero one step before its first point, so
    the first step's increase survives counter semantics (a first sample is a baseline).
    """
    out = []
    for i, item in enumerate(resp.data.get("result") or []):
        labels = {k: v for k, v in (item.get("metric") or {}).items() if k != "__name__"}
        if pq.service_from_workload:
            workload = labels.pop("workload", None)
            if not labels.get("service") and not labels.get("exported_service") and workload:
                labels["service"] = workload
        values = item.get("values") or []
        if pq.accumulate and values:
            key = series_key(canonical_metric(pq.metric), labels)
            rows = store.con.execute(q.LAST_VALUE_BEFORE, {"key": key, "before_ms": chunk_start_ms}).fetchall()
            total = float(rows[0][0]) if rows else 0.0
            j = 0
            try:
                acc = [] if rows else [[float(values[0][0]) - step_ms / 1000, "0"]]
                for j, (ts, v) in enumerate(values):
                    total += float(v)
                    acc.append([ts, repr(total)])
            except (TypeError, ValueError, IndexError):
                raise PullError(f"{server}: query {pq.metric}: bad sample {_shown(values[j])} at "
                                f"data.result[{i}].values[{j}]: a sample is [time, \"value\"]") from None
            values = acc
        out.append({"metric": labels, "values": values})
    return Response({"resultType": "matrix", "result": out}, resp.content, resp.warnings)


def _unshift(resp: Response, shift_ms: int, server: str, metric: str) -> Response:
    """Each point of a shifted query (``PullQuery.shift_ms``) put back at its step's end."""
    out = []
    for i, item in enumerate(resp.data.get("result") or []):
        try:
            values = [[float(ts) - shift_ms / 1000, v] for ts, v in item.get("values") or []]
        except (TypeError, ValueError):
            raise PullError(f"{server}: query {metric}: a sample's time is not a number at "
                            f"data.result[{i}].values: a sample is [time, \"value\"]") from None
        out.append({**item, "values": values})
    return Response({"resultType": "matrix", "result": out}, resp.content, resp.warnings)


def pull(store: Store, client: PromClient, start_ms: int, end_ms: int, *, step_ms: int = 60_000,
         scope: Scope | None = None, queries: list[PullQuery] | None = None,
         max_series: int = DEFAULT_MAX_SERIES, incremental: bool = True,
         progress: Progress | None = None, now_ms: int | None = None) -> PullReport:
    """Pull the aggregated timelines' inputs for ``[start, end]`` (step ends) into ``store``.

    Parameters
    ----------
    store, client:
        Where the series land, and the server they come from.
    start_ms, end_ms:
        UTC epoch milliseconds; rounded inwards to the step grid.
    step_ms:
        The analysis step; each stored point is the step ending at its timestamp.
    scope:
        Label matchers narrowing every query (default: the whole pool).
    queries:
        The catalogue to run (default :func:`~analytics.promql.timeline_queries`, which
        the timelines read unchanged; :func:`~analytics.promql.fleet_queries` for counts).
    max_series:
        The series guard: a query returning more series stops the pull with a message.
    incremental:
        Ask only for the step ends not pulled before (per server, query, step and scope).
    progress:
        ``progress(done, total, message)`` after each request.
    now_ms:
        The current time; steps within :data:`SETTLE_MS` of it are stored but fetched again
        next time (the server may not have scraped them fully yet).
    """
    settled_ms = _settled(now_ms)
    scope = scope or Scope()
    queries = queries if queries is not None else timeline_queries(step_ms, scope)
    server = client.describe()
    scope_key = scope_text(scope)
    report = PullReport(server=server, queries=queries)
    ensure_state(store)
    plan: list[tuple[PullQuery, list[tuple[int, int]], list[tuple[int, int]]]] = []
    for pq in queries:
        done = pulled_range(store, server, pq.key, step_ms, scope_key) if incremental else None
        missing = missing_ranges(start_ms, end_ms, step_ms, done)
        chunks = [c for a, b in missing for c in split_range(a, b, step_ms, client.config.max_points)]
        if chunks:
            plan.append((pq, missing, chunks))
        else:
            report.up_to_date.append(pq.key)
    total = sum(1 + len(chunks) for _, _, chunks in plan)
    done_n = 0
    base_requests, base_bytes = client.requests_made, client.bytes_received
    for pq, missing, planned in plan:
        n = _guard(client, pq.promql, planned[-1][1], max_series, f"query {pq.metric}")
        chunks = [c for a, b in missing
                  for c in split_range(a, b, step_ms, points_per_request(n, client.config))]
        total += len(chunks) - len(planned)
        done_n += 1
        if progress:
            progress(done_n, total, f"{pq.metric}: {n} series")
        for a, b in chunks:
            try:
                resp = client.query_range(pq.promql, a + pq.shift_ms, b + pq.shift_ms, step_ms)
            except PullError as exc:
                raise PullError(f"{exc}\nquery ({pq.metric}): {pq.promql}") from exc
            if pq.shift_ms:
                resp = _unshift(resp, pq.shift_ms, server, pq.metric)
            _check_series(resp, max_series, f"query {pq.metric}", server)
            if resp.data.get("result"):
                name = (f"prom://{server.split('://', 1)[1]}/query_range?q={pq.key}&scope={scope_key}"
                        f"&step={step_ms // 1000}s&start={iso_utc(a)}&end={iso_utc(b)}")
                if pq.service_from_workload or pq.accumulate:
                    resp = _reshape(store, pq, resp, a, step_ms, server)
                report.results.append(_land(store, name, "prometheus-live", pq.promql, pq.metric, resp))
            if min(b, settled_ms) >= a:
                _record_range(store, server, pq.key, step_ms, scope_key, a, min(b, settled_ms))
            done_n += 1
            if progress:
                progress(done_n, total, f"{pq.metric} {iso_utc(a)}..{iso_utc(b)}")
    report.requests = client.requests_made - base_requests
    report.bytes_received = client.bytes_received - base_bytes
    return report


def points_per_request(series: int, config: ClientConfig) -> int:
    """Points per series in one range request: the server's limit, or, when ``series x points``
    would pass ``config.max_samples``, the largest power of two that stays within it.

    Powers of two keep the chunk grid (and so the chunks' content hashes) the same when the
    series count moves a little between two pulls.

    >>> [points_per_request(n, ClientConfig()) for n in (100, 1_000, 1_100, 10_000, 10**8)]
    [11000, 1024, 1024, 128, 1]
    """
    budget = config.max_samples // max(series, 1)
    if budget >= config.max_points:
        return config.max_points
    return 1 << max(0, budget.bit_length() - 1)


def pull_raw(store: Store, client: PromClient, selector: str, start_ms: int, end_ms: int, *,
             window_ms: int = DEFAULT_RAW_WINDOW_MS, max_series: int = DEFAULT_MAX_SERIES,
             incremental: bool = True, progress: Progress | None = None,
             now_ms: int | None = None) -> PullReport:
    """Pull the raw samples of ``selector`` in ``(start, end]`` for drill-down.

    Raw samples come from range-vector instant queries (``selector[window]`` evaluated at each
    window's end), so timestamps and values are exactly the server's, not resampled to a step.
    Windows are aligned to multiples of ``window_ms``; keep a window under ~11,000 scrapes.
    """
    settled_ms = _settled(now_ms)
    server = client.describe()
    report = PullReport(server=server)
    ensure_state(store)
    key = f"raw:{selector}"
    done = pulled_range(store, server, key, window_ms, "raw") if incremental else None
    first = (start_ms // window_ms) * window_ms  # window (a - w, a]: ends on the grid
    ranges = missing_ranges(first + window_ms if first < start_ms else first,
                            math.ceil(end_ms / window_ms) * window_ms, window_ms, done)
    ends = [t for a, b in ranges for t in range(a, b + 1, window_ms)]
    if not ends:
        report.up_to_date.append(key)
        return report
    n = _guard(client, selector, ends[-1], max_series, f"selector {selector}",
               raw_range=(ends[0] - window_ms, ends[-1]))
    total = len(ends) + 1
    if progress:
        progress(1, total, f"{selector}: {n} series")
    base_requests, base_bytes = client.requests_made, client.bytes_received
    for i, t in enumerate(ends):
        promql = raw_query(selector, window_ms)
        try:
            resp = client.query(promql, t)
        except PullError as exc:
            raise PullError(f"{exc}\nquery: {promql}") from exc
        _check_series(resp, max_series, f"selector {selector}", server)
        if resp.data.get("result"):
            # Clip to the asked range: the first and last windows may reach beyond it.
            try:
                result = [{"metric": it.get("metric") or {},
                           "values": [v for v in it.get("values") or [] if start_ms < float(v[0]) * 1000 <= end_ms]}
                          for it in resp.data["result"]]
            except (TypeError, ValueError, IndexError, KeyError):
                raise PullError(f"{server}: selector {selector}: a sample's time is not a number in "
                                "data.result[].values: a sample is [time, \"value\"]") from None
            resp = Response({"resultType": "matrix", "result": [r for r in result if r["values"]]},
                            resp.content, resp.warnings)
            if resp.data["result"]:
                name = (f"prom://{server.split('://', 1)[1]}/query?raw={selector}"
                        f"&start={iso_utc(t - window_ms)}&end={iso_utc(t)}")
                digest_q = f"{promql}@{t}&{start_ms}&{end_ms}"
                report.results.append(_land(store, name, "prometheus-live-raw", digest_q, None, resp))
        if start_ms <= t - window_ms and t <= settled_ms:  # only whole, settled windows count as done
            _record_range(store, server, key, window_ms, "raw", t, t)
        if progress:
            progress(i + 2, total, f"{selector} ..{iso_utc(t)}")
    report.requests = client.requests_made - base_requests
    report.bytes_received = client.bytes_received - base_bytes
    return report


def scope_text(scope: Scope) -> str:
    if not scope.matchers:
        return "pool"
    return ",".join(f"{k.rstrip('~')}{'=~' if k.endswith('~') else '='}{v}" for k, v in scope.matchers)
