"""SQL of the store: schema, staging, the atomic merge of one source, and inventory queries."""

SCHEMA = """
CREATE SEQUENCE IF NOT EXISTS source_ids START 1;
CREATE TABLE IF NOT EXISTS sources (
    id            BIGINT PRIMARY KEY,
    name          VARCHAR NOT NULL,
    format        VARCHAR NOT NULL,
    content_hash  VARCHAR NOT NULL,
    loaded_at     TIMESTAMPTZ NOT NULL,
    series        BIGINT,
    samples       BIGINT,
    first_ts_ms   BIGINT,
    last_ts_ms    BIGINT,
    status        VARCHAR NOT NULL,   -- loaded | failed
    error         VARCHAR,
    duplicates    BIGINT DEFAULT 0,   -- same series+ts with a different value: last loaded kept
    blanks        BIGINT DEFAULT 0,   -- DCGM blank sentinels dropped as missing
    note          VARCHAR
);
CREATE TABLE IF NOT EXISTS series (
    id           BIGINT PRIMARY KEY,
    key          VARCHAR NOT NULL UNIQUE,  -- metric + sorted raw labels, canonical JSON
    metric       VARCHAR NOT NULL,
    gpu          VARCHAR,
    uuid         VARCHAR,
    hostname     VARCHAR,
    model        VARCHAR,
    namespace    VARCHAR,
    pod          VARCHAR,
    container    VARCHAR,
    mig_profile  VARCHAR,
    mig_id       VARCHAR,
    labels       VARCHAR NOT NULL          -- every raw label as a JSON object
);
CREATE TABLE IF NOT EXISTS samples (
    series_id  BIGINT NOT NULL,
    ts_ms      BIGINT NOT NULL,            -- UTC epoch milliseconds
    value      DOUBLE
);
-- Per-request logs (analytics.ingest.requests): one row per request, many per timestamp; the
-- service timeline takes a service's traffic and latency from them where they cover a step.
CREATE TABLE IF NOT EXISTS requests (
    source_id   BIGINT NOT NULL,            -- sources.id of the log it came from
    ts_ms       BIGINT NOT NULL,            -- UTC epoch ms, as the log states it (usually its end)
    service     VARCHAR NOT NULL,
    latency_ms  DOUBLE,                     -- the request's whole latency
    ttft_ms     DOUBLE,                     -- time to first token, where the log has it
    error       BOOLEAN NOT NULL,           -- failed (5xx, 429, or the log's own error flag)
    status      VARCHAR,
    tokens      DOUBLE,
    pod         VARCHAR,
    namespace   VARCHAR
);
-- SLOs the data declares for its services (the bundled sample writes its scenario's): read by
-- the app and the CLI alike, after the user's settings and tidelens.toml.
CREATE TABLE IF NOT EXISTS slos (
    service    VARCHAR PRIMARY KEY,
    p99_ms     DOUBLE NOT NULL,
    metric     VARCHAR,
    source     VARCHAR NOT NULL
);
"""
HAS_SLOS_TABLE = "SELECT count(*) FROM information_schema.tables WHERE table_name = 'slos'"
SLOS = "SELECT service, p99_ms, metric, source FROM slos ORDER BY service"
SLO_UPSERT = """
INSERT OR REPLACE INTO slos (service, p99_ms, metric, source) VALUES ($service, $p99_ms, $metric, $source)
"""

# stage_samples and stage_series are no tables: the Sink registers its buffered polars frames
# under those names, and the merge scans them in place (10M samples: ~0.35 CPU-s of INSERT into a
# temp table saved; 2M series: 530 MB of temp table).
STAGE_DROP = "DROP TABLE IF EXISTS stage_map"
STAGE_FINAL_DROP_TABLE = "DROP TABLE IF EXISTS stage_final"
STAGE_FINAL_DROP_VIEW = "DROP VIEW IF EXISTS stage_final"

SOURCE_BY_HASH = "SELECT id, status FROM sources WHERE content_hash = $hash AND status = 'loaded'"
SERIES_IDS_BY_KEY = "SELECT key, id FROM series WHERE key IN (SELECT key FROM stage_map_in)"
SERIES_MAX_ID = "SELECT coalesce(max(id), 0) FROM series"
SERIES_INSERT = """
INSERT INTO series
SELECT id, key, metric, gpu, uuid, hostname, model, namespace, pod, container, mig_profile,
       mig_id, labels
FROM series_new_in
"""
STAGE_MAP_CREATE = "CREATE OR REPLACE TEMP TABLE stage_map (skey BIGINT, series_id BIGINT)"
STAGE_MAP_INSERT = "INSERT INTO stage_map SELECT skey, series_id FROM stage_map_in"

# DCGM blank values are sentinels for "no data" (int64 2^63-16 .. +3 all round to 2^63 as doubles,
# int32 2147483632..35, fp64 2^47 .. +3): dropped, and counted, for DCGM fields only (dcgm-exporter's
# DCGM_FI_* in any case, and what the Datadog DCGM integration or Tidelens' NVML collector write
# under those names). Any other metric may well hold such a value (a vLLM counter of 2147483633
# requests, node-exporter's 2^47 bytes): it is kept. Reads the staged series of the same load.
BLANK_PREDICATE = """(skey IN (SELECT skey FROM stage_series WHERE upper(metric) LIKE 'DCGM\\_FI\\_%' ESCAPE '\\')
    AND (value = 9223372036854775808.0
    OR value BETWEEN 2147483632.0 AND 2147483635.0
    OR value BETWEEN 140737488355328.0 AND 140737488355331.0))"""

# Fast path (the Sink saw every series' timestamps strictly increase in file order): nothing to
# collapse, and a plain join is ~30x cheaper than the grouping below (10M samples: 0.3 s vs 10 s).
# A view, not a table: the join against the small map is cheaper to run twice (summary, insert)
# than to materialise (10M samples: ~0.3 CPU-s saved).
STAGE_MAP_INJECTIVE = "SELECT count(*) = count(DISTINCT series_id) FROM stage_map"
STAGE_FINAL_FAST = f"""
CREATE OR REPLACE TEMP VIEW stage_final AS
SELECT m.series_id, s.ts_ms, s.value, 1 AS n_values
FROM stage_samples s JOIN stage_map m USING (skey)
WHERE s.value IS NULL OR NOT {BLANK_PREDICATE}
"""
# Slow path: the same series and timestamp more than once; the last in file order wins.
STAGE_FINAL_DEDUP = f"""
CREATE OR REPLACE TEMP TABLE stage_final AS
SELECT m.series_id, s.ts_ms, arg_max(s.value, s.seq) AS value, count(DISTINCT s.value) AS n_values
FROM stage_samples s JOIN stage_map m USING (skey)
WHERE s.value IS NULL OR NOT {BLANK_PREDICATE}
GROUP BY m.series_id, s.ts_ms
"""
STAGE_BLANKS = f"SELECT count(*) FROM stage_samples WHERE {BLANK_PREDICATE}"
STAGE_SUMMARY = """
SELECT count(*) AS samples, count(DISTINCT series_id) AS series, min(ts_ms) AS first_ts_ms,
       max(ts_ms) AS last_ts_ms, count(*) FILTER (WHERE n_values > 1) AS conflicts
FROM stage_final
"""
STAGE_TOUCHES_OLD = "SELECT count(*) FROM stage_map WHERE series_id <= $old_max_id"
# Samples already in the store for the same series and timestamp: replaced by the newer load.
EXISTING_CONFLICTS = """
SELECT count(*) FILTER (WHERE o.value IS DISTINCT FROM f.value) AS changed, count(*) AS overlapping
FROM samples o JOIN stage_final f ON o.series_id = f.series_id AND o.ts_ms = f.ts_ms
WHERE o.series_id <= $old_max_id
"""
DELETE_OVERLAP = """
DELETE FROM samples o USING stage_final f
WHERE o.series_id = f.series_id AND o.ts_ms = f.ts_ms AND o.series_id <= $old_max_id
"""
SAMPLES_INSERT = "INSERT INTO samples SELECT series_id, ts_ms, value FROM stage_final"

SOURCE_DELETE_FAILED = "DELETE FROM sources WHERE content_hash = $hash AND status = 'failed'"
SOURCE_INSERT = """
INSERT INTO sources (id, name, format, content_hash, loaded_at, series, samples, first_ts_ms,
                     last_ts_ms, status, error, duplicates, blanks, note)
VALUES (nextval('source_ids'), $name, $format, $hash, now(), $series, $samples, $first_ts_ms,
        $last_ts_ms, $status, $error, $duplicates, $blanks, $note)
RETURNING id
"""

# Times a calendar holds (years 1..9999): a stray sample older loads let in is shown as null,
# never an overflow that stops the listing.
_CALENDAR = "BETWEEN -62135596800000 AND 253402300799999"
SOURCES_LIST = f"""
SELECT id, name, format, content_hash, loaded_at, series, samples,
       CASE WHEN first_ts_ms {_CALENDAR} THEN make_timestamp(first_ts_ms * 1000) END AS first_ts,
       CASE WHEN last_ts_ms {_CALENDAR} THEN make_timestamp(last_ts_ms * 1000) END AS last_ts,
       status, error, duplicates, blanks, note
FROM sources ORDER BY id
"""
SERIES_LIST = """
SELECT id, metric, gpu, uuid, hostname, model, namespace, pod, container, mig_profile, mig_id, labels
FROM series WHERE ($metric IS NULL OR metric = $metric) ORDER BY metric, id
"""
METRICS_INVENTORY = f"""
SELECT s.metric, count(DISTINCT s.id) AS series, count(*) AS samples,
       CASE WHEN min(x.ts_ms) {_CALENDAR} THEN make_timestamp(min(x.ts_ms) * 1000) END AS first_ts,
       CASE WHEN max(x.ts_ms) {_CALENDAR} THEN make_timestamp(max(x.ts_ms) * 1000) END AS last_ts
FROM series s JOIN samples x ON x.series_id = s.id
GROUP BY s.metric ORDER BY s.metric
"""
TOTALS = """
SELECT (SELECT count(*) FROM series) AS series, (SELECT count(*) FROM samples) AS samples,
       (SELECT count(*) FROM sources WHERE status = 'loaded') AS sources
"""
SAMPLES_OF_METRIC = """
SELECT x.series_id, x.ts_ms, x.value
FROM samples x JOIN series s ON s.id = x.series_id
WHERE s.metric = $metric AND x.ts_ms >= $start_ms AND x.ts_ms <= $end_ms
ORDER BY x.series_id, x.ts_ms
"""

# Every object in the store's own catalog (not the system's, not this connection's temp objects),
# as (kind, schema, name, definition): what analytics.store_file compares with what Tidelens
# writes before anything reads the store. A sequence's definition holds its current value, so
# sequences are compared by name alone.
CATALOG_OBJECTS = """
SELECT 'table' AS kind, schema_name, table_name AS name, sql FROM duckdb_tables()
WHERE database_name = current_database()
UNION ALL SELECT 'view', schema_name, view_name, sql FROM duckdb_views()
WHERE database_name = current_database() AND NOT internal
UNION ALL SELECT 'sequence', schema_name, sequence_name, NULL FROM duckdb_sequences()
WHERE database_name = current_database()
UNION ALL SELECT 'index', schema_name, index_name, sql FROM duckdb_indexes()
WHERE database_name = current_database()
UNION ALL SELECT replace(function_type, '_', ' '), schema_name, function_name, macro_definition
FROM duckdb_functions() WHERE database_name = current_database() AND NOT internal
UNION ALL SELECT 'type', schema_name, type_name, NULL FROM duckdb_types()
WHERE database_name = current_database() AND NOT internal
UNION ALL SELECT 'schema', schema_name, schema_name, NULL FROM duckdb_schemas()
WHERE database_name = current_database() AND schema_name <> 'main'
"""
# One table's columns as the store declares them: what a refusal names when a table differs.
TABLE_COLUMNS = """
SELECT column_name, data_type, column_default, is_nullable FROM duckdb_columns()
WHERE database_name = current_database() AND schema_name = 'main' AND table_name = $table
ORDER BY column_index
"""
# Loaded sources whose note carries a phrase (a histogram that is not one: analytics.ingest.om_check).
SOURCE_NOTES_WITH = """
SELECT name, note FROM sources
WHERE status = 'loaded' AND note IS NOT NULL AND contains(note, $phrase)
ORDER BY id
"""
