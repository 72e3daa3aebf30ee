"""``tidelens rhythm``: per-signal JSON from a store, traffic loaded as a request-rate series."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import polars as pl
import pytest

from analytics.cli import main
from analytics.rhythm import daily_profile
from analytics.ingest.servegen import SERVEGEN_ZONE
from servegen_rate import read_servegen_rate
from analytics.store import Store, Sink, content_hash

FIXTURE = Path(__file__).parent / "fixtures" / "servegen_m_large_rate.csv"


def load_rate(db: Path, name: str, metric: str, frame: pl.DataFrame,
              labels: str = '{"model":"m-large","client":"0"}') -> None:
    """Put a (ts, rps) frame into the store as one gauge series, as a CSV loader would (by default
    labelled as ServeGen's are: a model and a client, no service)."""
    def parse(sink: Sink) -> None:
        sink.add_series(pl.DataFrame({"skey": [1], "metric": [metric], "labels": [labels]}))
        sink.add_samples(frame.select(pl.lit(1).alias("skey"), pl.col("ts").dt.epoch("ms").alias("ts_ms"),
                                      pl.col("rps").alias("value")))
    with Store(db) as st:
        st.load(name, "csv-long", content_hash(frame.write_csv().encode() + name.encode()), parse)


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict]:
    assert main(["rhythm", *argv, "--json"]) == 0
    return orjson.loads(capsys.readouterr().out)


def test_servegen_rate_from_the_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    traffic = read_servegen_rate(FIXTURE)
    db = tmp_path / "t.duckdb"
    load_rate(db, "servegen-m-large-rate.csv", "request_rate", traffic)
    rows = run_json(capsys, "--db", str(db), "--tz", SERVEGEN_ZONE)
    assert [r["signal"] for r in rows] == ["metric:request_rate"]
    r = rows[0]
    for key in ("peak_hour", "trough_hour", "trough_to_peak", "tidal_window", "timezone"):
        assert key in r
    direct = daily_profile(traffic, "rps", SERVEGEN_ZONE)
    assert r["peak_hour"] == direct["hour"][direct["mean"].arg_max()]
    assert r["trough_hour"] == direct["hour"][direct["mean"].arg_min()]
    assert r["timezone"] == SERVEGEN_ZONE
    assert r["periods_used"] == ["daily"]
    assert any("daily period only" in n for n in r["notes"])
    assert any("assumed" in n and "Asia/Shanghai" in n for n in r["notes"])  # the date/zone caveat


def test_a_services_rate_gauge_is_its_traffic_signal_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A request-rate gauge labelled with its service is that service's traffic (``rps:chat``),
    the same numbers, and not a second ``metric:`` signal beside it."""
    traffic = read_servegen_rate(FIXTURE)
    db = tmp_path / "t.duckdb"
    load_rate(db, "chat-rate.csv", "request_rate", traffic, labels='{"service":"chat"}')
    rows = run_json(capsys, "--db", str(db), "--tz", SERVEGEN_ZONE)
    assert [r["signal"] for r in rows] == ["rps:chat"]
    direct = daily_profile(traffic, "rps", SERVEGEN_ZONE)
    assert rows[0]["peak_hour"] == direct["hour"][direct["mean"].arg_max()]


def test_tidal_window_crossing_midnight_and_named_signal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    n = 16 * 1440
    t = np.arange(1, n + 1) * 60
    hour = ((t - 30) % 86400) / 3600
    rps = 100 + 60 * np.cos(2 * np.pi * (hour - 14.5) / 24)
    frame = pl.DataFrame({"ts": pl.Series(1_700_438_400_000 + t * 1000).cast(pl.Datetime("ms", "UTC")), "rps": rps})
    db = tmp_path / "t.duckdb"
    load_rate(db, "svc.csv", "svc_rps", frame)
    rows = run_json(capsys, "--db", str(db), "--signal", "metric:svc_rps", "--tidal-share", "0.5")
    tw = rows[0]["tidal_window"]
    assert tw["start_hour"] > tw["end_hour"]  # [start, end) across midnight
    assert rows[0]["peak_hour"] == 14 and rows[0]["trough_hour"] == 2
    assert rows[0]["periods_used"] == ["daily", "weekly"]
    # The readable table says the same.
    assert main(["rhythm", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "metric:svc_rps" in out and f"{tw['start_hour']:02d}-{tw['end_hour']:02d}" in out


def test_unknown_signal_and_empty_store_fail_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "empty.duckdb"
    Store(db).close()
    assert main(["rhythm", "--db", str(db), "--json"]) == 2
    assert "no request-rate or batch signal" in capsys.readouterr().err
    assert main(["rhythm", "--db", str(db), "--signal", "rps:nope", "--json"]) == 2
    assert "rps:nope" in capsys.readouterr().err


def test_too_short_series_reports_an_error_per_signal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = np.arange(1, 1441) * 60
    frame = pl.DataFrame({"ts": pl.Series(1_700_438_400_000 + t * 1000).cast(pl.Datetime("ms", "UTC")),
                          "rps": np.ones(len(t))})
    db = tmp_path / "t.duckdb"
    load_rate(db, "short.csv", "short_rps", frame)
    rows = run_json(capsys, "--db", str(db))
    assert rows[0]["signal"] == "metric:short_rps" and "more than 2 days" in rows[0]["error"]
