"""CSV (long, Grafana wide, nvidia-smi) and Parquet ingest, on real data laid out each way."""

from __future__ import annotations

import csv
import io

import orjson
import polars as pl
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from analytics.errors import IngestError
from analytics.ingest import detect_format, ingest_bytes, ingest_path
from analytics.ingest.tabular import labels_json, ragged_line
from analytics.sql.store import SAMPLES_OF_METRIC


@pytest.fixture
def real_long(fixtures) -> pl.DataFrame:
    """The real query_range fixture as a long table: timestamp (s), metric, value, label columns."""
    rows = []
    for elem in orjson.loads((fixtures / "prom_query_range_up_201907281200.json").read_bytes()):
        labels = dict(elem["metric"])
        name = labels.pop("__name__")
        rows += [{"timestamp": ts, "metric": name, "value": float(v), **labels} for ts, v in elem["values"]]
    return pl.DataFrame(rows)


def totals_by_series(store) -> dict:
    frame = store.query(SAMPLES_OF_METRIC, {"metric": "up", "start_ms": 0, "end_ms": 10 ** 14})
    series = dict(store.series("up").select("id", "labels").iter_rows())
    return {series[sid]: (n, s) for sid, n, s in frame.group_by("series_id").agg(
        pl.len(), pl.col("value").sum()).iter_rows()}


def test_long_csv_and_parquet_match_the_json(store, fixtures, real_long, tmp_path):
    (ref,) = ingest_path(store, fixtures / "prom_query_range_up_201907281200.json")
    want = totals_by_series(store)
    for fmt, write in (("csv-long", real_long.write_csv), ("parquet-long", real_long.write_parquet)):
        path = tmp_path / f"up.{fmt}"
        write(path)
        assert detect_format(path.read_bytes()) == fmt
        (res,) = ingest_path(store, path)
        # the same series and samples: every sample overlaps the JSON's, nothing new
        assert (res.status, res.series, res.samples) == ("loaded", ref.series, ref.samples)
        assert res.first_ts_ms == ref.first_ts_ms
        assert totals_by_series(store) == want
        assert store.totals()["series"] == ref.series


def test_grafana_wide_csv(store, real_long, tmp_path):
    wide = real_long.with_columns(
        legend=pl.format('up{{instance="{}",job="{}"}}', "instance", "job")).pivot(
        "legend", index="timestamp", values="value", aggregate_function="first").sort("timestamp")
    wide = wide.with_columns(pl.from_epoch(pl.col("timestamp"), time_unit="s").dt.strftime(
        "%Y-%m-%d %H:%M:%S%.3f").alias("timestamp")).rename({"timestamp": "Time"})
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(wide.columns)
    w.writerows(["" if v is None else v for v in row] for row in wide.iter_rows())
    path = tmp_path / "grafana.csv"
    path.write_text(buf.getvalue())
    assert detect_format(path.read_bytes()) == "csv-grafana"
    (res,) = ingest_path(store, path)
    assert res.status == "loaded", res.error
    assert res.samples == real_long.unique(["timestamp", "instance", "job"]).height
    assert res.note == "times without a zone taken as UTC"
    labels = [orjson.loads(x) for x in store.series("up")["labels"]]
    assert {"instance", "job"} <= set(labels[0])


def test_nvidia_smi_csv(store, fixtures):
    (res,) = ingest_path(store, fixtures / "nvidia_smi_query_gpu.csv")
    assert (res.status, res.format) == ("loaded", "nvidia-smi-csv")
    assert res.samples == 23  # 2 GPUs x 2 rows x 6 numeric fields, one power.draw [N/A]
    util = store.series("DCGM_FI_DEV_GPU_UTIL")
    assert sorted(util["uuid"].to_list()) == ["GPU-1d3b1b2e-8d2f-5c6e-9a0b-6f1e2d3c4b5a",
                                              "GPU-7a8b9c0d-1e2f-3a4b-5c6d-7e8f9a0b1c2d"]
    assert sorted(util["gpu"].to_list()) == ["0", "1"]
    assert set(util["model"].to_list()) == {"NVIDIA A100-SXM4-80GB"}
    for metric in ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP"):
        assert store.series(metric).height == 2
    power = store.query(SAMPLES_OF_METRIC, {"metric": "DCGM_FI_DEV_POWER_USAGE", "start_ms": 0,
                                            "end_ms": 10 ** 14})
    assert sorted(power["value"].to_list()) == [61.02, 312.45, 330.10]
    first = store.query(SAMPLES_OF_METRIC, {"metric": "DCGM_FI_DEV_GPU_UTIL", "start_ms": 0, "end_ms": 10 ** 14})
    assert first["ts_ms"].min() == 1715608931412  # 2024/05/13 14:02:11.412 taken as UTC


def test_long_csv_iso_times_with_zone(store):
    data = (b"time,metric,value,gpu\n2026-01-01T01:00:00+01:00,DCGM_FI_DEV_GPU_UTIL,50,0\n"
            b"2026-01-01T00:01:00Z,DCGM_FI_DEV_GPU_UTIL,60,0\n")
    res = ingest_bytes(store, "z.csv", data)
    assert (res.first_ts_ms, res.last_ts_ms) == (1767225600000, 1767225660000)
    assert res.note is None


@pytest.mark.parametrize("data,line,expect", [
    (b"timestamp,metric,value\n1767225600,up,1\n1767225660,up,abc\n", 3, "value 'abc' is not a number"),
    (b"timestamp,metric,value\n1767225600,up,1\nyesterday,up,2\n", 3, "unreadable time 'yesterday'"),
    (b"Time,a,b\n2026-01-01 00:00:00,1,2\n2026-01-01 00:01:00,1,x\n", 3, "value of 'b' 'x' is not a number"),
])
def test_csv_errors_name_the_line(store, data, line, expect):
    with pytest.raises(IngestError) as err:
        ingest_bytes(store, "bad.csv", data)
    assert err.value.line == line
    assert expect in str(err.value) and str(err.value).startswith(f"bad.csv:{line}: ")


def test_unknown_csv_layout_is_refused(fixtures, store):
    with pytest.raises(IngestError, match="header names no known layout"):
        ingest_bytes(store, "trace.csv", b"container_ip,duty,when\n10.0.0.1,0.5,x\n")
    # ServeGen's headerless client rows are a layout of their own now (tests/test_ingest_servegen.py)
    assert ingest_bytes(store, "chunk-3-trace.csv", b"0,1.33,8.59,Weibull,0.37,0.39\n600,0,0,,0,0\n").format \
        == "servegen-rate"


_ROWS = st.lists(st.lists(st.text(alphabet="ab1 \t", max_size=3), min_size=1, max_size=5), min_size=1, max_size=8)


@settings(max_examples=120, deadline=None)
@given(rows=_ROWS, width=st.integers(1, 4), crlf=st.booleans(), last_newline=st.booleans())
@example(rows=[["a", "b"], [""], ["a"]], width=2, crlf=True, last_newline=False)  # a blank CRLF line, then a short one
def test_a_ragged_row_is_found_where_the_csv_module_reads_it(rows, width, crlf, last_newline) -> None:
    """The comma count of unquoted rows (numpy over the bytes) against Python's csv reader on the
    same bytes: the first row of another width, its line and its field count, blank lines passed."""
    newline = "\r\n" if crlf else "\n"
    body = newline.join(",".join(r) for r in rows) + (newline if last_newline else "")
    assume(body.strip())  # a header over whitespace alone has nothing to count (as before)
    data = (",".join(f"c{i}" for i in range(width)) + newline + body).encode()
    expect = None
    reader = csv.reader(io.StringIO(data.decode(), newline=""))
    for row in reader:
        if row and len(row) != width:
            expect = (reader.line_num, len(row))
            break
    assert ragged_line(data, width) == expect


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=6)),
                min_size=1, max_size=5))
def test_labels_json_reads_back_as_orjson_writes_the_labels(values) -> None:
    """The labels object polars builds for a series, read by orjson, against the dict orjson wrote
    before: every character of a value escaped as JSON, null and empty values left out."""
    names = ['pod', 'we"ird\\name', "gpu\u2028", "ünï", "x\x00y"][:len(values)]
    frame = pl.DataFrame({n: [v] for n, v in zip(names, values)}, schema={n: pl.Utf8 for n in names})
    [got] = frame.select(labels_json(names))["labels"].to_list()
    assert orjson.loads(got) == {n: v for n, v in zip(names, values) if v not in (None, "")}
