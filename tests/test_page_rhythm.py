"""The Rhythm page in Streamlit's AppTest: it launches on a store with traffic, shows the
peak/trough hours, tidal window and charts, reacts to its sliders, and says when the data's
date and zone are assumptions (the ServeGen trace)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from streamlit.testing.v1 import AppTest  # noqa: E402

from servegen_rate import read_servegen_rate  # noqa: E402
from analytics.store import Sink, Store, content_hash  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app.py"
FIXTURE = Path(__file__).parent / "fixtures" / "servegen_m_large_rate.csv"


def _load_rate(db: Path, name: str, frame: pl.DataFrame) -> Path:
    def parse(sink: Sink) -> None:
        sink.add_series(pl.DataFrame({"skey": [1], "metric": ["request_rate"],
                                      "labels": ['{"model":"m-large","client":"0"}']}))  # as ServeGen's
        sink.add_samples(frame.select(pl.lit(1).alias("skey"), pl.col("ts").dt.epoch("ms").alias("ts_ms"),
                                      pl.col("rps").alias("value")))
    with Store(db) as st:
        st.load(name, "csv-long", content_hash(name.encode()), parse)
    return db


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TIDELENS_UPLOADS_DB", str(tmp_path / "uploads.duckdb"))
    monkeypatch.setenv("TIDELENS_CONFIG", str(tmp_path / "tidelens.toml"))


@pytest.fixture(scope="module")
def synthetic_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    t = np.arange(1, 16 * 288 + 1) * 300  # 16 days at 5 min
    hour = ((t - 150) % 86400) / 3600
    rps = 100 + 60 * np.cos(2 * np.pi * (hour - 14.5) / 24)
    frame = pl.DataFrame({"ts": pl.Series(1_700_438_400_000 + t * 1000).cast(pl.Datetime("ms", "UTC")),
                          "rps": rps})
    return _load_rate(tmp_path_factory.mktemp("rhythm") / "synthetic.duckdb", "chat-rate.csv", frame)


def _rhythm_page(db: Path) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params.update({"source": "duckdb", "db": str(db)})
    at.run()
    at.switch_page("pages/rhythm.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _metric(at: AppTest, label_start: str) -> str:
    for m in at.metric:
        if m.label.startswith(label_start):
            return m.value
    raise AssertionError(f"no metric {label_start!r}: {[m.label for m in at.metric]}")


def test_page_launches_and_shows_the_rhythm(synthetic_db: Path) -> None:
    at = _rhythm_page(synthetic_db)
    assert at.title[0].value == "Rhythm"
    assert _metric(at, "Peak hour") == "14:00"
    assert _metric(at, "Trough hour") == "02:00"
    window = _metric(at, "Tidal window")  # as every hour is shown: a clock's, 22:00-06:00
    assert re.fullmatch(r"\d\d:00-\d\d:00", window), window
    start, end = (int(x[:2]) for x in window.split("-"))
    assert start > end  # the window crosses midnight
    assert at.pills(key="rhythm_signal").value == "metric:request_rate"
    # One view at a time, each drawn only when its tab is picked.
    tabs = [t.label for t in at.tabs]
    assert tabs[:3] == ["Decomposition", "Daily profile", "Hour of week"]
    drawn = [[c.proto.id for c in at.get("plotly_chart")]]
    for tab in tabs[1:]:
        at.session_state["rhythm_view"] = tab
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        drawn.append([c.proto.id for c in at.get("plotly_chart")])
    assert [len(d) for d in drawn[:3]] == [1, 1, 1]
    assert len({d[0] for d in drawn[:3]}) == 3  # a different chart in each view


def test_tidal_share_slider_changes_the_window(synthetic_db: Path) -> None:
    at = _rhythm_page(synthetic_db)
    before = _metric(at, "Tidal window")
    at.slider(key="rhythm_tidal").set_value(0.8).run()
    assert not at.exception
    after = _metric(at, "Tidal window")
    assert after != before
    hours = lambda w: (int(w.split("-")[1][:2]) - int(w.split("-")[0][:2])) % 24  # noqa: E731
    assert hours(after) > hours(before)


def test_servegen_page_says_its_date_and_zone_are_assumed(tmp_path: Path) -> None:
    db = _load_rate(tmp_path / "servegen.duckdb", "servegen-m-large-rate.csv", read_servegen_rate(FIXTURE))
    at = _rhythm_page(db)
    assert any("assumed" in i.value and "Asia/Shanghai" in i.value for i in at.info)
    # 14 days: the weekly period is dropped, and the page says so.
    assert any("daily period only" in c.value for c in at.caption)


def test_the_picked_view_survives_a_visit_to_another_page(synthetic_db: Path) -> None:
    at = _rhythm_page(synthetic_db)
    at.session_state["rhythm_view"] = "Hour of week"
    at.run()
    at.switch_page("pages/overview.py").run()
    at.switch_page("pages/rhythm.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["rhythm_view"] == "Hour of week"
    assert any("hour-of-week" in c.proto.id for c in at.get("plotly_chart"))


def test_one_day_shows_the_hours_it_has_as_no_rhythm_yet(tmp_path: Path, capsys) -> None:
    """A one-day trace (a published serving trace of 23 hours) shows its hour-of-day profile,
    marked "one day: not a rhythm yet", on the page and in the CLI, instead of refusing."""
    import json

    from analytics.cli import main

    t = np.arange(1, 23 * 12 + 1) * 300  # 23 hours at 5 min
    hour = ((t - 150) % 86400) / 3600
    rps = 100 + 60 * np.cos(2 * np.pi * (hour - 14.5) / 24)
    frame = pl.DataFrame({"ts": pl.Series(1_700_438_400_000 + t * 1000).cast(pl.Datetime("ms", "UTC")),
                          "rps": rps})
    db = _load_rate(tmp_path / "one-day.duckdb", "one-day.csv", frame)
    at = _rhythm_page(db)
    said = [i.value.replace("\\", "") for i in at.info]  # Markdown escapes aside
    assert any(s.startswith("One day: not a rhythm yet") and "more than 2 days" in s for s in said), said
    assert not at.warning, [w.value for w in at.warning]
    [chart] = at.get("plotly_chart")
    fig = json.loads(chart.proto.spec)
    assert "not a rhythm yet" in fig["layout"]["title"]["text"]
    [trace] = fig["data"]
    assert len(trace["y"]) == 24 and max(v for v in trace["y"] if v is not None) > 150
    assert main(["rhythm", "--db", str(db), "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["note"] == "one day: not a rhythm yet" and row["peak_hour"] == 14
    assert sum(h["mean"] is not None for h in row["hour_of_day"]) == 23
