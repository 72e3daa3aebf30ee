"""What-if charts: the SLO line on a log axis, as drawn on the server for an SVG export."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from analytics.charts.whatif import typical_day_figure
from analytics.whatif import PRESETS, compare
from analytics.whatif.ledger import typical_day

CHROMIUM = Path("/usr/bin/chromium")


def test_typical_day_slo_is_a_line_not_an_annotation() -> None:
    scn = PRESETS["morning-ramp"](2)
    fig = typical_day_figure(typical_day(scn, compare(scn, ("shared", "tidal"))), scn.service.slo_ms)
    assert not fig.layout.annotations  # add_hline's label lands at 10^y on a log axis
    slo = [t for t in fig.data if t.name == f"SLO {scn.service.slo_ms:g} ms"]
    assert slo and set(slo[0].y) == {scn.service.slo_ms}


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium for Kaleido")
def test_typical_day_export_keeps_a_sane_log_range(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROWSER_PATH", str(CHROMIUM))
    scn = PRESETS["morning-ramp"](2)
    day = typical_day(scn, compare(scn, ("shared", "tidal")))
    fig = typical_day_figure(day, scn.service.slo_ms)
    # The ranges Plotly computes when it draws the figure on the server (SVG/PNG export).
    lo, hi = fig.full_figure_for_development(warn=False).layout.yaxis.range
    top = max(day["p99_ms"].max(), scn.service.slo_ms)
    assert hi < math.log10(10 * top), (lo, hi)  # was 98 (1e98) with add_hline's label
