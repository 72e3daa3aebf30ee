"""Datadog's v1 metrics query API (``GET /api/v1/query``) saved as JSON, onto dcgm-exporter's names.

A response holds ``series[]``, each with its ``metric``, its tags (``tag_set``, else the
``scope`` string) and ``pointlist`` (``[ms, value]`` pairs; ``null`` where Datadog had no point).
The Datadog DCGM integration renames dcgm-exporter's metrics (``DCGM_FI_DEV_GPU_UTIL`` ->
``dcgm.gpu_utilization``; older agents ``dcgm.fb_used``, newer ``dcgm.frame_buffer.used``) and
its pod labels (``namespace`` -> ``kube_namespace``, ``pod`` -> ``pod_name``, ``container`` ->
``kube_container_name``): both are mapped back here, so every analysis reads a Datadog export as
it reads dcgm-exporter's. Names it does not know are kept as they are.

The mapping follows the integration's own tables (DataDog/integrations-core ``dcgm/metrics.py``
``METRIC_MAP`` and ``RENAME_LABELS_MAP``, and its ``metadata.csv`` for the older names).

>>> dcgm_name("dcgm.gpu_utilization"), dcgm_name("dcgm.frame_buffer.used"), dcgm_name("system.load.1")
('DCGM_FI_DEV_GPU_UTIL', 'DCGM_FI_DEV_FB_USED', 'system.load.1')
"""

from __future__ import annotations

import math
import re
from typing import Any

import orjson
import polars as pl

from analytics.errors import IngestError
from analytics.limits import IngestLimits
from analytics.store import Sink

# Datadog name (without the ``dcgm.`` prefix) -> dcgm-exporter's.
_METRICS = {
    "gpu_utilization": "DCGM_FI_DEV_GPU_UTIL", "fb_used": "DCGM_FI_DEV_FB_USED",
    "frame_buffer.used": "DCGM_FI_DEV_FB_USED", "fb_free": "DCGM_FI_DEV_FB_FREE",
    "frame_buffer.free": "DCGM_FI_DEV_FB_FREE", "frame_buffer.total": "DCGM_FI_DEV_FB_TOTAL",
    "power_usage": "DCGM_FI_DEV_POWER_USAGE", "temperature": "DCGM_FI_DEV_GPU_TEMP",
    "sm_clock": "DCGM_FI_DEV_SM_CLOCK", "mem.clock": "DCGM_FI_DEV_MEM_CLOCK",
    "mem.copy_utilization": "DCGM_FI_DEV_MEM_COPY_UTIL", "mem.temperature": "DCGM_FI_DEV_MEMORY_TEMP",
    "memory_temperature": "DCGM_FI_DEV_MEMORY_TEMP", "enc_utilization": "DCGM_FI_DEV_ENC_UTIL",
    "dec_utilization": "DCGM_FI_DEV_DEC_UTIL", "xid_errors": "DCGM_FI_DEV_XID_ERRORS",
    "gr_engine_active": "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "sm_active": "DCGM_FI_PROF_SM_ACTIVE",
    "sm_occupancy": "DCGM_FI_PROF_SM_OCCUPANCY", "dram.active": "DCGM_FI_PROF_DRAM_ACTIVE",
    "pipe.tensor_active": "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "fan_speed": "DCGM_FI_DEV_FAN_SPEED",
}
# Datadog tag key -> the label dcgm-exporter (and kube-state-metrics) would have written.
_TAGS = {
    "kube_namespace": "namespace", "pod_name": "pod", "kube_container_name": "container",
    "uuid": "UUID", "gpu_uuid": "UUID", "modelname": "modelName", "gpu_model": "modelName",
    "hostname": "Hostname", "host": "Hostname", "kube_node": "node", "kube_deployment": "deployment",
    "kube_replica_set": "replicaset", "gpu": "gpu", "gpu_index": "gpu", "device": "device",
}


def dcgm_name(metric: str) -> str:
    """dcgm-exporter's name for a Datadog DCGM metric; any other name unchanged."""
    if metric.startswith("dcgm."):
        return _METRICS.get(metric[len("dcgm."):], metric)
    return metric


# No epoch-milliseconds time beyond this fits int64 once rounded (and none is plausible).
_MAX_ABS_MS = 9.2e15
_KEY_END = re.compile(rb'"\s*:')  # how every JSON object key ends (strings hold no bare '"')


def _show(x: Any, limit: int = 60) -> str:
    """A value from the file as a short repr for a message (a list of a million points is not echoed)."""
    r = repr(x)
    return r if len(r) <= limit else r[:limit] + "…"


def _kind(x: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(x), "a number")


def _tags(series: dict[str, Any], where: str, source: str) -> dict[str, str]:
    raw = series.get("tag_set")
    if raw is None:
        scope = series.get("scope")
        if scope is not None and not isinstance(scope, str):
            raise IngestError(source, f"'scope' is {_kind(scope)} ({_show(scope)}); Datadog writes a string of "
                              "comma-separated \"key:value\" tags", where=f"{where}.scope")
        scope = scope or ""
        raw = [] if scope in ("", "*") else scope.split(",")
    if not isinstance(raw, list) or not all(isinstance(t, str) for t in raw):
        raise IngestError(source, "'tag_set' must be a list of \"key:value\" strings", where=f"{where}.tag_set")
    out: dict[str, str] = {}
    for tag in raw:
        key, _, value = tag.partition(":")
        key = key.strip()
        if key:
            label = _TAGS.get(key, key)
            if label in out and out[label] != value.strip():
                raise IngestError(source, f"tag {key!r} given twice with different values ({_show(out[label])}, "
                                  f"{_show(value.strip())}): which one the series has is unknown",
                                  where=f"{where}.tag_set" if "tag_set" in series else f"{where}.scope")
            out[label] = value.strip()
    return out


class _Pairs(dict):  # type: ignore[type-arg]
    """A JSON object from the stdlib parser that remembers a key it saw twice."""

    dup: str | None = None


def _pairs_hook(pairs: list[tuple[str, Any]]) -> _Pairs:
    out = _Pairs()
    for k, v in pairs:
        if k in out and out.dup is None:
            out.dup = k
        out[k] = v
    return out


def _first_dup(doc: Any) -> tuple[str, str] | None:
    """``(JSON path, key)`` of the first object holding a key twice (a stack, not recursion: a
    document nested a thousand deep must not end in RecursionError)."""
    stack: list[tuple[Any, str]] = [(doc, "$")]
    while stack:
        x, path = stack.pop()
        if isinstance(x, dict):
            if getattr(x, "dup", None) is not None:
                return path, x.dup  # type: ignore[attr-defined]
            children = [(v, k if path == "$" else f"{path}.{k}") for k, v in x.items()]
        elif isinstance(x, list):
            children = [(v, f"{path}[{k}]") for k, v in enumerate(x) if isinstance(v, (dict, list))]
        else:
            continue
        stack.extend(reversed(children))  # in document order
    return None


def _key_count(doc: Any) -> int:
    """Keys of every object in ``doc``, not looking inside ``pointlist`` (pairs of numbers, checked one by one)."""
    n, stack = 0, [doc]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            n += len(x)
            stack.extend(v for k, v in x.items() if k != "pointlist" and isinstance(v, (dict, list)))
        elif isinstance(x, list):
            stack.extend(v for v in x if isinstance(v, (dict, list)))
    return n


def check_duplicate_keys(data: bytes, doc: Any, source: str) -> None:
    """Refuse an object with a key given twice (orjson, like most parsers, keeps the last silently).

    Every key ends ``"`` ``:`` in the text, so when the parsed objects hold as many keys as the text
    has such endings there is no duplicate (a regex count and a walk that skips the points: 0.08 ms on
    the bundled fixture, 0.07 s on a 42 MB response that orjson parses in 2.4 s; the stdlib parser
    with a pairs hook would take 3.0 s).
    Otherwise the stdlib parser, which shows each object's pairs, finds the first and its path.
    """
    if sum(1 for _ in _KEY_END.finditer(data)) == _key_count(doc):
        return
    import json

    try:
        full = json.loads(data, object_pairs_hook=_pairs_hook)
    except RecursionError:
        raise IngestError(source, "nested too deep for its keys to be checked (a Datadog response nests a few "
                          "levels); save the response again, unedited") from None
    except ValueError:
        return  # orjson read it: a difference in what each accepts, not a duplicate
    found = _first_dup(full)
    if found:
        where, key = found
        raise IngestError(source, f"key {_show(key)} given twice in one object (a JSON reader would keep only "
                          "the last, silently): save the response again, unedited", where=where)


def parse_datadog_v1(data: bytes, sink: Sink, source: str) -> str | None:
    """Load a saved ``/api/v1/query`` response into ``sink``; returns a note or None.

    The series are counted on the raw bytes before parsing: a response of millions of series is
    refused at the limit without building them (14.8 s and 2.7 GB before).
    """

    limit = IngestLimits.from_env().max_series
    n_series = data.count(b'"pointlist"')
    if n_series > limit:
        raise IngestError(source, f"{n_series:,} series (by their \"pointlist\"), more than {limit:,} in one "
                          "source: refused; query fewer groups, or raise TIDELENS_MAX_SERIES_PER_SOURCE",
                          where="series")
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise IngestError(source, f"not valid JSON ({exc.msg}, column {exc.colno})", line=exc.lineno) from None
    if not isinstance(doc, dict):
        raise IngestError(source, "expected a Datadog query response object", where="$")
    check_duplicate_keys(data, doc, source)
    if doc.get("status") == "error" or doc.get("errors"):
        raise IngestError(source, f"the saved response is a Datadog error ({_show(doc.get('error') or doc.get('errors'), 200)}); "
                          "re-run the query and save a successful response", where="status")
    series = doc.get("series")
    if not isinstance(series, list):
        raise IngestError(source, "no 'series' list in the response; save the whole body of /api/v1/query",
                          where="series")
    rows: list[dict[str, Any]] = []
    skeys: list[int] = []
    ts: list[int] = []
    vals: list[float] = []
    where_of: list[str] = []
    missing = renamed = 0
    for i, s in enumerate(series):
        where = f"series[{i}]"
        if not isinstance(s, dict):
            raise IngestError(source, f"a series must be an object, not {_kind(s)}", where=where)
        metric = s.get("metric")
        if not isinstance(metric, str) or not metric.strip():
            what = "empty" if isinstance(metric, str) else f"{_kind(metric)} ({_show(metric)})"
            raise IngestError(source, f"the series' metric name is {what}: write \"metric\": \"<name>\"",
                              where=f"{where}.metric")
        points = s.get("pointlist")
        if not isinstance(points, list):
            raise IngestError(source, "'pointlist' must be a list of [milliseconds, value] pairs",
                              where=f"{where}.pointlist")
        name = dcgm_name(metric)
        renamed += name != metric
        rows.append({"skey": i, "metric": name, "labels": orjson.dumps(_tags(s, where, source)).decode()})
        for j, pair in enumerate(points):
            if not (isinstance(pair, list) and len(pair) == 2):
                raise IngestError(source, "a point must be a [milliseconds, value] pair",
                                  where=f"{where}.pointlist[{j}]")
            t, v = pair
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
                raise IngestError(source, f"time {_show(t)} is not a number of milliseconds",
                                  where=f"{where}.pointlist[{j}][0]")
            if abs(t) > _MAX_ABS_MS:
                raise IngestError(source, f"time {_show(t)} is far outside any plausible time (milliseconds "
                                  "since 1970)", where=f"{where}.pointlist[{j}][0]")
            if v is None:
                missing += 1
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise IngestError(source, f"value {_show(v)} is not a number", where=f"{where}.pointlist[{j}][1]")
            skeys.append(i)
            ts.append(int(round(t)))
            vals.append(float(v))
            where_of.append(f"{where}.pointlist[{j}]")
    sink.add_series(pl.DataFrame(rows, schema={"skey": pl.Int64, "metric": pl.Utf8, "labels": pl.Utf8}))
    sink.add_samples(pl.DataFrame({"skey": skeys, "ts_ms": ts, "value": vals},
                                  schema={"skey": pl.Int64, "ts_ms": pl.Int64, "value": pl.Float64}),
                     locate=lambda k: {"where": where_of[k]})
    notes = []
    if renamed:
        notes.append(f"{renamed} Datadog DCGM series read under dcgm-exporter's names")
    if missing:
        notes.append(f"{missing} null point(s) skipped (no data in Datadog's interval)")
    return "; ".join(notes) or None
