"""SQL of the timelines: counter increases per step, GPU holdings per step, and service signals.

Every statement keys samples by integer ``series_id`` and buckets time as the step's END,
``ceil(ts_ms / step_ms) * step_ms``, so a step ``t`` covers ``(t - step, t]``. Label strings
never enter per-sample work: the Python side resolves series to small integer-keyed temp
tables (``tl_*``) first.
"""

# Which step a timestamp falls in, named by the step's end (the step covers (end - step, end]).
STEP_END = "((x.ts_ms + $step_ms - 1) // $step_ms) * $step_ms"

# Data range of the store (for the default time range of a timeline).
# The span of the samples inside the plausible window: a store holding a stray far-future (or
# epoch-zero) sample from before loads refused them still builds timelines over its real span.
DATA_RANGE = """
SELECT min(ts_ms) AS first_ms, max(ts_ms) AS last_ms FROM samples WHERE ts_ms BETWEEN $lo_ms AND $hi_ms
"""

SERIES_OF_METRICS = """
SELECT id AS series_id, metric, gpu, uuid, hostname, model, namespace, pod, container,
       mig_profile, mig_id, labels
FROM series WHERE list_contains($metrics, metric)
ORDER BY id
"""

# Prometheus-style increase per series and step. Each sample's delta is taken against the
# series' previous sample, which may lie in an earlier step (so per-step increases add up to
# the whole range's increase, which window-only `increase()` with one sample per step cannot);
# a drop is a counter reset, after which the new value is the increase. A series' first sample
# counts from zero when the series is new (it appears $new_after_ms or more after the first
# sample of the selected series: a pod that started serving, a labelled histogram child on its
# first observation; Prometheus' created-timestamp zero, VictoriaMetrics' `increase`), and is
# a baseline otherwise (the series existed before the data begins).
# Samples of the steps lie in ($lo_ms, $hi_ms]; $lookback_ms: how far before $lo_ms a
# previous sample may be found (beyond it the first sample in range is a baseline).
_INCREASE_CTE = """
first AS (
    SELECT x.series_id, min(x.ts_ms) AS first_ms
    FROM samples x WHERE x.series_id IN (SELECT series_id FROM tl_counter_series)
    GROUP BY ALL
), x AS (
    SELECT x.series_id, x.ts_ms, x.value,
           lag(x.value) OVER (PARTITION BY x.series_id ORDER BY x.ts_ms) AS prev,
           x.ts_ms = f.first_ms AND f.first_ms >= (SELECT min(first_ms) FROM first) + $new_after_ms AS is_new
    FROM samples x JOIN first f USING (series_id)
    WHERE x.ts_ms > $lo_ms - $lookback_ms AND x.ts_ms <= $hi_ms
)"""
_DELTA = """CASE WHEN x.prev IS NULL THEN (CASE WHEN x.is_new THEN x.value ELSE 0.0 END)
                WHEN x.value >= x.prev THEN x.value - x.prev
                ELSE x.value END"""

COUNTER_INCREASE = f"""
WITH {_INCREASE_CTE}
SELECT x.series_id, {STEP_END} AS ts_end_ms, sum({_DELTA}) AS increase, count(*) AS samples
FROM x
WHERE x.ts_ms > $lo_ms
GROUP BY ALL
ORDER BY x.series_id, ts_end_ms
"""

# Same, summed per group (tl_counter_series.group_id) inside DuckDB: the service timeline's
# bucket increases summed across pods.
COUNTER_INCREASE_BY_GROUP = f"""
WITH {_INCREASE_CTE}
SELECT c.group_id, {STEP_END} AS ts_end_ms, sum({_DELTA}) AS increase
FROM x JOIN tl_counter_series c ON c.series_id = x.series_id
WHERE x.ts_ms > $lo_ms
GROUP BY ALL
ORDER BY c.group_id, ts_end_ms
"""

# The same increases computed in numpy (analytics.timeline.counters.increase_by_group), a chunk of
# series at a time: per series, its first sample time over all data (which decides whether its
# first sample counts from zero), how many samples it has in ($lo_ms - $lookback_ms, $hi_ms]
# (to size the chunks) and whether any value there is NULL; then each chunk's samples, in
# storage order.
COUNTER_SERIES_STATS = """
SELECT x.series_id, min(x.ts_ms) AS first_ms,
       count(*) FILTER (WHERE x.ts_ms > $lo_ms - $lookback_ms AND x.ts_ms <= $hi_ms) AS n,
       count(*) FILTER (WHERE x.value IS NULL) AS nulls
FROM samples x WHERE x.series_id IN (SELECT series_id FROM tl_counter_series)
GROUP BY ALL
ORDER BY x.series_id
"""
COUNTER_SAMPLES = """
SELECT x.series_id, x.ts_ms, x.value
FROM samples x
WHERE x.series_id IN (SELECT series_id FROM tl_counter_series)
  AND x.series_id BETWEEN $first_id AND $last_id
  AND x.ts_ms > $lo_ms - $lookback_ms AND x.ts_ms <= $hi_ms
"""

# --- pool timeline ---------------------------------------------------------------------------
# Device series (dcgm-exporter) with their normalised labels: resolved to instances and holders
# in Python (series-level, small).
DEVICE_SERIES = """
SELECT id AS series_id, metric, gpu, uuid, hostname, model, namespace, pod, mig_profile, mig_id,
       json_extract_string(labels, '$.job') AS job,
       json_extract_string(labels, '$.exported_pod') IS NOT NULL AS has_exported_pod
FROM series WHERE list_contains($metrics, metric)
"""

# Device series kinds, as small integers in tl_dev_series.kind (cheaper to test per sample
# than strings).
KIND_OTHER, KIND_GR_ACTIVE, KIND_UTIL, KIND_FB_USED = 0, 1, 2, 3
# Packing a holder into a key that sorts by time first: (last_ms - step start) * HOLDER_KEY +
# holder code, where the code is holder_id + 1 (0: no pod label). Holder ids must stay below
# HOLDER_KEY - 1; steps up to 2^39 ms (17 years) keep the key inside BIGINT.
HOLDER_KEY = 1 << 24

# One pass over the device samples: per instance, holder and step, the holder's last sample
# time and the instance's last activity / memory values.
DEVICE_STEPS = f"""
CREATE OR REPLACE TEMP TABLE tl_dev_step AS
SELECT d.inst_id, d.holder_id, {STEP_END} AS ts_end_ms, max(x.ts_ms) AS last_ms,
       arg_max(x.value, x.ts_ms) FILTER (WHERE d.kind = {KIND_GR_ACTIVE}) AS gr_active,
       arg_max(x.value, x.ts_ms) FILTER (WHERE d.kind = {KIND_UTIL}) AS util_pct,
       arg_max(x.value, x.ts_ms) FILTER (WHERE d.kind = {KIND_FB_USED}) AS fb_used_mib
FROM samples x JOIN tl_dev_series d ON x.series_id = d.series_id
WHERE x.ts_ms > $lo_ms AND x.ts_ms <= $hi_ms
GROUP BY ALL
"""

# Per instance and step, in one aggregation: the highest and the lowest holder code among the
# holders with the latest sample (equal unless several holders share that time: time-slicing),
# the activity (GR_ENGINE_ACTIVE as %, else GPU_UTIL) and memory of the holder seen last.
DEVICE_INST_STEPS = f"""
CREATE OR REPLACE TEMP TABLE tl_dev_inst AS
SELECT inst_id, ts_end_ms,
       max((last_ms - ts_end_ms + $step_ms) * {HOLDER_KEY} + coalesce(holder_id + 1, 0)) AS hi_key,
       max((last_ms - ts_end_ms + $step_ms) * {HOLDER_KEY} + ({HOLDER_KEY - 1} - coalesce(holder_id + 1, 0))) AS lo_key,
       arg_max(coalesce(gr_active * 100.0, util_pct), last_ms) FILTER (
           WHERE gr_active IS NOT NULL OR util_pct IS NOT NULL) AS activity_pct,
       arg_max(fb_used_mib, last_ms) FILTER (WHERE fb_used_mib IS NOT NULL) AS fb_used_mib
FROM tl_dev_step GROUP BY ALL
"""

# Who held each instance at each step: the holders seen at the instance's last sample time in
# the step (a holder change inside a step counts the later holder only; several holders at the
# same time share the device by time-slicing). n_holders = 0: the device had no pod label.
# One holder at the last time (hi code = lo code) is read off tl_dev_inst; only the other
# steps go back to tl_dev_step.
DEVICE_HOLDERS = f"""
CREATE OR REPLACE TEMP TABLE tl_dev_hold AS
WITH k AS (
    SELECT inst_id, ts_end_ms, hi_key % {HOLDER_KEY} AS hi_code,
           {HOLDER_KEY - 1} - lo_key % {HOLDER_KEY} AS lo_code, hi_key // {HOLDER_KEY} + ts_end_ms - $step_ms AS last_ms
    FROM tl_dev_inst
), multi AS (
    SELECT s.inst_id, s.ts_end_ms, s.holder_id
    FROM tl_dev_step s JOIN k ON s.inst_id = k.inst_id AND s.ts_end_ms = k.ts_end_ms AND s.last_ms = k.last_ms
    WHERE k.hi_code <> k.lo_code
), n AS (
    SELECT inst_id, ts_end_ms, count(DISTINCT holder_id) AS n_holders FROM multi GROUP BY ALL
)
SELECT inst_id, ts_end_ms, CASE WHEN hi_code > 0 THEN hi_code - 1 END AS holder_id,
       CAST(hi_code > 0 AS BIGINT) AS n_holders
FROM k WHERE hi_code = lo_code
UNION ALL
SELECT m.inst_id, m.ts_end_ms, m.holder_id, n.n_holders
FROM multi m JOIN n USING (inst_id, ts_end_ms)
WHERE m.holder_id IS NOT NULL OR n.n_holders = 0
"""

# A GPU seen with several holders at one scrape is time-sliced; where its node advertises the
# device plugin's renamed shared resource, that is what its idle capacity is counted in.
TIMESLICED_RESOURCE = """
UPDATE tl_inst SET resource = $shared
WHERE resource = $whole
  AND inst_id IN (SELECT inst_id FROM tl_dev_hold GROUP BY inst_id HAVING max(n_holders) >= 2)
  AND hostname IN (SELECT DISTINCT hostname FROM series
                   WHERE metric = $alloc_metric AND json_extract_string(labels, '$.resource') = $shared)
"""

# kube-state-metrics GPU-like resources per node and step: allocatable and requested by
# scheduled pods whose phase at the step is not known to be other than Running.
KSM_FREE = f"""
CREATE OR REPLACE TEMP TABLE tl_ksm_free AS
WITH res AS (
    SELECT id AS series_id, metric, hostname AS node, namespace, pod,
           json_extract_string(labels, '$.resource') AS resource
    FROM series
    WHERE metric IN ($alloc_metric, $req_metric)
      AND json_extract_string(labels, '$.resource') LIKE 'nvidia_com_%'
      AND hostname IS NOT NULL
), keyed AS (
    -- integer ids for the label tuples (series-level), so no per-sample work groups by strings
    SELECT series_id, metric, node, namespace, pod, resource,
           dense_rank() OVER (ORDER BY metric, node, namespace, pod, resource) AS key_id,
           dense_rank() OVER (ORDER BY node, resource) AS nr_id,
           dense_rank() OVER (ORDER BY namespace, pod) AS pod_id
    FROM res
), keys AS (
    SELECT DISTINCT key_id, metric, nr_id, pod_id FROM keyed
), last AS (
    SELECT k.key_id, {STEP_END} AS ts_end_ms, arg_max(x.value, x.ts_ms) AS value
    FROM samples x JOIN keyed k ON x.series_id = k.series_id
    WHERE x.ts_ms > $lo_ms AND x.ts_ms <= $hi_ms
    GROUP BY ALL
), not_running AS (
    SELECT p.pod_id, n.ts_end_ms
    FROM (SELECT s.namespace, s.pod, {STEP_END} AS ts_end_ms
          FROM samples x JOIN series s ON x.series_id = s.id
          WHERE s.metric = $phase_metric AND json_extract_string(s.labels, '$.phase') <> 'Running'
            AND x.ts_ms > $lo_ms AND x.ts_ms <= $hi_ms
          GROUP BY ALL
          HAVING arg_max(x.value, x.ts_ms) = 1) n
    JOIN (SELECT DISTINCT namespace, pod, pod_id FROM keyed) p
      ON n.namespace IS NOT DISTINCT FROM p.namespace AND n.pod = p.pod
), alloc AS (
    SELECT k.nr_id, l.ts_end_ms, sum(l.value) AS alloc
    FROM last l JOIN keys k USING (key_id) WHERE k.metric = $alloc_metric GROUP BY ALL
), req AS (
    SELECT k.nr_id, l.ts_end_ms, sum(l.value) AS requested
    FROM last l JOIN keys k USING (key_id)
    ANTI JOIN not_running n ON k.pod_id = n.pod_id AND l.ts_end_ms = n.ts_end_ms
    WHERE k.metric = $req_metric
    GROUP BY ALL
)
SELECT nr.node AS hostname, nr.resource, a.ts_end_ms, greatest(a.alloc - coalesce(r.requested, 0), 0) AS free
FROM alloc a LEFT JOIN req r USING (nr_id, ts_end_ms)
JOIN (SELECT DISTINCT nr_id, node, resource FROM keyed) nr USING (nr_id)
"""

# Holdings per step in shares of a GPU: held (per holder), and unlabelled instances split into
# idle, unmanaged and unknown (DESIGN.md "GPU counting"):
# - where kube-state-metrics covers the node (tl_ksm_free has the step), up to its unrequested
#   count of that resource is idle and the rest unknown (requested by a pod dcgm-exporter could
#   not name): requests win;
# - else, from an exporter in Kubernetes mode (it labels pods on some GPU: tl_inst.k8s), a device
#   whose activity and memory say nobody uses it is idle, one they say somebody does is
#   unmanaged (busy, no pod: used outside Kubernetes); with neither reading, unknown;
# - from an exporter that never labels pods, unknown.
HOLDINGS = """
WITH held AS (
    SELECT h.ts_end_ms, i.pool, h.holder_id, sum(i.frac / h.n_holders) AS gpus
    FROM tl_dev_hold h JOIN tl_inst i USING (inst_id)
    WHERE h.holder_id IS NOT NULL
    GROUP BY ALL
), unl_dev AS (
    SELECT h.ts_end_ms, i.pool, i.hostname, i.resource, i.frac, i.k8s,
           (d.activity_pct > $idle_activity_pct OR d.fb_used_mib > $idle_memory_mib) AS busy,
           (d.activity_pct IS NOT NULL OR d.fb_used_mib IS NOT NULL) AS read
    FROM tl_dev_hold h JOIN tl_inst i USING (inst_id)
    LEFT JOIN tl_dev_inst d ON d.inst_id = h.inst_id AND d.ts_end_ms = h.ts_end_ms
    WHERE h.holder_id IS NULL
), unl AS (
    SELECT ts_end_ms, pool, hostname, resource, frac, count(*) AS n,
           count(*) FILTER (WHERE k8s AND read AND NOT coalesce(busy, false)) AS n_quiet,
           count(*) FILTER (WHERE k8s AND coalesce(busy, false)) AS n_busy
    FROM unl_dev GROUP BY ALL
), split AS (
    SELECT u.ts_end_ms, u.pool, u.frac, u.n,
           CASE WHEN f.free IS NOT NULL THEN least(f.free, u.n) ELSE u.n_quiet END AS n_idle,
           CASE WHEN f.free IS NOT NULL THEN 0 ELSE u.n_busy END AS n_unmanaged
    FROM unl u LEFT JOIN tl_ksm_free f
      ON f.hostname = u.hostname AND f.resource = u.resource AND f.ts_end_ms = u.ts_end_ms
), leftover AS (
    -- MIG GPUs whose instances do not use all compute slices: the unconfigured rest is idle
    SELECT s.ts_end_ms, g.pool, sum(g.leftover) AS gpus
    FROM (SELECT DISTINCT h.ts_end_ms, i.gpu_id FROM tl_dev_hold h JOIN tl_inst i USING (inst_id)
          WHERE i.gpu_id IN (SELECT gpu_id FROM tl_gpu WHERE leftover > 0)) s
    JOIN tl_gpu g USING (gpu_id)
    GROUP BY ALL
)
SELECT held.ts_end_ms, held.pool, w.cls, w.team, w.workload, sum(held.gpus) AS gpus
FROM held JOIN tl_holder w USING (holder_id)
GROUP BY ALL
UNION ALL
SELECT ts_end_ms, pool, 'idle', NULL, NULL, sum(n_idle * frac) FROM split GROUP BY ALL HAVING sum(n_idle) > 0
UNION ALL
SELECT ts_end_ms, pool, 'unmanaged', NULL, NULL, sum(n_unmanaged * frac) FROM split GROUP BY ALL
HAVING sum(n_unmanaged) > 0
UNION ALL
SELECT ts_end_ms, pool, 'unknown', NULL, NULL, sum((n - n_idle - n_unmanaged) * frac) FROM split GROUP BY ALL
HAVING sum(n - n_idle - n_unmanaged) > 0
UNION ALL
SELECT ts_end_ms, pool, 'idle', NULL, NULL, gpus FROM leftover
"""

# Activity weighted by each instance's share of a GPU, and memory used, per pool and step.
POOL_DEVICE_STATS = """
SELECT s.ts_end_ms, i.pool,
       sum(s.activity_pct * i.frac) / sum(i.frac) FILTER (WHERE s.activity_pct IS NOT NULL) AS activity_pct,
       sum(s.fb_used_mib) / 1024.0 AS mem_used_gib
FROM tl_dev_inst s JOIN tl_inst i USING (inst_id)
GROUP BY ALL
"""

# Pods pending at a step (phase Pending is the last value 1); which of them want GPUs is decided
# in Python (a pod that requests a GPU-like resource, or another pod of its workload does).
PENDING_PODS = f"""
SELECT s.namespace, s.pod, {STEP_END} AS ts_end_ms
FROM samples x JOIN series s ON x.series_id = s.id
WHERE s.metric = $phase_metric AND json_extract_string(s.labels, '$.phase') = 'Pending'
  AND x.ts_ms > $lo_ms AND x.ts_ms <= $hi_ms
GROUP BY ALL
HAVING arg_max(x.value, x.ts_ms) = 1
"""
GPU_REQUEST_PODS = """
SELECT DISTINCT namespace, pod FROM series
WHERE metric = $req_metric AND json_extract_string(labels, '$.resource') LIKE 'nvidia_com_%'
"""

HAS_METRIC = "SELECT count(*) AS n FROM series WHERE metric = $metric"

# --- service timeline ------------------------------------------------------------------------
# Series of latency histograms, request counters, in-flight gauges and autoscaler gauges, with
# the labels that name their service (series-level only).
SERVICE_SERIES = """
SELECT id AS series_id, metric, namespace, pod,
       json_extract_string(labels, '$.le') AS le,
       json_extract_string(labels, '$.quantile') AS quantile,
       coalesce(json_extract_string(labels, '$.exported_service'),
                json_extract_string(labels, '$.service')) AS service_label,
       coalesce(json_extract_string(labels, '$.horizontalpodautoscaler'),
                json_extract_string(labels, '$.hpa')) AS hpa,
       json_extract_string(labels, '$.deployment') AS deployment,
       json_extract_string(labels, '$.scaletargetref_kind') AS target_kind,
       json_extract_string(labels, '$.scaletargetref_name') AS target_name,
       json_extract_string(labels, '$.model_name') AS model_name
FROM series WHERE list_contains($metrics, metric)
"""

# Gauges per group and step: the sum (and max) over a group's series of each one's last value
# in the step, and how many distinct pods reported. The last values are taken per series (an
# integer key) before the series meet their groups and pods.
GAUGE_BY_GROUP = f"""
WITH last AS (
    SELECT x.series_id, {STEP_END} AS ts_end_ms, arg_max(x.value, x.ts_ms) AS value
    FROM samples x
    WHERE x.series_id IN (SELECT series_id FROM tl_gauge_series)
      AND x.ts_ms > $lo_ms AND x.ts_ms <= $hi_ms
    GROUP BY ALL
)
SELECT g.group_id, l.ts_end_ms, sum(l.value) AS value, max(l.value) AS max_value,
       count(DISTINCT g.pod_id) AS pods
FROM last l JOIN tl_gauge_series g USING (series_id)
GROUP BY ALL
"""

SIGNAL_METRICS = "SELECT DISTINCT metric FROM series"

# GPU keys without a UUID (host and index, compared as a pair: never joined into one text, so
# host a/b GPU c and host a GPU b/c stay two keys) whose device series name more than $few pods,
# and the most pods any one timestamp of theirs holds: a pod-level table loaded without saying
# what a GPU is. Only keys without a UUID are scanned (dcgm-exporter always has one).
SHARED_GPU_KEYS = """
WITH dev AS (
    SELECT id, hostname, gpu, pod
    FROM series
    WHERE list_contains($metrics, metric) AND uuid IS NULL AND pod IS NOT NULL
), wide AS (
    SELECT hostname, gpu FROM dev GROUP BY hostname, gpu HAVING count(DISTINCT pod) > $few
), at_once AS (
    SELECT d.hostname, d.gpu, x.ts_ms, count(DISTINCT d.pod) AS pods
    FROM samples x JOIN dev d ON x.series_id = d.id
    JOIN wide w ON d.hostname IS NOT DISTINCT FROM w.hostname AND d.gpu IS NOT DISTINCT FROM w.gpu
    GROUP BY d.hostname, d.gpu, x.ts_ms
)
SELECT hostname, gpu, max(pods) AS pods_at_once
FROM at_once GROUP BY hostname, gpu HAVING max(pods) > $few
ORDER BY pods_at_once DESC, hostname NULLS FIRST, gpu NULLS FIRST
"""
