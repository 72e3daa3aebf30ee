"""Tail events of inference services, their attribution to batch contention or traffic, and evidence.

The question it answers: when a service's p99 broke its SLO, was it the users (traffic above its
norm), a batch job holding the pool's GPUs, the autoscaler's warm-up, or none of these the data
can show? Method (DESIGN.md, "Tail events and attribution"):

1. :mod:`~analytics.events.detect` finds runs above the SLO (never against latency's own
   seasonal profile, which would call a daily morning tail normal);
2. :mod:`~analytics.events.latency_model` fits L(T, C) on uncontended steps;
3. :mod:`~analytics.events.norm` gives normal traffic T0 (the norm band);
4.-6. :mod:`~analytics.events.attribute` computes capacity without batch C0, the Shapley shares
   and the cause;
7. :mod:`~analytics.events.evidence` collects what a postmortem can cite;
8. misattribution compares with the naive dashboard reading and with incident records
   (:mod:`~analytics.events.incidents`).

:func:`analyse` runs on timeline frames; :func:`analyse_store` on a store.
"""

from analytics.events.analysis import EventsAnalysis, analyse
from analytics.events.config import CAUSES, SHARE_KEYS, EventsConfig
from analytics.events.event import Event, event_id, iso_utc
from analytics.events.incidents import load_incidents
from analytics.events.pipeline import analyse_store

__all__ = ["CAUSES", "SHARE_KEYS", "Event", "EventsAnalysis", "EventsConfig", "analyse", "analyse_store", "event_id",
           "iso_utc", "load_incidents"]
