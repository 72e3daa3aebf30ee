"""Postmortem reports: self-contained HTML, Markdown with its image, escaping of label values."""

from __future__ import annotations

import re

import pytest
from synthetic_frames import SynthDay, SynthSpec, build

from analytics.errors import ConfigError
from analytics.events import analyse
from analytics.events.wording import dashboard_vs_found
from analytics.postmortem import report_html, write_report
from analytics.text import md as md_escape
from analytics.slo import SloTable

EVIL = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def evil():
    days = [SynthDay() for _ in range(4)]
    days[2] = SynthDay(batch_from_min=120, batch_until_min=660)
    spec = SynthSpec(days=days, service="svc" + EVIL, batch_workload="ft" + EVIL, batch_team="t&<b>")
    res = analyse(*build(spec)[:3], slos=SloTable.from_ms({spec.service: 100.0}))
    ev = next(e for e in res.events if e.cause == "batch_contention")
    return res, ev


def test_html_is_self_contained(evil, tmp_path):
    res, ev = evil
    out = tmp_path / "pm.html"
    assert write_report(res, ev, out) == [out]
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    assert "plotly" in text.lower() and len(text) > 1_000_000  # plotly.js is inline
    # Nothing is fetched: no external scripts, stylesheets, images, fonts or imports.
    assert not re.search(r"<script[^>]*\ssrc=", text, re.I)
    assert not re.search(r"<link[^>]*\shref=", text, re.I)
    assert not re.search(r"<img[^>]*\ssrc=[\"']?https?:", text, re.I)
    assert not re.search(r"@import|url\(\s*[\"']?https?:", text, re.I)
    # (plotly.js itself names cdn.plot.ly as the default topojson URL of geo maps; never used here)
    assert 'src="https://cdn.plot.ly' not in text
    # Method, thresholds, evidence and counterfactuals are stated.
    for phrase in ("Method and thresholds", "at least 5 minutes", "less than 10 minutes",
                   "Counterfactuals at the peak", "What the dashboard said / what happened",
                   "HAC / Newey-West", "held since"):
        assert phrase in text, phrase
    assert ev.id in text


def test_label_values_are_escaped_in_html(evil):
    res, ev = evil
    text = report_html(res, ev)
    assert EVIL not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "t&amp;&lt;b&gt;" in text  # the team name, from holdings


def test_markdown_report_with_image_beside_it(evil, tmp_path):
    import dataclasses

    res, ev = evil
    res = dataclasses.replace(res, map_digest="0123456789abcdef")  # as analyse_timelines sets it
    out = tmp_path / "pm.md"
    written = write_report(res, ev, out)
    assert written[0] == out and written[1].suffix == ".png"
    assert written[1].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = out.read_text(encoding="utf-8")
    assert f"]({written[1].name})" in md
    assert EVIL not in md and "&lt;script&gt;alert\\(1\\)&lt;/script&gt;" in md
    assert "## Method and thresholds" in md and "## Evidence" in md
    assert "Workload map digest 0123456789abcdef" in md  # the map it was computed with


def test_bad_extension_is_refused(evil, tmp_path):
    res, ev = evil
    with pytest.raises(ConfigError, match=r"\.html or \.md"):
        write_report(res, ev, tmp_path / "pm.pdf")


def test_dashboard_vs_found_names_the_batch_holder(evil):
    _, ev = evil
    said, happened = dashboard_vs_found(ev)
    assert "user behaviour" in said
    assert "batch held" in happened and "ft" + EVIL in happened  # raw here; renderers escape
    # The two cards agree: the rise the dashboard read is the daily ramp, inside the hour's norm.
    assert "daily ramp" in said and "the norm for that hour, inside its band" in happened, (said, happened)
    assert re.search(r"the pool had \d+ of \d+ GPUs free when it asked", happened), happened


def test_evidence_reads_as_labelled_quantities(evil):
    """The report's evidence is what a meeting reads aloud: labels and units, times in the report's
    zone, the regression's finding as a sentence with its model beside it, no JSON keys."""
    res, ev = evil
    text = report_html(res, ev, tz="Europe/Berlin")
    assert "GPUs free when the autoscaler asked" in text and "free_gpus_when_asked" not in text
    assert "normal_traffic_without_batch" not in text and "hours_held" not in text
    assert re.search(r"held for</th>.*?\d h</td>", text, re.S) or re.search(r"\d(\.\d)? h<", text)
    assert "Europe/Berlin" in text and "for each tenth of the pool batch held" in text


def test_md_escape():
    assert md_escape("a|b") == "a\\|b"
    assert md_escape("<x>") == "&lt;x&gt;"
