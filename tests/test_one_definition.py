"""One definition per number, held by reading the source (a rule the docs state is a test).

``analytics/measures.py`` defines minutes over the SLO and GPU-hours once; a second copy is how
the pages came to disagree (a polars ``>`` without the NaN rule, a chart counting its own
steps, GPU-hours as ``step_s / 3600`` arithmetic in five places). These tests read
``analytics/`` and ``pages/`` and fail when either is written again outside its definition.
Times typed by people have their own check (tests/test_times.py), escaping its own
(``analytics.text``), the best policy its own (``measures.best_policy``).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MEASURES = ROOT / "analytics" / "measures.py"

# A value compared with an SLO: `> slo_ms`, `> float(slo)`, `<= slo_s` (the over/within test).
SLO_COMPARE = re.compile(r"[^<>=!]>\s*(float\()?\s*[a-z_.]*slo(_ms|_s)?\b|<=\s*(float\()?\s*[a-z_.]*slo(_ms|_s)?\b")
# Places that compare something else with an SLO, each said once here with what it compares.
NOT_A_P99 = {
    "analytics/events/buckets.py": "histogram bucket bounds on either side of the SLO",
    "analytics/whatif/queueing.py": "each request's response time within the SLO (compliance of requests)",
}
# GPU-hours written as arithmetic: a GPU quantity times a step over 3600, or step_h, or /60 min.
GPU_HOURS = re.compile(r"gpu\w*[^\n]*(/\s*3_?600(\.0)?\b|\*\s*step_h\b|/\s*3\.6e6)"
                       r"|(/\s*3_?600(\.0)?\b|\*\s*step_h\b)[^\n]*gpu"
                       r"|gpu_h\w*\s*\+?=[^\n]*/\s*60(\.0)?\b", re.IGNORECASE)


def _lines(pattern: re.Pattern[str], skip: dict[str, str]) -> list[str]:
    found = []
    for folder in ("analytics", "pages"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            if path == MEASURES or rel in skip:
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                code = line.split("#", 1)[0]
                if code.strip().startswith(">>>"):
                    continue
                if pattern.search(code):
                    found.append(f"{rel}:{n}: {line.strip()}")
    return found


def test_a_p99_is_compared_with_an_slo_only_in_measures() -> None:
    found = _lines(SLO_COMPARE, NOT_A_P99)
    assert not found, "count steps over the SLO with analytics.measures.over_slo:\n" + "\n".join(found)


def test_gpu_hours_are_computed_only_in_measures() -> None:
    found = _lines(GPU_HOURS, {})
    assert not found, "compute GPU-hours with analytics.measures.gpu_hours:\n" + "\n".join(found)


def test_the_checks_find_a_second_definition(tmp_path: Path) -> None:
    assert SLO_COMPARE.search('over = float((g["p99_ms"].fill_null(0.0) > slo).sum())')
    assert SLO_COMPARE.search("obs_over = obs > slo_ms")
    assert not SLO_COMPARE.search("if self.slo_ms is not None and not self.slo_ms > 0:")
    assert GPU_HOURS.search("gpu_hours = gpu_sum * step_s / 3600.0")
    assert GPU_HOURS.search('infer_h = float(tr.inference_gpus.sum() * step_h)')
    assert GPU_HOURS.search("run.goodput_gpu_h += kept * g / 60.0")
    assert not GPU_HOURS.search("return (t_s % 86400) / 3600.0")


# Minutes over the SLO from a count of steps: `n * step_min`, `n * step_s / 60`, a step guessed
# from the timestamps' gaps; and a step's violation split between teams by their blame.
MINUTES_FROM_STEPS = re.compile(r"(\*\s*step_min\b|\*\s*\(?(\w+\.)*step_s\s*/\s*60(\.0)?\b|np\.median\(np\.diff\(ts\)\))")
MINUTES_WORDS = re.compile(r"violation|\bover(_slo)?\b|minutes|charged")
TEAM_SPLIT = re.compile(r"blame_by_team\.items\(\)|charged\s*\+=")


def test_minutes_over_the_slo_and_their_split_by_team_only_in_measures() -> None:
    found = [line for line in _lines(MINUTES_FROM_STEPS, {}) if MINUTES_WORDS.search(line.split(":", 2)[2])]
    assert not found, "steps to minutes: analytics.measures.step_minutes:\n" + "\n".join(found)
    found = _lines(TEAM_SPLIT, {})
    assert not found, "a violation by team: analytics.measures.split_violation_by_team:\n" + "\n".join(found)
    assert MINUTES_FROM_STEPS.search('"violation_minutes": float(violation.sum() * step_min),')
    assert MINUTES_FROM_STEPS.search('"minutes_over_slo": float(over[tail].sum()) * cfg.step_s / 60})')
    assert MINUTES_FROM_STEPS.search("step_min = float(np.median(np.diff(ts))) / 60_000.0 if ts.size > 1 else 1.0")
    assert TEAM_SPLIT.search("for team, w in sorted(tr.blame_by_team.items()):")
    assert not MINUTES_FROM_STEPS.search("warm = int(math.ceil(svc.warmup_min / step_min - 1e-9))")


def test_a_weighted_percentile_is_computed_only_in_measures() -> None:
    """Sorting values and accumulating their weights is a weighted percentile: the simulator's
    minute p99s and the backtest's period p99 had one each (measures.weighted_quantile now)."""
    found = []
    for folder in ("analytics", "pages"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if path != MEASURES and "argsort" in text and "cumsum" in text:
                found.append(str(path.relative_to(ROOT)))
    assert not found, "use analytics.measures.weighted_quantile(_rows): " + ", ".join(found)


def test_the_weighted_percentile_is_numpys_inverted_cdf() -> None:
    """measures.weighted_quantile_rows reads whole-weight rows from their top values only (the
    simulator's minute p99s); on ties across the top's edge, rows without weight, few values, weights
    of 0 to 2 and float weights it gives what numpy's weighted quantile (``inverted_cdf``) gives."""
    import numpy as np

    from analytics.measures import weighted_quantile_rows
    from analytics.sample.latency import request_weights

    rng = np.random.default_rng(11)
    top_path = 0
    for trial in range(120):
        rows, k = int(rng.integers(1, 60)), int(rng.choice([4, 40, 200, 333]))
        values = rng.lognormal(size=(rows, k)).astype(rng.choice([np.float32, np.float64]))
        if trial % 3 == 0:
            values = np.round(values, 1)
        n = rng.integers(0, 5000, size=rows)
        n[rng.random(rows) < 0.1] = 0
        weights = rng.integers(0, 3, size=(rows, k)) if trial % 5 == 0 else request_weights(n, k)
        if trial % 7 == 0:
            weights = weights.astype(np.float64)
        for q in (0.99, 0.9):
            ours = weighted_quantile_rows(values, weights, q)
            for i in range(rows):
                want = (np.quantile(values[i].astype(np.float64), q, weights=weights[i], method="inverted_cdf")
                        if weights[i].sum() > 0 else np.nan)
                assert ours[i] == want or (np.isnan(want) and np.isnan(ours[i])), (trial, q, i)
        top_path += k >= 200 and weights.dtype.kind == "i"
    assert top_path > 30  # the top-values path was the one compared, not only the full sort


# A step's start written as arithmetic on its end: `ts - step_ms`, `ts - step_s * 1000`,
# `(ts // 1000 - step_s)`. The analyses go through analytics.times.step_start_ms; the live
# pulls' range chunking and the simulator's export windows do other arithmetic with steps.
STEP_START = re.compile(r"-\s*(\w+\.)?step_ms\b(?!\s*\)?\s*/)|-\s*(\w+\.)?step_s\s*\*\s*1000\b|//\s*1000\)?\s*-\s*(\w+\.)?step_s\b")
ANALYSES = ("analytics/events", "analytics/whatif", "analytics/rhythm", "analytics/overview.py",
            "analytics/review", "analytics/charts", "pages")


def test_a_steps_start_is_computed_only_by_its_definition() -> None:
    found = [line for line in _lines(STEP_START, {}) if line.startswith(ANALYSES)]
    assert not found, "a step's start: analytics.times.step_start_ms:\n" + "\n".join(found)
    assert STEP_START.search("start = int(scenario.start_ts_ms) - step_ms")
    assert STEP_START.search("return float(((obs.ts_ms[idx] // 1000 - obs.step_s) % 86400) / 3600.0)")
