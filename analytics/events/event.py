"""The tail event: what was found, its cause, its shares and the evidence, in the CLI's shape."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import orjson


def iso_utc(ts_ms: int) -> str:
    """ISO-8601 UTC with a ``Z``.

    >>> iso_utc(0)
    '1970-01-01T00:00:00Z'
    """
    dt = datetime.fromtimestamp(ts_ms / 1000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + ("Z" if ts_ms % 1000 == 0 else f".{ts_ms % 1000:03d}Z")


def event_id(service: str, start_ms: int, settings: dict[str, Any]) -> str:
    """A stable id: the same service, start and settings always give the same id."""
    blob = orjson.dumps({"service": service, "start_ms": int(start_ms), "settings": settings},
                        option=orjson.OPT_SORT_KEYS)
    return "ev-" + hashlib.sha256(blob).hexdigest()[:12]


@dataclass
class Event:
    """One tail event of one service: ``[start_ms, end_ms)`` in UTC epoch milliseconds."""

    id: str
    service: str
    pool: str
    start_ms: int
    end_ms: int
    peak_p99_ms: float
    slo_ms: float
    cause: str = "unexplained"
    shares: dict[str, float] = field(default_factory=dict)
    misattributed: bool = False
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def duration_min(self) -> float:
        return (self.end_ms - self.start_ms) / 60_000

    def as_dict(self) -> dict[str, Any]:
        """The CLI / JSON contract: one object per event."""
        return {"id": self.id, "service": self.service, "start": iso_utc(self.start_ms),
                "end": iso_utc(self.end_ms), "peak_p99_ms": round(float(self.peak_p99_ms), 3),
                "cause": self.cause, "shares": dict(self.shares),
                "misattributed": bool(self.misattributed), "evidence": self.evidence}
