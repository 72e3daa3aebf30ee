"""The two derived timelines every analysis reads: per pool and per service, at a chosen step.

- :func:`pool_timeline` / :func:`holdings`: GPUs in each pool and who held them (by class,
  team, workload), idle vs unknown, activity, memory, pending pods.
- :func:`service_timeline`: request rate, p50/p95/p99 (``histogram_quantile`` over bucket
  increases summed across pods), running/waiting requests, serving/desired/ready replicas.
- :func:`timelines`: all three from one pass over the device samples (what the app and the
  events analysis should call).
- :func:`store_timelines`: :func:`timelines` built once per store file, range, step and map (the
  CLI, the review, the backtest; the app caches across sessions with the same call).
- :func:`slice_timelines`: a sub-range's timelines cut from a covering range's, equal to
  building them, without reading the store again.
- :func:`signal_report`: which recognised signals a store has, and what each missing one costs.
- :func:`autoscaler_links`: which service each HPA and Deployment was linked to, and by which rule.
- :func:`class_rules`: how each exporter's GPUs without a pod label are classed.

Counter and histogram semantics live in :mod:`analytics.timeline.counters`; the workload map in
:mod:`analytics.workloads`; SQL in :mod:`analytics.sql.timeline`.
"""

from analytics.timeline.cache import store_timelines
from analytics.timeline.combined import Timelines, timelines
from analytics.timeline.config import TimelineConfig, parse_step_s
from analytics.timeline.counters import histogram_quantile, histogram_quantiles, increase, rate
from analytics.timeline.facts import TimelineFacts
from analytics.timeline.inventory import shared_gpu_keys, signal_report
from analytics.timeline.pool import class_rules, holdings, pool_timeline
from analytics.timeline.service import autoscaler_links, service_timeline
from analytics.timeline.slicing import slice_timelines

__all__ = ["TimelineConfig", "parse_step_s", "increase", "rate", "histogram_quantile", "histogram_quantiles",
           "holdings", "pool_timeline", "service_timeline", "signal_report", "Timelines", "timelines",
           "slice_timelines", "store_timelines", "TimelineFacts", "autoscaler_links", "class_rules", "shared_gpu_keys"]
