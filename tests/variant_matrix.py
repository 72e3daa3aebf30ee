"""Verdicts across export variants: the tail-event analysis scored on every way a cluster exports.

One **case** is a scenario of the simulator plus a tuple of its export variants
(:mod:`analytics.sample.variants`: an HPA not named after its Deployment, idle GPUs without pod
labels and no kube-state-metrics, ``exported_pod`` labels, 15 s scrapes, a day in UTC+8...).
:func:`run_case` simulates it, loads it into a real in-memory DuckDB store, builds the timelines
and analyses them exactly as a user's store would be, and scores the events against the
simulator's truth (:func:`truth_scoring.score`) with the naive dashboard's reading
beside. :data:`MATRIX` is the list the tests (one seed, short runs) and ``bench/robustness.py``
(longer runs, several seeds, the README's table) both run, so the two cannot drift apart.

A case that misses a target is a finding about the analysis, never a threshold to tune.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from analytics import signals as sg
from truth_scoring import Score, match, pooled, score

TARGETS = {"detection_f1": 0.95, "cause_accuracy": 0.90, "misattribution_f1": 0.90}

# Histogram bounds (ms) of each SLO metric the simulator writes: the tolerance of a p99 check.
_BOUNDS_MS = {sg.VLLM_TTFT: [b * 1000 for b in sg.VLLM_TTFT_BUCKETS_S],
              sg.VLLM_E2E: [b * 1000 for b in sg.VLLM_E2E_BUCKETS_S],
              sg.HTTP_DURATION: [b * 1000 for b in sg.HTTP_DURATION_BUCKETS_S]}


@dataclass(frozen=True)
class Case:
    """A scenario and the export variants applied to it, at the pool size its story is told at
    (:data:`analytics.sample.scenarios.STORY_GPUS`; the run's ``gpus`` otherwise)."""

    scenario: str
    variants: tuple[str, ...] = ()

    @property
    def gpus(self) -> int | None:
        from analytics.sample.scenarios import STORY_GPUS

        return STORY_GPUS.get(self.scenario)

    @property
    def label(self) -> str:
        return (f"{self.scenario}" + (f" + {' + '.join(self.variants)}" if self.variants else "")
                + (f" ({self.gpus} GPUs)" if self.gpus else ""))


# Every single variant on the morning story, the combinations that broke verdicts before (the
# independent export: HPA renamed and no kube-state-metrics pods), the mixed story on the hardest
# ones, the partitioned control, and the compound story (surges inside the batch hold, degraded
# replicas at night) on 48 GPUs, also without autoscaler metrics (a surge then asks, by traffic
# alone, for more replicas than any autoscaler would).
SINGLE = ("hpa-prefix", "hpa-info", "keda", "no-autoscaler", "no-ksm-pods", "exported-labels", "e2e-only",
          "tp2", "scrape-15s", "scrape-30s", "utc8")
MATRIX: tuple[Case, ...] = (
    Case("morning"),
    *(Case("morning", (v,)) for v in SINGLE),
    Case("morning", ("hpa-prefix", "no-ksm-pods")),
    Case("morning", ("no-autoscaler", "no-ksm-pods")),
    Case("morning", ("exported-labels", "hpa-prefix", "no-ksm-pods", "scrape-30s")),
    Case("morning", ("hpa-info", "tp2", "utc8")),
    Case("mixed"),
    Case("mixed", ("hpa-prefix", "no-ksm-pods")),
    Case("mixed", ("exported-labels", "keda", "scrape-15s")),
    Case("partitioned", ("hpa-prefix", "no-ksm-pods")),
    Case("compound"),
    Case("compound", ("no-autoscaler",)),
    Case("compound", ("warmup-5-8", "surge-on-ramp", "hold-outlasts-surge")),
)
# The compound story's scale-up and timing variants one at a time (issue 55): in the bench only,
# the matrix above runs them together.
COMPOUND_SINGLE: tuple[Case, ...] = tuple(Case("compound", (v,)) for v in ("warmup-5-8", "surge-on-ramp",
                                                                          "hold-outlasts-surge"))


@dataclass
class CaseResult:
    """One case's score and what it took."""

    case: Case
    seed: int
    days: int
    score: Score
    seconds: float
    notes: list[str] = field(default_factory=list)
    causes: dict[str, int] = field(default_factory=dict)
    analysis: Any = None  # the EventsAnalysis, for tests that look at evidence and reports
    mixed_share_errors: list[float] = field(default_factory=list)  # per true mixed event found (any cause)

    def meets(self) -> dict[str, bool]:
        s = self.score
        return {"detection_f1": s.detection_f1 >= TARGETS["detection_f1"],
                "cause_accuracy": s.cause_accuracy >= TARGETS["cause_accuracy"],
                "misattribution_f1": s.misattribution_f1 >= TARGETS["misattribution_f1"]}

    def row(self) -> dict[str, Any]:
        s = self.score
        return {"case": self.case.label, "seed": self.seed, "days": self.days, "true": s.n_true,
                "found": s.n_found, "detection_f1": round(s.detection_f1, 3),
                "cause_accuracy": round(s.cause_accuracy, 3),
                "naive_cause_accuracy": round(s.naive_cause_accuracy, 3),
                "misattribution_f1": round(s.misattribution_f1, 3),
                "naive_misattribution_f1": round(s.naive_misattribution_f1, 3),
                "ok": all(self.meets().values()), "seconds": round(self.seconds, 1)}


def run_case(case: Case, *, days: int = 4, gpus: int = 64, seed: int = 1) -> CaseResult:
    """Simulate ``case``, load it into a real store, analyse it as a user's store, and score it."""
    from analytics.events import EventsConfig, analyse
    from analytics.timeline import store_timelines
    from analytics.sample import load_into, simulate, truth, truth_p99
    from analytics.slo import SloTable
    from analytics.store import Store

    t0 = time.perf_counter()
    res = simulate(case.scenario, days=days, gpus=case.gpus or gpus, seed=seed, variants=case.variants)
    tr, tp = truth(res), truth_p99(res)
    slos = {k: v["p99_ms"] for k, v in tr["slos"].items()}
    bounds = {k: _BOUNDS_MS.get(v.get("metric"), []) for k, v in tr["slos"].items()}
    cfg = EventsConfig()
    with Store(":memory:") as st:
        load_into(st, res)
        tl = store_timelines(st, cfg.timeline_config())
    analysis = analyse(tl.services, tl.pool, tl.holdings, cfg=cfg, slos=SloTable.from_ms(slos))
    sc = score(tr, analysis.events, truth_p99=tp, bucket_bounds_ms=bounds)
    causes: dict[str, int] = {}
    for e in analysis.events:
        causes[e.cause] = causes.get(e.cause, 0) + 1
    return CaseResult(case=case, seed=seed, days=days, score=sc, seconds=time.perf_counter() - t0,
                      notes=list(analysis.notes), causes=causes, analysis=analysis,
                      mixed_share_errors=mixed_share_errors(tr, analysis.events))


def mixed_share_errors(tr: dict[str, Any], events: Sequence[Any]) -> list[float]:
    """For each true ``mixed`` event matched by a found one (whatever cause it was given): the
    larger distance between the found and the true batch and traffic shares."""
    out = []
    for i, j in match(tr["events"], events):
        te, fe = tr["events"][i], events[j]
        if te["cause"] == "mixed" and "shares" in te:
            out.append(max(abs(fe.shares.get(k, 0.0) - te["shares"].get(k, 0.0))
                           for k in ("batch_contention", "traffic_surge")))
    return out


def format_table(results: Sequence[CaseResult]) -> str:
    """A Markdown table of the results, one row per case and seed, pooled rows per case below."""
    head = ("| case | seed | true / found | detection F1 | cause accuracy (naive) | misattribution F1 (naive) "
            "| targets |\n|---|---|---|---|---|---|---|")
    lines = [head]
    for r in results:
        s = r.score
        lines.append(f"| {r.case.label} | {r.seed} | {s.n_true} / {s.n_found} | {s.detection_f1:.2f} | "
                     f"{s.cause_accuracy:.2f} ({s.naive_cause_accuracy:.2f}) | {s.misattribution_f1:.2f} "
                     f"({s.naive_misattribution_f1:.2f}) | {'met' if all(r.meets().values()) else 'MISSED'} |")
    return "\n".join(lines)


def pooled_by_case(results: Sequence[CaseResult]) -> dict[str, Score]:
    """Each case's runs (seeds) added up."""
    out: dict[str, list[Score]] = {}
    for r in results:
        out.setdefault(r.case.label, []).append(r.score)
    return {k: pooled(v) for k, v in out.items()}
