"""Tail-event verdicts across the simulator's export variants (variant_matrix.MATRIX).

Every case of the matrix (each variant alone on the morning story, the combinations that broke the
verdicts on an independent export, the mixed story, the partitioned control) is simulated for 3
days on one seed (4 until 2026-12-07: every case met the targets at 3 as at 4, with 5-9 true events
each and one on the control), loaded into a real store, analysed as a user's store and scored against the
truth. Each must meet the issue's targets (detection F1 >= 0.95, cause accuracy >= 0.90,
misattribution F1 >= 0.90), with the naive dashboard's reading scored beside it. A case that
misses is a bug in the analysis. ``bench/robustness.py`` runs the same matrix longer, on more seeds.

Measured before the autoscaler links and the idle/unmanaged classes (the code of 8878eb1): 11 of
the 20 cases missed, every one of them with cause accuracy at the naive dashboard's (0.00-0.17) and
misattribution F1 0.00.
"""

from __future__ import annotations

import pytest
from variant_matrix import MATRIX, TARGETS, Case, run_case

from analytics.document import render_markdown
from analytics.events import EventsConfig
from analytics.events.wording import dashboard_vs_found
from analytics.postmortem import report_document

pytestmark = pytest.mark.slow


def cause_disagrees(ev, cfg: EventsConfig) -> str | None:
    """Why ``ev``'s cause contradicts its own shares (None when it does not).

    A factor is material at ``cfg.mixed_share``, or at ``cfg.compound_share`` where traffic surged
    (stayed above its band ``min_duration_min`` in a row): ``mixed`` needs both material; a single
    cause needs its share the larger, the two explaining at least ``cfg.explained_share``, and the
    other not material as well; ``unexplained`` needs the two below ``explained_share``;
    ``scaling_lag`` needs neither material and the replicas the autoscaler wanted to have been
    faster at the peak than the ones it got. Only batch contention is ever misattributed.
    """
    b, t = ev.shares["batch_contention"], ev.shares["traffic_surge"]
    x = cfg.explained_share
    m = (cfg.compound_share if (ev.evidence["traffic_surge_min"] or 0) >= cfg.min_duration_min
         else cfg.mixed_share)
    ok = {"mixed": b >= m and t >= m,
          "batch_contention": b >= t and b + t >= x and t < m,
          "traffic_surge": t > b and b + t >= x and b < m,
          "unexplained": b + t < x,
          "scaling_lag": b < m and t < m and (ev.evidence["counterfactual_p99_ms_at_peak"]["actual_traffic_desired_replicas"]
                                              < ev.evidence["p99_load_explained_ms_at_peak"])}[ev.cause]
    if not ok:
        return f"{ev.cause} with shares {ev.shares}"
    if ev.misattributed and ev.cause != "batch_contention":
        return f"{ev.cause} flagged misattributed"
    return None


@pytest.mark.parametrize("case", MATRIX, ids=[c.label.replace(" + ", "+") for c in MATRIX])
def test_case_meets_the_targets(case: Case, capsys):
    r = run_case(case, days=3, gpus=64, seed=1)
    with capsys.disabled():
        print(f"\n{case.label}: {r.score.line()}\n  {r.score.confusion}")
    s = r.score
    # every event's cause agrees with its own shares (issue 37: a scaling_lag with unexplained 1.00)
    bad = [(e.as_dict()["start"], why) for e in r.analysis.events if (why := cause_disagrees(e, r.analysis.cfg))]
    assert not bad, bad
    assert s.n_true >= 1 and s.matched >= 1
    assert s.detection_f1 >= TARGETS["detection_f1"]
    assert s.cause_accuracy >= TARGETS["cause_accuracy"]
    assert s.misattribution_f1 >= TARGETS["misattribution_f1"]
    if case.scenario != "partitioned":
        # contention stories: the dashboard's reading is wrong where ours is right
        assert s.naive_cause_accuracy <= s.cause_accuracy - 0.5
        assert s.mis_true >= 1 and s.naive_misattribution_f1 == 0.0
    else:
        assert "batch_contention" not in r.causes
    if case.scenario == "compound":
        # surges inside the batch hold: both causes, both shares near the simulator's, never
        # flagged misattributed, the story saying what a dashboard misses; the slow replica at
        # night is unexplained
        mixed = [e for e in r.analysis.events if e.cause == "mixed"]
        assert mixed and r.mixed_share_errors and max(r.mixed_share_errors) <= 0.15
        for e in mixed:
            assert not e.misattributed
            cf = e.evidence["counterfactual_p99_ms_at_peak"]
            # both counterfactual p99s at the peak: without batch, and with normal traffic
            assert cf["actual_traffic_without_batch"] > 0 and cf["normal_traffic_actual_capacity"] > 0
            said, happened = dashboard_vs_found(e)
            assert "would have missed" in happened and f"{e.shares['batch_contention']:.0%}" in happened
        assert "unexplained" in r.causes
    sources = {e.evidence["desired_replicas_source"] for e in r.analysis.events}
    if "no-autoscaler" in case.variants:
        # no HPA signal: desired replicas come from traffic, and the analysis, every event's
        # evidence and its postmortem say so, with the fitted requests/s per replica
        assert any("inferred from traffic" in n for n in r.notes), r.notes
        assert sources and all("inferred from traffic" in x and "requests/s per replica" in x for x in sources)
        ev = next(e for e in r.analysis.events if e.cause == "batch_contention")
        md, _ = render_markdown(report_document(r.analysis, ev))
        assert "inferred from traffic" in md and "Its traffic called for" in md
    else:
        assert not any("inferred from traffic" in n for n in r.notes), r.notes
        assert sources == {"autoscaler"}
