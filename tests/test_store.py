"""The store: atomic, idempotent loads; duplicate samples; blank sentinels; label normalisation."""

from __future__ import annotations

import polars as pl
import pytest

from analytics.store import Store, series_key


def _series(rows):
    return pl.DataFrame(rows, schema={"skey": pl.Int64, "metric": pl.Utf8, "labels": pl.Utf8}, orient="row")


def _samples(rows):
    return pl.DataFrame(rows, schema={"skey": pl.Int64, "ts_ms": pl.Int64, "value": pl.Float64}, orient="row")


def _parse_basic(sink):
    sink.add_series(_series([(0, "up", '{"job":"a"}'),
                             (1, "dcgm_fi_dev_gpu_util", '{"Hostname":"h1","UUID":"GPU-1","exported_pod":"train-0","pod":"dcgm"}')]))
    sink.add_samples(_samples([(0, 1000, 1.0), (0, 1000, 2.0), (1, 1000, 5.0),
                               (1, 2000, 9223372036854775794.0), (1, 3000, 140737488355329.0),
                               (1, 4000, 2147483633.0), (1, 5000, 3.0)]))


def test_load_collapses_duplicates_drops_blanks_and_normalises(store):
    res = store.load("a.prom", "test", "h1", _parse_basic)
    assert res.status == "loaded"
    assert (res.series, res.samples, res.blanks, res.duplicates) == (2, 3, 3, 1)
    samples = store.query("SELECT series_id, ts_ms, value FROM samples ORDER BY series_id, ts_ms")
    up_id = store.series("up")["id"][0]
    assert samples.filter(pl.col("series_id") == up_id)["value"].to_list() == [2.0]  # last wins
    gpu = store.series("DCGM_FI_DEV_GPU_UTIL").row(0, named=True)  # lower-case name canonicalised
    assert (gpu["hostname"], gpu["uuid"], gpu["pod"]) == ("h1", "GPU-1", "train-0")
    assert '"pod":"dcgm"' in gpu["labels"]  # raw labels kept


def test_reload_same_content_is_skipped_and_changes_nothing(store):
    store.load("a.prom", "test", "h1", _parse_basic)
    before = store.query("SELECT * FROM samples ORDER BY ALL")
    res = store.load("a-copy.prom", "test", "h1", _parse_basic)
    assert res.status == "skipped"
    assert store.query("SELECT * FROM samples ORDER BY ALL").equals(before)
    assert store.totals()["sources"] == 1


def test_failure_half_way_leaves_store_as_it_was(store):
    store.load("a.prom", "test", "h1", _parse_basic)
    series_before = store.query("SELECT * FROM series ORDER BY id")
    samples_before = store.query("SELECT * FROM samples ORDER BY ALL")

    def broken(sink):
        sink.add_series(_series([(0, "new_metric", "{}")]))
        sink.add_samples(_samples([(0, 1, 1.0)]))
        raise ValueError("broken at line 7")

    with pytest.raises(ValueError):
        store.load("b.prom", "test", "h2", broken)
    assert store.query("SELECT * FROM series ORDER BY id").equals(series_before)
    assert store.query("SELECT * FROM samples ORDER BY ALL").equals(samples_before)
    failed = store.sources().filter(pl.col("status") == "failed")
    assert failed["name"].to_list() == ["b.prom"] and "line 7" in failed["error"][0]


def test_later_source_overrides_overlapping_samples_and_counts_them(store):
    store.load("a.prom", "test", "h1", _parse_basic)

    def newer(sink):
        sink.add_series(_series([(9, "up", '{"job":"a"}')]))
        sink.add_samples(_samples([(9, 1000, 7.0), (9, 6000, 1.0)]))

    res = store.load("b.prom", "test", "h2", newer)
    assert res.duplicates == 1
    up_id = store.series("up")["id"][0]
    vals = store.query("SELECT ts_ms, value FROM samples WHERE series_id = $id ORDER BY ts_ms", {"id": up_id})
    assert vals.rows() == [(1000, 7.0), (6000, 1.0)]


def test_file_store_persists(tmp_path):
    db = tmp_path / "t.duckdb"
    with Store(db) as st:
        st.load("a.prom", "test", "h1", _parse_basic)
    with Store(db) as st:
        assert st.totals()["samples"] == 3


def test_series_key_is_order_independent():
    assert series_key("m", {"b": "1", "a": "2"}) == series_key("m", {"a": "2", "b": "1"})


def test_duplicate_across_chunks_is_collapsed_last_wins(store):
    def chunked(sink):
        sink.add_series(_series([(0, "up", '{"job":"a"}')]))
        sink.add_samples(_samples([(0, 1000, 1.0), (0, 2000, 2.0)]))
        sink.add_samples(_samples([(0, 2000, 5.0), (0, 3000, 3.0)]))

    res = store.load("c.prom", "test", "h3", chunked)
    assert (res.samples, res.duplicates) == (3, 1)
    assert store.query("SELECT ts_ms, value FROM samples ORDER BY ts_ms").rows() == [
        (1000, 1.0), (2000, 5.0), (3000, 3.0)]


def test_out_of_order_samples_without_duplicates_all_kept(store):
    def shuffled(sink):
        sink.add_series(_series([(0, "up", '{"job":"a"}')]))
        sink.add_samples(_samples([(0, 3000, 3.0), (0, 1000, 1.0), (0, 2000, 2.0)]))

    res = store.load("d.prom", "test", "h4", shuffled)
    assert (res.samples, res.duplicates) == (3, 0)
    assert store.query("SELECT ts_ms, value FROM samples ORDER BY ts_ms").rows() == [
        (1000, 1.0), (2000, 2.0), (3000, 3.0)]
