"""SQL of the sample simulator's store fast path (see ``analytics.sample.export.load_into``)."""

# Samples of a simulated run are unique per (series, ts) and never blank by construction, so
# they skip the staging merge and go straight in (already sorted by series and time).
SAMPLES_INSERT_DIRECT = "INSERT INTO samples SELECT series_id, ts_ms, value FROM sample_fast_in"

# The chunked fast path (runs too large to hold at once): the pieces, spilled to Parquet, go in
# with one sort, so the store's rows lie in the same (series, ts) order as the one-piece path.
# ``sample_parts_in`` is an Arrow stream of the pieces registered by the loader: the store's
# connection reads no file itself (analytics.store_file).
SAMPLES_INSERT_SORTED_PARTS = """
INSERT INTO samples
SELECT series_id, ts_ms, value FROM sample_parts_in ORDER BY series_id, ts_ms
"""
