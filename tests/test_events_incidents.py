"""Incident records: loading, cause vocabulary, matching to events, and what they change."""

from __future__ import annotations

import polars as pl
import pytest

from analytics.errors import IngestError
from analytics.events import analyse, load_incidents
from analytics.events.incidents import match_incident, normalise_cause
from analytics.slo import SloTable
from synthetic_frames import SynthDay, SynthSpec, build


def test_load_keeps_extra_columns_and_reads_causes(tmp_path):
    f = tmp_path / "inc.csv"
    f.write_text("start,end,service,recorded_cause,owner\n"
                 "2026-01-03T09:40:00Z,2026-01-03T11:00:00Z,chat,User behaviour (noisy morning tail),sre\n"
                 "2026-01-05T14:00:00+00:00,2026-01-05T14:30:00+00:00,chat,batch contention,ml\n")
    inc = load_incidents(f)
    assert inc.columns == ["start_ms", "end_ms", "service", "recorded_cause", "cause_class", "owner"]
    assert inc["cause_class"].to_list() == ["traffic_surge", "batch_contention"]
    assert inc["start_ms"][0] == 1_767_433_200_000
    assert match_incident(inc, "chat", 1_767_433_000_000, 1_767_434_000_000)["owner"] == "sre"
    assert match_incident(inc, "other", 1_767_433_000_000, 1_767_434_000_000) is None


@pytest.mark.parametrize("text, line, what", [
    ("start,end,service\n", 1, "recorded_cause"),
    ("start,end,service,recorded_cause\n2026-01-01T00:00:00Z,2026-01-01T01:00:00Z,a,x\nnot-a-time,2026-01-01T01:00:00Z,a,x\n",
     3, "not-a-time"),
])
def test_bad_files_name_file_line_and_fix(tmp_path, text, line, what):
    f = tmp_path / "bad.csv"
    f.write_text(text)
    with pytest.raises(IngestError) as err:
        load_incidents(f)
    assert str(err.value).startswith(f"{f}:{line}:") and what in str(err.value)


def test_normalise_cause_vocabulary():
    assert normalise_cause("autoscaler warm-up too slow") == "scaling_lag"
    assert normalise_cause("nightly finetune held GPUs") == "batch_contention"
    assert normalise_cause("cosmic rays") == "unexplained"


def test_incident_blaming_users_marks_batch_event_misattributed():
    days = [SynthDay() for _ in range(4)]
    days[2] = SynthDay(batch_from_min=120, batch_until_min=660)
    frames = build(SynthSpec(days=days))[:3]
    plain = analyse(*frames, slos=SloTable.from_ms({"chat": 100.0}))
    ev = next(e for e in plain.events if e.cause == "batch_contention")
    inc = pl.DataFrame({"start_ms": [ev.start_ms], "end_ms": [ev.end_ms], "service": ["chat"],
                        "recorded_cause": ["users"], "cause_class": ["traffic_surge"]})
    res = analyse(*frames, slos=SloTable.from_ms({"chat": 100.0}), incidents=inc)
    hit = res.event(ev.id)
    assert hit.misattributed and hit.evidence["incident"]["as_cause"] == "traffic_surge"
    recorded_batch = inc.with_columns(pl.lit("batch_contention").alias("cause_class"))
    # The same event with a record that got it right: misattributed only through the naive reading.
    res2 = analyse(*frames, slos=SloTable.from_ms({"chat": 100.0}), incidents=recorded_batch)
    assert res2.event(ev.id).misattributed == ev.evidence["naive_reading"]["blames_users"]

