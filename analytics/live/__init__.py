"""Live sources: pulls from Prometheus-compatible servers (``client``, ``queries``, ``pull``).

Local GPUs sampled through NVML live in :mod:`analytics.nvml`.
"""

from analytics.live.client import AuthConfig, ClientConfig, PromClient, PullError, SeriesGuardError
from analytics.live.pull import PullReport, pull, pull_raw
from analytics.promql import PullQuery, Scope, describe, fleet_queries, timeline_queries

__all__ = ["AuthConfig", "ClientConfig", "PromClient", "PullError", "SeriesGuardError",
           "PullReport", "pull", "pull_raw", "PullQuery", "Scope", "describe", "fleet_queries",
           "timeline_queries"]
