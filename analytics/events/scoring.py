"""Scoring found events against a simulator's truth: detection, cause and misattribution.

A found event matches a true one (one to one, same service, largest overlap first) when they
overlap by at least half of the shorter. Detection F1 counts matched pairs; cause accuracy is
over matched pairs; misattribution F1 compares ``misattributed`` with the truth's
``batch_contention`` events that are ``misattributable_by_dashboard``. The naive dashboard
reading (``evidence.naive_reading.cause``) is scored beside it on the same pairs.

Histogram p99 is only known to within its bucket (the contract's tolerance), so an unmatched
found event is *within tolerance* rather than a false positive when the simulator's own p99 inside
it reached the lower bound of the bucket that holds the SLO (``truth_p99`` frame and bucket
bounds given); both the strict and the tolerant precision are reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Sequence

import numpy as np
import polars as pl

from analytics.events.event import Event


def _ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


def _f1(tp: int, n_found: int, n_true: int) -> float:
    if n_found == 0 and n_true == 0:
        return 1.0
    p = tp / n_found if n_found else 0.0
    r = tp / n_true if n_true else 0.0
    return 2 * p * r / (p + r) if p + r else 0.0


@dataclass
class Score:
    """Counts behind the scores of one run (or of several, :func:`pooled`)."""

    n_true: int
    n_found: int
    matched: int
    within_tolerance: int
    cause_correct: int
    naive_cause_correct: int
    mis_true: int
    mis_found: int
    mis_both: int
    confusion: dict[str, int] = field(default_factory=dict)

    @property
    def detection_f1(self) -> float:
        """F1 with found events inside the histogram's tolerance not counted as false."""
        return _f1(self.matched, self.n_found - self.within_tolerance, self.n_true)

    @property
    def detection_f1_strict(self) -> float:
        return _f1(self.matched, self.n_found, self.n_true)

    @property
    def cause_accuracy(self) -> float:
        return self.cause_correct / self.matched if self.matched else 1.0

    @property
    def naive_cause_accuracy(self) -> float:
        return self.naive_cause_correct / self.matched if self.matched else 1.0

    @property
    def misattribution_f1(self) -> float:
        return _f1(self.mis_both, self.mis_found, self.mis_true)

    @property
    def naive_misattribution_f1(self) -> float:
        """The naive dashboard believes its own reading: it flags nothing."""
        return _f1(0, 0, self.mis_true)

    def line(self) -> str:
        return (f"events true={self.n_true} found={self.n_found} matched={self.matched} "
                f"tolerated={self.within_tolerance} | detection F1 {self.detection_f1:.3f} "
                f"(strict {self.detection_f1_strict:.3f}) | cause acc {self.cause_accuracy:.3f} "
                f"(naive dashboard {self.naive_cause_accuracy:.3f}) | misattribution F1 "
                f"{self.misattribution_f1:.3f} (naive {self.naive_misattribution_f1:.3f})")


def pooled(scores: Sequence[Score]) -> Score:
    """Several runs' counts added up (micro-averaged scores)."""
    conf: dict[str, int] = {}
    for sc in scores:
        for k, v in sc.confusion.items():
            conf[k] = conf.get(k, 0) + v
    keys = ("n_true", "n_found", "matched", "within_tolerance", "cause_correct", "naive_cause_correct",
            "mis_true", "mis_found", "mis_both")
    return Score(**{k: sum(getattr(sc, k) for sc in scores) for k in keys}, confusion=conf)


def match(true_events: Sequence[dict[str, Any]], found: Sequence[Event]) -> list[tuple[int, int]]:
    """One-to-one pairs ``(true index, found index)`` overlapping by at least half of the shorter."""
    cands = []
    for i, te in enumerate(true_events):
        ts, tend = _ms(te["start"]), _ms(te["end"])
        for j, fe in enumerate(found):
            if fe.service != te["service"]:
                continue
            ov = min(tend, fe.end_ms) - max(ts, fe.start_ms)
            if ov > 0 and ov >= 0.5 * min(tend - ts, fe.end_ms - fe.start_ms):
                cands.append((ov, i, j))
    pairs, used_t, used_f = [], set(), set()
    for ov, i, j in sorted(cands, reverse=True):
        if i not in used_t and j not in used_f:
            pairs.append((i, j))
            used_t.add(i)
            used_f.add(j)
    return sorted(pairs)


def _tolerated(fe: Event, truth_p99: pl.DataFrame | None, bounds_ms: dict[str, Sequence[float]] | None,
               slos_ms: dict[str, float], min_steps: int) -> bool:
    if truth_p99 is None or not bounds_ms or fe.service not in bounds_ms:
        return False
    slo = slos_ms[fe.service]
    b = np.asarray(sorted(bounds_ms[fe.service]), float)
    lower = float(b[b < slo].max()) if (b < slo).any() else 0.0
    part = truth_p99.filter((pl.col("service") == fe.service) & (pl.col("ts_ms") > fe.start_ms)
                            & (pl.col("ts_ms") <= fe.end_ms + 60_000))
    return int((part["p99_ms"].fill_null(0.0) > lower).sum()) >= min_steps


def score(truth: dict[str, Any], found: Sequence[Event], *, truth_p99: pl.DataFrame | None = None,
          bucket_bounds_ms: dict[str, Sequence[float]] | None = None) -> Score:
    """Score ``found`` against ``truth`` (``analytics.sample.export.truth`` output)."""
    true_events = truth["events"]
    slos = {k: v["p99_ms"] if isinstance(v, dict) else v for k, v in truth.get("slos", {}).items()}
    min_steps = int(truth.get("event_rule", {}).get("min_minutes", 5))
    pairs = match(true_events, found)
    matched_f = {j for _, j in pairs}
    tolerated_set = {j for j, fe in enumerate(found) if j not in matched_f
                     and _tolerated(fe, truth_p99, bucket_bounds_ms, slos, min_steps)}
    tolerated = len(tolerated_set)
    confusion: dict[str, int] = {}
    for i, j in pairs:
        k = f"{true_events[i]['cause']}->{found[j].cause}"
        confusion[k] = confusion.get(k, 0) + 1
    t_set = {i for i, e in enumerate(true_events)
             if e["cause"] == "batch_contention" and e.get("misattributable_by_dashboard")}
    f_set = {j for j, fe in enumerate(found) if fe.misattributed and j not in tolerated_set}
    return Score(n_true=len(true_events), n_found=len(found), matched=len(pairs), within_tolerance=tolerated,
                 cause_correct=sum(true_events[i]["cause"] == found[j].cause for i, j in pairs),
                 naive_cause_correct=sum(true_events[i]["cause"] == found[j].evidence["naive_reading"]["cause"]
                                         for i, j in pairs),
                 mis_true=len(t_set), mis_found=len(f_set),
                 mis_both=sum(1 for i, j in pairs if i in t_set and j in f_set), confusion=confusion)
