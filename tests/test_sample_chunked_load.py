"""The simulator's chunked store load (for runs that do not fit in memory): the same store,
row for row, as the one-piece load."""

from __future__ import annotations

from pathlib import Path

from polars.testing import assert_frame_equal

from analytics.sample.export import load_into
from analytics.sample.sim import simulate
from analytics.store import Store

# Read through the store's own series listing and one join; the test's own query, not the product's.
ROWS = """SELECT s.key, x.ts_ms, x.value
FROM samples x JOIN series s ON s.id = x.series_id ORDER BY s.key, x.ts_ms"""


def test_chunked_load_gives_the_same_store(tmp_path: Path) -> None:
    res = simulate("morning", days=2, gpus=16, seed=3)
    with Store(tmp_path / "whole.duckdb") as whole, Store(tmp_path / "chunks.duckdb") as chunks:
        one = load_into(whole, res)
        many = load_into(chunks, res, chunk_samples=25_000)
        assert (many.status, many.series, many.samples) == (one.status, one.series, one.samples)
        assert one.samples > 25_000 * 10  # really in many pieces
        assert_frame_equal(whole.series().drop("id").sort("labels"), chunks.series().drop("id").sort("labels"))
        assert_frame_equal(whole.query(ROWS), chunks.query(ROWS))
        # Loading the same run again changes nothing.
        assert load_into(chunks, res, chunk_samples=25_000).status == "skipped"
    assert not list(tmp_path.glob("*.parquet")) and not list(tmp_path.glob("*/*.parquet"))
