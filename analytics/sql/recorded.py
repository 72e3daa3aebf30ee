"""SQL of the timelines read from the rules' recorded series (``tidelens pull`` through the rules).

Per recorded series and step, its last sample in the step (a gauge), with the labels the pool
timeline groups by; label strings are read once per series and step, and the recorded series
are few (per pool, class, team and workload).
"""

from analytics.sql.timeline import STEP_END

RECORDED_LAST = f"""
WITH last AS (
    SELECT x.series_id, {STEP_END} AS ts_end_ms, arg_max(x.value, x.ts_ms) AS value
    FROM samples x
    WHERE x.series_id IN (SELECT id FROM series WHERE list_contains($metrics, metric))
      AND x.ts_ms > $lo_ms AND x.ts_ms <= $hi_ms
    GROUP BY ALL
)
SELECT l.ts_end_ms, s.metric,
       json_extract_string(s.labels, '$.pool') AS pool,
       json_extract_string(s.labels, '$.class') AS cls,
       json_extract_string(s.labels, '$.team') AS team,
       json_extract_string(s.labels, '$.workload') AS workload,
       l.value
FROM last l JOIN series s ON s.id = l.series_id
"""
