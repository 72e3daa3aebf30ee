"""The tail event: what was found, its cause, its shares and the evidence, in the CLI's shape."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from analytics.text import html_card
from analytics.times import iso_utc  # noqa: F401 (events' JSON writes times with it; re-exported)


# ``ev-`` and the first 12 hex digits of a SHA-256: what :func:`event_id` writes, and all it writes.
EVENT_ID = re.compile(r"ev-[0-9a-f]{12}")


def event_id(service: str, start_ms: int, settings: dict[str, Any]) -> str:
    """A stable id: the same service, start and settings always give the same id (a digest:
    the id says which event it is only to the analysis that found it with those settings)."""
    blob = orjson.dumps({"service": service, "start_ms": int(start_ms), "settings": settings},
                        option=orjson.OPT_SORT_KEYS)
    return "ev-" + hashlib.sha256(blob).hexdigest()[:12]


def is_event_id(text: str) -> bool:
    """True when ``text`` is written as :func:`event_id` writes ids (checked before any analysis).

    >>> is_event_id("ev-ce8139764b2e"), is_event_id("ev-nope"), is_event_id("EV-CE8139764B2E")
    (True, False, False)
    """
    return EVENT_ID.fullmatch(text) is not None


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

    @property
    def cause_words(self) -> str:
        """The cause as a reader says it (``batch_contention`` -> ``batch contention``)."""
        return self.cause.replace("_", " ")

    def _repr_html_(self) -> str:
        """The event as a notebook cell shows it: when, how bad, the cause and its shares."""
        slo = f"{self.slo_ms:g} ms" if self.slo_ms == self.slo_ms else "none (the relative rule)"
        return html_card(
            f"Tail event {self.id}: {self.service} (pool {self.pool})",
            [f"{iso_utc(self.start_ms)} to {iso_utc(self.end_ms)}, {self.duration_min:.0f} min; "
             f"p99 peaked at {self.peak_p99_ms:,.0f} ms against an SLO of {slo}.",
             f"Cause: {self.cause_words}" + (" (misattributed: a dashboard blames users)" if self.misattributed
                                             else "") + "."],
            ["share of the excess latency", "value"],
            [[k.replace("_", " "), f"{v:.0%}"] for k, v in self.shares.items()])

    def as_dict(self) -> dict[str, Any]:
        """The CLI / JSON contract: one object per event."""
        return {"id": self.id, "service": self.service, "start": iso_utc(self.start_ms),
                "end": iso_utc(self.end_ms), "peak_p99_ms": round(float(self.peak_p99_ms), 3),
                "cause": self.cause, "shares": dict(self.shares),
                "misattributed": bool(self.misattributed), "evidence": self.evidence}
