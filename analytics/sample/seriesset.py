"""The simulator's series frame (:class:`SeriesSet`: one row a series, its samples by ``skey``)
and how a family is typed: what :mod:`~analytics.sample.series` builds and the export variants
(:mod:`~analytics.sample.variants`) rewrite."""

from __future__ import annotations

from dataclasses import dataclass

import orjson
import polars as pl

from analytics import signals as sg

# Families whose Prometheus type is not gauge (histograms are named by their family).
COUNTERS = {sg.VLLM_SUCCESS, sg.KUEUE_ADMITTED, sg.KUEUE_EVICTED}
HISTOGRAMS = {sg.VLLM_TTFT, sg.VLLM_E2E, sg.HTTP_DURATION}


@dataclass
class SeriesSet:
    """Series (one row each) and their samples, keyed by ``skey`` in creation order."""

    series: pl.DataFrame  # skey, metric, family, labels (JSON, sorted keys)
    samples: pl.DataFrame  # skey, ts_ms, value


def labels_json(labels: dict[str, str]) -> str:
    """A series' labels as stored in :attr:`SeriesSet.series`: JSON with sorted keys."""
    return orjson.dumps(dict(sorted(labels.items()))).decode()


def family_of(metric: str) -> str:
    """The metric family a series belongs to (``x_bucket`` -> ``x`` for known histograms)."""
    for suffix in ("_bucket", "_sum", "_count"):
        if metric.endswith(suffix) and metric[: -len(suffix)] in HISTOGRAMS:
            return metric[: -len(suffix)]
    return metric


def family_type(family: str) -> str:
    if family in HISTOGRAMS:
        return "histogram"
    return "counter" if family in COUNTERS else "gauge"
