"""SQL of the rhythm analysis: raw request-rate gauges straight from the store.

Used for traffic that comes as a rate already (e.g. a long CSV ``timestamp, metric, value,
labels...`` of a service's request rate), which the service timeline does not derive.
"""

# Metric names that look like a request rate gauge (not a counter: those go through the
# service timeline's increase()).
RATE_METRICS = r"""
SELECT metric, count(*) AS series
FROM series
WHERE regexp_matches(lower(metric), '(^|[^a-z])(rps|qps|request_rate|requests_per_second|rate_rps|req_rate|request_rps)([^a-z]|$)')
  AND NOT regexp_matches(metric, '_(total|count|sum|bucket)$')
GROUP BY metric
ORDER BY metric
"""

# Per step (ts = end of step, (ts - step, ts]), the last sample of each series, summed over the
# series of one metric: the gauge rule of the contracts.
METRIC_STEP_SUM = """
WITH per_series AS (
    SELECT s.series_id,
           ((s.ts_ms + $step_ms - 1) // $step_ms) * $step_ms AS ts_ms,
           arg_max(s.value, s.ts_ms) AS value
    FROM samples s JOIN series r ON r.id = s.series_id
    WHERE r.metric = $metric AND s.value IS NOT NULL AND NOT isnan(s.value)
    GROUP BY s.series_id, 2
)
SELECT ts_ms, sum(value) AS value, count(*) AS series
FROM per_series
GROUP BY ts_ms
ORDER BY ts_ms
"""

METRIC_STEP_MS = """
SELECT coalesce(median(d), 60000)::BIGINT AS step_ms FROM (
    SELECT s.ts_ms - lag(s.ts_ms) OVER (PARTITION BY s.series_id ORDER BY s.ts_ms) AS d
    FROM samples s JOIN series r ON r.id = s.series_id
    WHERE r.metric = $metric
) WHERE d > 0
"""
