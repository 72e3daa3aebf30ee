"""SQL of per-request logs: the ``requests`` table, its merge, and exact per-step statistics.

A request log holds one row per request (many share a timestamp, which ``samples`` would
collapse), so it has a table of its own, keyed to its source. Steps are named by their END as
everywhere else: a request at ``ts_ms`` is in step ``ceil(ts_ms / step) * step``.
"""

# The table exists in every store opened for writing (analytics.sql.store.SCHEMA); a store
# written before request logs existed and opened read-only has none: readers ask first.
HAS_REQUESTS_TABLE = "SELECT count(*) FROM information_schema.tables WHERE table_name = 'requests'"

# Staged by the Sink as ``stage_requests`` (a polars frame scanned in place), merged with the
# id its source got.
REQUESTS_INSERT = """
INSERT INTO requests
SELECT $source_id, ts_ms, service, latency_ms, ttft_ms, error, status, tokens, pod, namespace
FROM stage_requests
"""
STAGE_REQUESTS_SUMMARY = """
SELECT count(*) AS requests, count(DISTINCT service) AS services, min(ts_ms) AS first_ts_ms,
       max(ts_ms) AS last_ts_ms
FROM stage_requests
"""

# The span of the requests inside the plausible window (with DATA_RANGE: a store's span).
REQUESTS_RANGE = """
SELECT min(ts_ms) AS first_ms, max(ts_ms) AS last_ms FROM requests WHERE ts_ms BETWEEN $lo_ms AND $hi_ms
"""

REQUESTS_COUNT = "SELECT count(*) FROM requests"
REQUEST_SERVICE_COUNT = "SELECT count(DISTINCT service) AS services FROM requests"

# One row per service of the logs: what the service timeline and the signal report need.
REQUEST_SERVICES = """
SELECT service, count(*) AS requests, count(*) FILTER (WHERE error) AS errors,
       count(ttft_ms) AS with_ttft, count(latency_ms) AS with_latency,
       count(pod) AS with_pod, count(status) AS with_status,
       mode(namespace) AS namespace, min(ts_ms) AS first_ms, max(ts_ms) AS last_ms
FROM requests
GROUP BY service
ORDER BY service
"""
REQUEST_PODS = "SELECT DISTINCT service, namespace, pod FROM requests WHERE pod IS NOT NULL"

# Per service and step in (lo, hi]: requests, failed requests, pods serving, and the exact
# p50/p95/p99 of the successful requests' latency: quantile_cont interpolates linearly between
# order statistics, numpy's default (tests/test_requests.py checks it against numpy).
# $ttft_services lists the services whose SLO is on time to first token.
REQUEST_STEPS = """
SELECT service,
       ((ts_ms + $step_ms - 1) // $step_ms) * $step_ms AS ts_end_ms,
       count(*) AS requests,
       count(*) FILTER (WHERE error) AS errors,
       count(DISTINCT pod) AS pods,
       quantile_cont(CASE WHEN list_contains($ttft_services, service) THEN ttft_ms ELSE latency_ms END,
                     [0.5, 0.95, 0.99]) FILTER (WHERE NOT error) AS q
FROM requests
WHERE ts_ms > $lo_ms AND ts_ms <= $hi_ms
GROUP BY ALL
ORDER BY service, ts_end_ms
"""

# A new log's rows already in the store (a log loaded again under another name, or two exports
# that overlap): the store has no request id, so a row's key is the hash of every column. Rows
# repeat legitimately (two requests in one millisecond with the same latency), so this counts:
# the k-th copy of a row in the new log is known when the store holds at least k copies of it.
# $lo_ms/$hi_ms: the new log's span (the store's other rows cannot match).
REQUESTS_IN_SPAN = "SELECT count(*) FROM requests WHERE ts_ms BETWEEN $lo_ms AND $hi_ms"
REQUEST_ROWS_KNOWN = """
WITH new AS (
    SELECT row_id, hash(ts_ms::BIGINT, service::VARCHAR, latency_ms::DOUBLE, ttft_ms::DOUBLE, error::BOOLEAN,
                        status::VARCHAR, tokens::DOUBLE, pod::VARCHAR, namespace::VARCHAR) AS h
    FROM stage_requests_new
), old AS (
    SELECT hash(ts_ms::BIGINT, service::VARCHAR, latency_ms::DOUBLE, ttft_ms::DOUBLE, error::BOOLEAN,
                status::VARCHAR, tokens::DOUBLE, pod::VARCHAR, namespace::VARCHAR) AS h, count(*) AS n
    FROM requests WHERE ts_ms BETWEEN $lo_ms AND $hi_ms GROUP BY 1
), hit AS (  -- numbered only where the store holds the row at all: a log beside others costs a join
    SELECT row_id, n, row_number() OVER (PARTITION BY h ORDER BY row_id) AS k FROM new JOIN old USING (h)
)
SELECT row_id FROM hit WHERE k <= n ORDER BY row_id
"""
