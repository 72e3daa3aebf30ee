"""The horizontal pod autoscaler of one service: desired replicas from observed load.

Scale-up acts at once on the last minute's request rate; scale-down waits out a stabilisation
window (the largest recommendation of the last ``cooldown_min`` minutes wins), as the
Kubernetes HPA's ``scaleDown.stabilizationWindowSeconds`` does.
"""

from __future__ import annotations

import math
from collections import deque

from analytics.sample.cluster import ServiceConfig


class Hpa:
    """Desired replicas of one service, minute by minute."""

    def __init__(self, svc: ServiceConfig) -> None:
        self.svc = svc
        self._recent: deque[int] = deque(maxlen=max(1, svc.cooldown_min))
        self._per_replica_rps = svc.target_util * svc.capacity_rps

    def desired(self, observed_rps: float) -> int:
        """Feed the last minute's request rate; get the replicas wanted now."""
        raw = math.ceil(observed_rps / self._per_replica_rps) if observed_rps > 0 else 0
        raw = min(self.svc.max_replicas, max(self.svc.min_replicas, raw))
        self._recent.append(raw)
        return max(self._recent)
