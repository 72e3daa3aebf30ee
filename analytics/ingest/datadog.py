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
from typing import Any

import orjson
import polars as pl

from analytics.errors import IngestError
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


def _tags(series: dict[str, Any], where: str, source: str) -> dict[str, str]:
    raw = series.get("tag_set")
    if raw is None:
        scope = series.get("scope") or ""
        raw = [] if scope in ("", "*") else scope.split(",")
    if not isinstance(raw, list) or not all(isinstance(t, str) for t in raw):
        raise IngestError(source, "'tag_set' must be a list of \"key:value\" strings", where=f"{where}.tag_set")
    out: dict[str, str] = {}
    for tag in raw:
        key, _, value = tag.partition(":")
        key = key.strip()
        if key:
            out[_TAGS.get(key, key)] = value.strip()
    return out


def parse_datadog_v1(data: bytes, sink: Sink, source: str) -> str | None:
    """Load a saved ``/api/v1/query`` response into ``sink``; returns a note or None."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise IngestError(source, f"not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise IngestError(source, "expected a Datadog query response object", where="$")
    if doc.get("status") == "error" or doc.get("errors"):
        raise IngestError(source, f"the saved response is a Datadog error ({doc.get('error') or doc.get('errors')}); "
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
        if not isinstance(s, dict) or not isinstance(s.get("metric"), str):
            raise IngestError(source, "a series must be an object with a 'metric' name", where=where)
        points = s.get("pointlist")
        if not isinstance(points, list):
            raise IngestError(source, "'pointlist' must be a list of [milliseconds, value] pairs",
                              where=f"{where}.pointlist")
        name = dcgm_name(s["metric"])
        renamed += name != s["metric"]
        rows.append({"skey": i, "metric": name, "labels": orjson.dumps(_tags(s, where, source)).decode()})
        for j, pair in enumerate(points):
            if not (isinstance(pair, list) and len(pair) == 2):
                raise IngestError(source, "a point must be a [milliseconds, value] pair",
                                  where=f"{where}.pointlist[{j}]")
            t, v = pair
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
                raise IngestError(source, f"time {t!r} is not a number of milliseconds",
                                  where=f"{where}.pointlist[{j}][0]")
            if v is None:
                missing += 1
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise IngestError(source, f"value {v!r} is not a number", where=f"{where}.pointlist[{j}][1]")
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
