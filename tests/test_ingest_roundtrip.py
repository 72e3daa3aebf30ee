"""Property: random series -> each export format -> ingest -> the store holds exactly those samples.

Also the store-level guarantees for file ingest: atomic (a file broken half-way leaves the store
as it was), idempotent (the same content again is skipped, gzip or not).
"""

from __future__ import annotations

import csv
import gzip
import io
import math

import orjson
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analytics.errors import IngestError
from analytics.ingest import ingest_bytes, ingest_path
from analytics.sql.store import SAMPLES_OF_METRIC

FORMATS = ("prom-text", "openmetrics", "prom-json", "csv-long", "csv-grafana", "parquet-long")

label_names = st.from_regex(r"l_[a-z0-9]{1,5}", fullmatch=True)
# NUL is refused on every path (tests/test_ingest_strict.py), so it is not a round-trippable label.
label_values = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                       min_size=1, max_size=10)
values = st.floats(allow_nan=True, allow_infinity=True).filter(
    lambda v: not (2147483632.0 <= v <= 2147483635.0 or 140737488355328.0 <= v <= 140737488355331.0
                   or v == 9223372036854775808.0))


@st.composite
def series_sets(draw):
    n = draw(st.integers(1, 4))
    metrics = draw(st.lists(st.from_regex(r"hyp_[a-z][a-z0-9_]{0,6}", fullmatch=True), min_size=n, max_size=n))
    out, seen = [], set()
    for metric in metrics:
        labels = draw(st.dictionaries(label_names, label_values, max_size=3))
        key = (metric, tuple(sorted(labels.items())))
        if key in seen:
            continue
        seen.add(key)
        # inside the plausible window (analytics.store.plausible_window_ms): 2001 .. 2023
        stamps = draw(st.lists(st.integers(10 ** 12, 17 * 10 ** 11), min_size=1, max_size=5, unique=True))
        vals = draw(st.lists(values, min_size=len(stamps), max_size=len(stamps)))
        out.append((metric, labels, sorted(zip(stamps, vals))))
    return out


def fmt_value(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(v)


def esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def series_text(metric: str, labels: dict[str, str]) -> str:
    return metric + "{" + ",".join(f'{k}="{esc(v)}"' for k, v in labels.items()) + "}"


def render(fmt: str, data: list) -> bytes:
    if fmt in ("prom-text", "openmetrics"):
        lines = []
        for metric, labels, samples in data:
            for ts, v in samples:
                t = str(ts) if fmt == "prom-text" else f"{ts // 1000}.{ts % 1000:03d}"
                lines.append(f"{series_text(metric, labels)} {fmt_value(v)} {t}")
        return ("\n".join(lines) + ("\n# EOF\n" if fmt == "openmetrics" else "\n")).encode()
    if fmt == "prom-json":
        result = [{"metric": {"__name__": m, **labels}, "values": [[ts / 1000, fmt_value(v)] for ts, v in samples]}
                  for m, labels, samples in data]
        return orjson.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}})
    if fmt in ("csv-long", "parquet-long"):
        cols = sorted({k for _, labels, _ in data for k in labels})
        rows = [{"timestamp": ts, "metric": m, "value": v, **{c: labels.get(c) for c in cols}}
                for m, labels, samples in data for ts, v in samples]
        frame = pl.DataFrame(rows, schema={"timestamp": pl.Int64, "metric": pl.Utf8, "value": pl.Float64,
                                           **{c: pl.Utf8 for c in cols}})
        buf = io.BytesIO()
        if fmt == "csv-long":
            frame.write_csv(buf)
        else:
            frame.write_parquet(buf)
        return buf.getvalue()
    if fmt == "csv-grafana":
        stamps = sorted({ts for _, _, samples in data for ts, _ in samples})
        cells = [{ts: fmt_value(v) for ts, v in samples} for _, _, samples in data]
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["Time", *(series_text(m, labels) for m, labels, _ in data)])
        for ts in stamps:
            w.writerow([ts, *(c.get(ts, "") for c in cells)])
        return buf.getvalue().encode()
    raise AssertionError(fmt)


def stored(store) -> list:
    out = []
    series = store.series()
    for sid, metric, labels in series.select("id", "metric", "labels").iter_rows():
        frame = store.query(SAMPLES_OF_METRIC, {"metric": metric, "start_ms": -2 ** 62, "end_ms": 2 ** 62})
        for _, ts, v in frame.filter(pl.col("series_id") == sid).iter_rows():
            out.append((metric, tuple(sorted(orjson.loads(labels).items())), ts, "nan" if math.isnan(v) else v))
    return sorted(out, key=repr)


def flat(data: list) -> list:
    return sorted(((m, tuple(sorted(labels.items())), ts, "nan" if math.isnan(v) else v)
                   for m, labels, samples in data for ts, v in samples), key=repr)


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=series_sets())
def test_round_trip(store, fmt, data):
    store.con.execute("DELETE FROM samples; DELETE FROM series; DELETE FROM sources;")
    raw = render(fmt, data)
    res = ingest_bytes(store, f"rt.{fmt}", raw)
    assert res.format == fmt
    assert stored(store) == flat(data)


def test_half_broken_file_leaves_store_as_it_was(store, tmp_path, fixtures, monkeypatch):
    ingest_path(store, fixtures / "datadog_dcgm_t4_scrape.prom", at_ms=1767225600000)
    before = (store.totals(), store.series().height)
    good = "".join(f'up{{job="j{i}"}} {i} {1767225600000 + i}\n' for i in range(2000))
    path = tmp_path / "broken.prom"
    path.write_text(good + "up{job=\"x\"} not-a-number 1767225600000\n" + good)
    monkeypatch.setattr("analytics.ingest.sources.CHUNK_BYTES", 4096)  # many chunks reach the sink first
    (res,) = ingest_path(store, path)
    assert res.status == "failed"
    assert res.error.startswith(f"{path}:2001: invalid sample value 'not-a-number'")
    assert (store.totals(), store.series().height) == before
    failed = store.sources().filter(pl.col("status") == "failed")
    assert failed["name"].to_list() == [str(path)]


def test_idempotent_and_gzip_is_same_content(store, tmp_path):
    text = "".join(f'up{{job="j{i}"}} {i} {1767225600000 + i}\n' for i in range(50)).encode()
    first = ingest_bytes(store, "a.prom", text)
    totals = store.totals()
    again = ingest_bytes(store, "a.prom", text)
    gz = ingest_bytes(store, "a.prom.gz", gzip.compress(text))
    assert (first.status, again.status, gz.status) == ("loaded", "skipped", "skipped")
    assert store.totals() == totals


def test_duplicate_samples_counted(store):
    text = b'up{job="a"} 1 1000\nup{job="a"} 2 1000\nup{job="a"} 3 2000\nup{job="a"} 3 2000\n'
    res = ingest_bytes(store, "dup.prom", text)
    assert (res.samples, res.duplicates) == (2, 1)
    frame = store.query(SAMPLES_OF_METRIC, {"metric": "up", "start_ms": 0, "end_ms": 10 ** 13})
    assert frame["value"].to_list() == [2.0, 3.0]  # different values: the last one loaded wins


def test_corrupt_gzip_is_a_clear_error(store):
    with pytest.raises(IngestError, match="gzip"):
        ingest_bytes(store, "bad.prom.gz", gzip.compress(b"up 1 1000\n" * 100)[:15])
