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

:func:`score_banded` is the contract's tolerance applied to the truth itself: every minute is
clearly above, clearly below or ambiguous (true p99 inside the bucket band around the SLO);
events split or bridged across ambiguous minutes match as one, events of ambiguous minutes only
are optional, and no ambiguity excuses a missed clearly-above event or a clearly-below found one
(the rule in full in its docstring).
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
    n_optional: int = 0
    n_attributed: int | None = None  # pairs whose cause is scored; None: the matched pairs

    @property
    def attributed(self) -> int:
        return self.matched if self.n_attributed is None else self.n_attributed

    @property
    def detection_f1(self) -> float:
        """F1 with found events inside the histogram's tolerance not counted as false."""
        return _f1(self.matched, self.n_found - self.within_tolerance, self.n_true)

    @property
    def detection_f1_strict(self) -> float:
        return _f1(self.matched, self.n_found, self.n_true)

    @property
    def cause_accuracy(self) -> float:
        return self.cause_correct / self.attributed if self.attributed else 1.0

    @property
    def naive_cause_accuracy(self) -> float:
        return self.naive_cause_correct / self.attributed if self.attributed else 1.0

    @property
    def misattribution_f1(self) -> float:
        return _f1(self.mis_both, self.mis_found, self.mis_true)

    @property
    def naive_misattribution_f1(self) -> float:
        """The naive dashboard believes its own reading: it flags nothing."""
        return _f1(0, 0, self.mis_true)

    def line(self) -> str:
        opt = f" optional={self.n_optional}" if self.n_optional else ""
        return (f"events true={self.n_true}{opt} found={self.n_found} matched={self.matched} "
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
            "mis_true", "mis_found", "mis_both", "n_optional")
    return Score(**{k: sum(getattr(sc, k) for sc in scores) for k in keys}, confusion=conf,
                 n_attributed=sum(sc.attributed for sc in scores))


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


# --- Tolerance-banded scoring -------------------------------------------------------------------

BELOW, AMBIGUOUS, ABOVE = 0, 1, 2


def slo_band(bounds_ms: Sequence[float], slo_ms: float) -> tuple[float, float]:
    """The p99 band ``(lower, upper]`` the histogram cannot place on either side of ``slo_ms``.

    ``lower`` is the largest bucket bound below the SLO, ``upper`` the smallest above it: the two
    buckets either side of an SLO that is a bound, or the one bucket holding an SLO inside it
    (DESIGN.md contract *percentiles*). No bounds gives the empty band ``(slo, slo]``.

    >>> slo_band([100, 150, 200], 120)
    (100.0, 150.0)
    >>> slo_band([500, 750, 1000, 2500], 1000)
    (750.0, 2500.0)
    """
    b = np.asarray(sorted(bounds_ms), float)
    if b.size == 0:
        return float(slo_ms), float(slo_ms)
    lower = float(b[b < slo_ms].max()) if (b < slo_ms).any() else 0.0
    upper = float(b[b > slo_ms].min()) if (b > slo_ms).any() else float("inf")
    return lower, upper


def minute_labels(p99_ms: np.ndarray, band: tuple[float, float]) -> np.ndarray:
    """Per minute ``ABOVE`` (p99 > upper), ``BELOW`` (p99 <= lower, or no p99) or ``AMBIGUOUS``."""
    lower, upper = band
    p = np.nan_to_num(np.asarray(p99_ms, float), nan=0.0)
    return np.where(p > upper, ABOVE, np.where(p > lower, AMBIGUOUS, BELOW)).astype(np.int8)


@dataclass
class _Group:
    """Events of one side merged across all-ambiguous gaps: step indices ``[a, b)``."""

    a: int
    b: int
    members: list[tuple[int, int, int]]  # (index into the event list, a, b)


def _longest_run(mask: np.ndarray) -> int:
    if not mask.any():
        return 0
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return int((np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)).max())


def _bridgeable(gap: np.ndarray, merge_gap: int) -> bool:
    """Whether two events either side of ``gap`` are one event had its ambiguous minutes been
    above the SLO: the gap has an ambiguous minute (or none at all), no clearly-above minute (a
    detector that skipped one did miss it) and no clearly-below run as long as the event rule's
    merge gap."""
    if gap.size == 0:
        return True
    return (bool((gap == AMBIGUOUS).any()) and not bool((gap == ABOVE).any())
            and _longest_run(gap == BELOW) < merge_gap)


def _groups(ranges: list[tuple[int, int, int]], labels: np.ndarray, merge_gap: int) -> list[_Group]:
    out: list[_Group] = []
    for k, a, b in sorted(ranges, key=lambda r: (r[1], r[2])):
        if out and (a <= out[-1].b or _bridgeable(labels[out[-1].b:a], merge_gap)):
            out[-1].b = max(out[-1].b, b)
            out[-1].members.append((k, a, b))
        else:
            out.append(_Group(a, b, [(k, a, b)]))
    return out


def could_be_events(labels: np.ndarray, *, min_len: int, merge_gap: int) -> list[tuple[int, int]]:
    """Step ranges ``[a, b)`` the truth's event rule gives when every ambiguous minute is above
    the SLO: the most a histogram-based detector can rightly find."""
    from analytics.sample.truth import detect_runs

    return detect_runs(np.asarray(labels, float), 0.5, min_len, merge_gap)


def _ov(a: int, b: int, c: int, d: int) -> int:
    return max(0, min(b, d) - max(a, c))


def _score_service(true_events: list[dict[str, Any]], t_idx: list[int], found: Sequence[Event], f_idx: list[int],
                   ts: np.ndarray, labels: np.ndarray, step_ms: int, *, min_len: int,
                   merge_gap: int) -> dict[str, Any]:
    n = ts.size
    ts0 = int(ts[0]) if n else 0

    def ix(ms: int) -> int:
        return int(np.clip((ms - ts0) // step_ms, 0, n))

    # Truth covers steps with ts in [start, end); a found event steps with ts in (start, end].
    t_rng = [(i, ix(_ms(true_events[i]["start"])), ix(_ms(true_events[i]["end"]))) for i in t_idx]
    f_rng = [(j, min(n, ix(found[j].start_ms) + 1), min(n, ix(found[j].end_ms) + 1)) for j in f_idx]
    t_rng = [r for r in t_rng if r[2] > r[1]]
    f_rng = [r for r in f_rng if r[2] > r[1]]
    tg, fg = _groups(t_rng, labels, merge_gap), _groups(f_rng, labels, merge_gap)
    could = could_be_events(labels, min_len=min_len, merge_gap=merge_gap)

    def required(a: int, b: int) -> bool:
        return bool((labels[a:b] == ABOVE).any())

    cands = []
    for gi, g in enumerate(tg):
        for hi, h in enumerate(fg):
            ov = _ov(g.a, g.b, h.a, h.b)
            if ov > 0 and ov >= 0.5 * min(g.b - g.a, h.b - h.a):
                cands.append((ov, -gi, -hi))
    pairs: list[tuple[int, int]] = []
    used_t: set[int] = set()
    used_f: set[int] = set()
    for _, gi, hi in sorted(cands, reverse=True):
        gi, hi = -gi, -hi
        if gi not in used_t and hi not in used_f:
            pairs.append((gi, hi))
            used_t.add(gi)
            used_f.add(hi)

    res: dict[str, Any] = {"n_true": 0, "n_optional": 0, "n_found": 0, "excused": 0, "tp": [], "fp_units": [],
                            "optional_pairs": []}
    unmatched_found: list[tuple[int, int, list[tuple[int, int, int]]]] = [
        (h.a, h.b, h.members) for hi, h in enumerate(fg) if hi not in used_f]
    for gi, hi in pairs:
        g, h = tg[gi], fg[hi]
        inside = [m for m in h.members if _ov(m[1], m[2], g.a, g.b) > 0]
        # A found piece merged in across ambiguity but off this true event is judged on its own.
        if not inside:  # the spans overlap only across the found group's ambiguous gap
            unmatched_found.append((h.a, h.b, h.members))
            continue
        unmatched_found += [(m[1], m[2], [m]) for m in h.members if m not in inside]
        fa, fb = min(m[1] for m in inside), max(m[2] for m in inside)
        # Merging never hides a miss: every true piece with clearly-above minutes must overlap a
        # found piece (not merely the found group's span).
        if not all(any(_ov(a, b, m[1], m[2]) > 0 for m in inside) for _, a, b in g.members if required(a, b)):
            unmatched_found.append((fa, fb, inside))
            continue
        res["n_found"] += 1
        t_rep = max(g.members, key=lambda m: _ov(m[1], m[2], fa, fb))[0]
        f_rep = max(inside, key=lambda m: _ov(m[1], m[2], g.a, g.b))[0]
        pair = (t_rep, f_rep, [m[0] for m in g.members], [m[0] for m in inside])
        if required(g.a, g.b):
            res["tp"].append(pair)
        else:
            # An event of ambiguous minutes only: finding it is neither a hit nor a false
            # positive, but what it says about the event's cause is still scored.
            res["excused"] += 1
            res["optional_pairs"].append(pair)
    for g in tg:
        if required(g.a, g.b):
            res["n_true"] += 1
        else:
            res["n_optional"] += 1
    res["true_groups"] = [[m[0] for m in g.members] for g in tg if required(g.a, g.b)]
    for a, b, members in unmatched_found:
        res["n_found"] += 1
        if any(_ov(a, b, c, d) >= 0.5 * min(b - a, d - c) for c, d in could):
            res["excused"] += 1
        else:
            res["fp_units"].append([m[0] for m in members])
    return res


def score_banded(truth: dict[str, Any], found: Sequence[Event], *, truth_p99: pl.DataFrame,
                 bucket_bounds_ms: dict[str, Sequence[float]]) -> Score:
    """Score ``found`` with the contract's p99 tolerance applied to the truth.

    Each minute of a service is *clearly above* (the simulator's p99 above the upper bound of
    :func:`slo_band`), *clearly below* (at or under its lower bound, or no p99) or *ambiguous*
    (inside the band: a histogram cannot tell which side of the SLO it is on). Then:

    1. Consecutive true events of a service merge into one group when the truth's own event rule
       would have merged them had the gap's ambiguous minutes been above the SLO: the gap has an
       ambiguous minute, no clearly-above minute and no clearly-below run as long as the rule's
       merge gap (a gap of ambiguous minutes only is the simplest case). Found events merge the
       same way: a split or a bridge across the band is one event.
    2. A true group is *required* when it has a clearly-above minute, else *optional*.
    3. Groups match one to one (same service, largest overlap first) when their step spans
       overlap by at least half of the shorter. Steps are compared on the minute grid: truth
       covers steps with ``ts`` in ``[start, end)``, a found event those in ``(start, end]``.
    4. Strictly: a matched pair counts only if every true piece with clearly-above minutes
       overlaps one of the found pieces that overlap the true group (otherwise the group is a miss and
       the found pieces are judged as unmatched); found pieces of a group that miss the true
       group are judged as unmatched on their own.
    5. A pair with a required group is a hit; with an optional group, excused (no hit, no false).
    6. An unmatched found event is excused when it overlaps, by at least half of the shorter,
       a :func:`could_be_events` run (the truth's event rule with every ambiguous minute above
       the SLO; every true event lies inside one); otherwise it is a false positive. So a
       clearly-below run that merely touches an ambiguous minute is still false.

    ``n_true`` counts required groups, ``n_optional`` optional ones, ``n_found`` found units,
    ``within_tolerance`` the excused ones; :attr:`Score.detection_f1` is the banded F1. Cause
    and naive cause are compared on hits (the true and found pieces overlapping most);
    misattribution counts a true group when any piece is a ``batch_contention`` event
    ``misattributable_by_dashboard`` and a found unit when any piece is ``misattributed``.
    """
    true_events = truth["events"]
    slos = {k: v["p99_ms"] if isinstance(v, dict) else v for k, v in truth.get("slos", {}).items()}
    step_ms = int(truth.get("scrape_s", 60)) * 1000
    rule = truth.get("event_rule", {})
    min_len, merge_gap = int(rule.get("min_minutes", 5)), int(rule.get("merge_gap_minutes", 10))
    services = sorted({e["service"] for e in true_events} | {e.service for e in found})
    total = Score(0, 0, 0, 0, 0, 0, 0, 0, 0, n_attributed=0)
    confusion: dict[str, int] = {}

    def mis_t(i: int) -> bool:
        e = true_events[i]
        return e["cause"] == "batch_contention" and bool(e.get("misattributable_by_dashboard"))

    for svc in services:
        tp = truth_p99.filter(pl.col("service") == svc).sort("ts_ms")
        ts = tp["ts_ms"].to_numpy().astype(np.int64)
        slo = float(slos.get(svc, np.inf))
        labels = minute_labels(tp["p99_ms"].to_numpy(), slo_band(bucket_bounds_ms.get(svc, ()), slo))
        r = _score_service(true_events, [i for i, e in enumerate(true_events) if e["service"] == svc], found,
                           [j for j, e in enumerate(found) if e.service == svc], ts, labels, step_ms,
                           min_len=min_len, merge_gap=merge_gap)
        total.n_true += r["n_true"]
        total.n_optional += r["n_optional"]
        total.n_found += r["n_found"]
        total.within_tolerance += r["excused"]
        total.matched += len(r["tp"])
        total.n_attributed += len(r["tp"]) + len(r["optional_pairs"])
        for t_rep, f_rep, t_all, f_all in r["tp"] + r["optional_pairs"]:
            k = f"{true_events[t_rep]['cause']}->{found[f_rep].cause}"
            confusion[k] = confusion.get(k, 0) + 1
            total.cause_correct += true_events[t_rep]["cause"] == found[f_rep].cause
            total.naive_cause_correct += (true_events[t_rep]["cause"]
                                          == found[f_rep].evidence["naive_reading"]["cause"])
            t_m, f_m = any(mis_t(i) for i in t_all), any(found[j].misattributed for j in f_all)
            total.mis_found += f_m
            total.mis_both += t_m and f_m
        total.mis_true += sum(any(mis_t(i) for i in g) for g in r["true_groups"])
        total.mis_true += sum(any(mis_t(i) for i in p[2]) for p in r["optional_pairs"])
        total.mis_found += sum(any(found[j].misattributed for j in u) for u in r["fp_units"])
    total.confusion = confusion
    return total
