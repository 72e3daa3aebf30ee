"""SQL of the sample simulator's store fast path (see ``analytics.sample.export.load_into``)."""

# Samples of a simulated run are unique per (series, ts) and never blank by construction, so
# they skip the staging merge and go straight in (already sorted by series and time).
SAMPLES_INSERT_DIRECT = "INSERT INTO samples SELECT series_id, ts_ms, value FROM sample_fast_in"
