"""The Tail events page in Streamlit's AppTest, on a store built from the project's simulator."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from streamlit.testing.v1 import AppTest  # noqa: E402

from apptest_helpers import click_option, event_chooser, shown, tables  # noqa: E402
from pages._show import TABLE_ROWS  # noqa: E402

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app.py"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TIDELENS_UPLOADS_DB", str(tmp_path / "uploads.duckdb"))
    monkeypatch.setenv("TIDELENS_CONFIG", str(tmp_path / "tidelens.toml"))


@pytest.fixture(scope="module")
def morning_db(simulated_store) -> tuple[Path, str]:
    db, tr = simulated_store("morning", days=3, gpus=64, seed=4)  # the session's one build
    slo = ",".join(f"{k}:{v['p99_ms']:g}" for k, v in tr["slos"].items())
    return db, slo


def _page(db: Path, slo: str) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.query_params.update({"source": "duckdb", "db": str(db), "slo": slo})
    at.run()
    at.switch_page("pages/events.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_page_lists_events_and_explains_one(morning_db) -> None:
    db, slo = morning_db
    at = _page(db, slo)
    assert at.title[0].value == "Tail events"
    n_events = int(next(m.value for m in at.metric if m.label == "Tail events"))
    assert n_events >= 1
    assert int(next(m.value for m in at.metric if m.label == "Batch contention")) >= 1
    table = tables(at)[0].value
    assert 0 < len(table) <= min(n_events, TABLE_ROWS) and "cause" in table.columns
    if len(table) < n_events:  # the first rows; the rest in the CSV
        assert any(c.value == f"{n_events - len(table):,} more rows in the CSV" for c in at.caption)
    box = event_chooser(at)
    assert len(box.options) == n_events
    charts = at.get("plotly_chart")
    assert len(charts) >= 2  # the event's story and the attribution bar
    # Both in the Tidelens theme (large type for a projector), each with its data for export
    assert all(c.proto.theme == "" for c in charts), [c.proto.theme for c in charts]
    assert any(c.proto.id.endswith(f"chart_attribution-{box.value}") for c in charts), [c.proto.id for c in charts]
    texts = " ".join(t.value for t in at.text)
    assert "read as" in texts  # what the dashboard said
    md = " ".join(m.value for m in at.markdown)
    assert "What happened" in md and "What the dashboard said" in md
    # The postmortem takes seconds: a button makes it in the run (its stage in a status), then
    # its download is in the button's place.
    assert not at.get("download_button")
    at.button(key="ev_report_make").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert [b.proto.label for b in at.get("download_button")] == ["Download: Postmortem report (HTML)"]
    assert at.session_state["ev_report_made"][1].startswith("<!DOCTYPE html>")
    # The headline above the controls: how many, and the longest event, with its time and cause.
    headline = next(m.value for m in at.markdown if "tail event" in m.value and "The longest" in m.value)
    assert f"{n_events} tail events" in headline, headline
    # Evidence and method are drawn only when their tab is picked.
    assert [t.label for t in at.tabs] == ["Timeline and attribution", "Evidence", "Method and thresholds"]
    assert len(tables(at)) == 1 and not at.dataframe  # the events table only, static
    at.session_state["ev_view"] = "Evidence"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.get("plotly_chart")
    evidence = {df.value.columns[0]: df.value for df in tables(at)[1:]}
    assert {"team", "fact"} <= set(evidence)
    # Read aloud: labelled quantities with their units, never the JSON's keys.
    facts = dict(zip(evidence["fact"]["fact"], evidence["fact"]["value"]))
    assert not any("_" in f for f in facts), list(facts)
    free = facts["GPUs free when the autoscaler asked"]
    assert " of " in free and "GPU" in free, free
    assert facts["p99 at the peak with normal traffic and no batch"].endswith(" ms")
    assert all(h.endswith(("min", " h")) for h in evidence["team"]["held for"]), list(evidence["team"]["held for"])
    md = " ".join(m.value for m in at.markdown)
    assert "With normal traffic and no batch" in md and "counterfactual" not in md
    assert "p99 ran" in md and "for each tenth of the pool batch held" in md  # the regression's finding
    assert "term" not in evidence and "Newey" not in md  # its model, behind the Method fold
    at.session_state["ev_method_reg"] = True
    at.run()
    reg = {df.value.columns[0]: df.value for df in tables(at)[1:]}["term"]
    assert list(reg.columns) == ["term", "estimate", "95% CI", "p-value"]  # readable numbers, never 38 zeros
    assert all(p == "< 0.001" or len(p) <= 5 for p in reg["p-value"]), list(reg["p-value"])
    assert all(len(x) <= 10 for x in reg["estimate"]), list(reg["estimate"])
    assert any("Newey-West" in c.value for c in at.caption)
    at.session_state["ev_view"] = "Method and thresholds"
    at.run()
    assert any("Shapley" in m.value or "SLO" in m.value for m in at.markdown)


def test_choosing_another_event_and_changing_min_duration(morning_db) -> None:
    db, slo = morning_db
    at = _page(db, slo)
    box = event_chooser(at)
    first = box.value
    if len(box.options) > 1:
        click_option(box, len(box.options) - 1).run()
        assert not at.exception
        assert event_chooser(at).value != first
        assert event_chooser(at).value.startswith("ev-")
    before = int(next(m.value for m in at.metric if m.label == "Tail events"))
    at.session_state["ev_rule"] = True  # the detection rule's panel, drawn only when opened
    at.run()
    at.number_input(key="ev_min_dur").set_value(240.0).run()
    assert not at.exception
    after = [m for m in at.metric if m.label == "Tail events"]
    assert (int(after[0].value) if after else 0) <= before


def test_the_chosen_event_is_in_the_link(morning_db) -> None:
    """A copied link opens the event that was on screen (``?event=<id>``, the id tidelens report takes)."""
    db, slo = morning_db
    at = _page(db, slo)
    ids = event_chooser(at).options
    assert len(ids) >= 2
    click_option(event_chooser(at), len(ids) - 1).run()
    last_id = event_chooser(at).value
    assert at.query_params["event"] == last_id
    again = AppTest.from_file(str(APP), default_timeout=120)
    again.query_params.update({"source": "duckdb", "db": str(db), "slo": slo, "event": last_id})
    again.run()
    again.switch_page("pages/events.py").run()
    assert not again.exception
    assert event_chooser(again).value == last_id


def test_a_link_to_an_event_these_settings_do_not_find_says_so(morning_db) -> None:
    """An id from a link made under another detection rule is said to be missing, not silently
    swapped for another event."""
    db, slo = morning_db
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.query_params.update({"source": "duckdb", "db": str(db), "slo": slo, "event": "ev-000000000000"})
    at.run()
    at.switch_page("pages/events.py").run()
    assert not at.exception, [e.value for e in at.exception]
    said = [w.value for w in at.warning if "ev-000000000000" in w.value]
    assert said and "not among this range's events with these settings" in said[0], [w.value for w in at.warning]
    chooser = event_chooser(at)
    assert chooser.format_func(chooser.value).startswith(_longest(at))  # the headline's event, said so


def _longest(at: AppTest) -> str:
    """How the chooser labels the event the table's minutes (then peak) say is the longest:
    its start and service."""
    table = tables(at)[0].value
    n_events = int(next(m.value for m in at.metric if m.label == "Tail events"))
    assert len(table) == n_events  # every event is in the table: its longest is the range's
    row = table.sort_values(["minutes", "peak p99 (ms)"], ascending=False).iloc[0]
    return f"{pd.Timestamp(row['start']):%Y-%m-%d %H:%M} · {row['service']} · "


def test_the_page_opens_on_the_event_its_headline_names(morning_db) -> None:
    """The headline names the longest event; the chooser and the story below open on it (they
    opened on the first in time, another event than the one the room had just read)."""
    db, slo = morning_db
    at = _page(db, slo)
    chooser = event_chooser(at)
    chosen = chooser.value
    assert chooser.format_func(chosen).startswith(_longest(at))
    # the first in time is another event here: the test tells the two rules apart
    assert chooser.options[0] != chooser.format_func(chosen)
    headline = next(shown(m.value) for m in at.markdown if "The longest" in m.value)
    service = next(c for c in at.subheader if "peak p99" in c.value).value.split(":", 1)[0]
    assert f"The longest: {service} at" in headline
    assert at.query_params["event"] == chosen


def _rule_label(at: AppTest) -> str:
    """The label of the detection rule's panel (it says the rule and the incident records)."""
    return next(p.proto.popover.label for p in at.get("popover") if p.proto.popover.label.startswith("Detection"))


def test_the_detection_panel_keeps_its_rule_and_incident_records_when_folded(morning_db) -> None:
    """The rule and the incident records sit in a panel drawn only when opened (a first render
    pays for no number inputs or uploader); what was set there holds once it is folded again."""
    db, slo = morning_db
    at = _page(db, slo)
    assert not at.number_input and not at.file_uploader  # folded: no widgets of its own
    label = _rule_label(at)
    assert "runs of 5 min or more" in label and "no incident records" in label, label
    first = tables(at)[0].value.iloc[0]
    at.session_state["ev_rule"] = True
    at.run()
    start = pd.Timestamp(first["start"], tz="UTC")
    record = (f"start,end,service,recorded_cause\n{start:%Y-%m-%dT%H:%M}Z,"
              f"{start + pd.Timedelta(minutes=30):%Y-%m-%dT%H:%M}Z,{first['service']},user traffic spike\n")
    at.file_uploader(key="ev_incidents").set_value(("postmortems.csv", record.encode(), "text/csv")).run()
    at.number_input(key="ev_min_dur").set_value(2.0).run()
    assert not at.exception, [e.value for e in at.exception]
    at.session_state["ev_rule"] = False  # folded: the rule and the records still apply
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    label = _rule_label(at)
    assert "runs of 2 min or more" in label and "postmortems.csv" in label, label
    assert "recorded cause" in tables(at)[0].value.columns
    assert "user traffic spike" in set(tables(at)[0].value["recorded cause"])
    assert at.query_params["ev_min"] == "2"
    at.session_state["ev_rule"] = True
    at.run()
    at.button(key="ev_incidents_forget_go").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert "recorded cause" not in tables(at)[0].value.columns
    assert "no incident records" in _rule_label(at)


def test_a_new_session_draws_the_event_without_building_its_figure_again(morning_db, monkeypatch) -> None:
    """Figures are built once per view for every session (pages._caches.memo): a colleague's new
    tab on the same link sends its elements without stopping to build them."""
    import analytics.charts.events as charts

    built: list[str] = []
    real = charts.event_figure
    monkeypatch.setattr(charts, "event_figure", lambda *a, **k: built.append("x") or real(*a, **k))
    db, slo = morning_db
    first = _page(db, slo)
    assert not first.exception and first.get("plotly_chart")
    before = len(built)
    again = _page(db, slo)  # a new session, the same view
    assert not again.exception
    assert len(built) == before  # not built again
    assert [c.proto.spec for c in again.get("plotly_chart")] == [c.proto.spec for c in first.get("plotly_chart")]
