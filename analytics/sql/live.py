"""SQL of live pulls: what has been pulled already, per server, query, step and scope."""

LIVE_STATE_CREATE = """
CREATE TABLE IF NOT EXISTS live_state (
    server      VARCHAR NOT NULL,   -- safe URL: no credentials
    query_key   VARCHAR NOT NULL,
    step_ms     BIGINT NOT NULL,
    scope       VARCHAR NOT NULL,
    from_ms     BIGINT NOT NULL,    -- first step end pulled
    to_ms       BIGINT NOT NULL,    -- last step end pulled
    PRIMARY KEY (server, query_key, step_ms, scope)
)
"""

LIVE_STATE_GET = """
SELECT from_ms, to_ms FROM live_state
WHERE server = $server AND query_key = $query_key AND step_ms = $step_ms AND scope = $scope
"""

LIVE_STATE_UPSERT = """
INSERT INTO live_state VALUES ($server, $query_key, $step_ms, $scope, $from_ms, $to_ms)
ON CONFLICT (server, query_key, step_ms, scope) DO UPDATE
SET from_ms = excluded.from_ms, to_ms = excluded.to_ms
"""


# Samples of one metric with their series' raw labels: what a pull left in the store.
SAMPLES_WITH_LABELS = """
SELECT s.metric, s.labels, x.ts_ms, x.value
FROM samples x JOIN series s ON s.id = x.series_id
WHERE s.metric = $metric AND x.ts_ms BETWEEN $start_ms AND $end_ms
ORDER BY s.labels, x.ts_ms
"""

# The latest value of one series before a time: where a running sum continues.
LAST_VALUE_BEFORE = """
SELECT x.value FROM samples x JOIN series s ON s.id = x.series_id
WHERE s.key = $key AND x.ts_ms < $before_ms
ORDER BY x.ts_ms DESC LIMIT 1
"""
