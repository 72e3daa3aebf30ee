"""One epoch-unit rule (:func:`analytics.times.epoch_unit`) for every reader that guesses it: the
same instant written in seconds, milliseconds, microseconds and nanoseconds loads at the same
time from a long CSV, a long Parquet, Grafana's wide CSV, a mapped table (its unit guessed) and
a request log."""

from __future__ import annotations

import io

import polars as pl
import pytest

from analytics.ingest import ingest_bytes
from analytics.ingest.mapping import guess_mapping
from analytics.times import epoch_unit

T0_S = 1_767_225_600  # 2026-01-01 00:00 UTC
T0_MS = T0_S * 1000
# the instant and the next minute in each unit, as the files write them (integers)
IN_UNIT = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}


def _times(unit: str) -> list[int]:
    return [T0_S * IN_UNIT[unit], (T0_S + 60) * IN_UNIT[unit]]


def _loads_at_t0(store, name: str, data: bytes, **kw) -> None:
    r = ingest_bytes(store, name, data, **kw)
    assert r.status == "loaded", r.error
    assert (r.first_ts_ms, r.last_ts_ms) == (T0_MS, T0_MS + 60_000), name


@pytest.mark.parametrize("unit", list(IN_UNIT))
def test_the_rule_reads_each_unit_by_its_size(unit) -> None:
    assert epoch_unit(_times(unit)[0]) == unit


@pytest.mark.parametrize("unit", list(IN_UNIT))
def test_a_long_csv_and_parquet_load_each_unit_at_the_right_time(store, unit) -> None:
    frame = pl.DataFrame({"timestamp": _times(unit), "metric": ["up", "up"], "value": [1.0, 1.0],
                          "instance": [unit, unit]})
    buf = io.BytesIO()
    frame.write_csv(buf)
    _loads_at_t0(store, f"long-{unit}.csv", buf.getvalue())
    buf = io.BytesIO()
    frame.with_columns(instance=pl.lit(f"{unit}-parquet")).write_parquet(buf)
    _loads_at_t0(store, f"long-{unit}.parquet", buf.getvalue())


@pytest.mark.parametrize("unit", list(IN_UNIT))
def test_a_grafana_wide_csv_loads_each_unit_at_the_right_time(store, unit) -> None:
    a, b = _times(unit)
    _loads_at_t0(store, f"wide-{unit}.csv", f'Time,up{{instance="{unit}"}}\n{a},1\n{b},0\n'.encode())


@pytest.mark.parametrize("unit", list(IN_UNIT))
def test_a_mapped_table_guesses_each_unit_and_loads_at_the_right_time(store, unit) -> None:
    a, b = _times(unit)
    frame = pl.DataFrame({"ts": [str(a), str(b)], "gpu": ["g0", "g0"], "rps": ["45", "50"]})
    mapping = guess_mapping(frame, "request_rate.csv")  # one value column: its metric the file's name
    assert (mapping.time, mapping.time_unit) == ("ts", unit)
    _loads_at_t0(store, f"mapped-{unit}.csv", f"ts,gpu,rps\n{a},g0,45\n{b},g0,50\n".encode(), columns=mapping)


@pytest.mark.parametrize("unit", list(IN_UNIT))
def test_a_request_log_loads_each_unit_at_the_right_time(store, unit) -> None:
    a, b = _times(unit)
    log = f"timestamp,service,latency_ms\n{a},chat,12.5\n{b},chat,14.0\n".encode()
    _loads_at_t0(store, f"requests-{unit}.csv", log)
