"""ServeGen's published per-client rate files as an ingest format: each file a client of the
model (the folder's name), summed per step by the Rhythm exactly as the trace reader sums them,
with the trace's date/zone assumption stated in the load note and on the Rhythm."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from servegen_rate import read_servegen_rate

from analytics.errors import IngestError
from analytics.ingest import detect_format, ingest_bytes, ingest_path
from analytics.ingest.servegen import ASSUMPTION_NOTE

FOLDER = Path(__file__).parent / "fixtures" / "servegen"


def test_client_files_load_as_the_models_request_rate(store) -> None:
    chunk = FOLDER / "chunk-0-trace.csv"
    assert detect_format(chunk.read_bytes(), chunk.name) == "servegen-rate"
    results = ingest_path(store, FOLDER)
    loaded = [r for r in results if r.status == "loaded"]
    assert len(loaded) == 2 and all(r.format == "servegen-rate" for r in loaded)
    assert [r.status for r in results if r.name.endswith("LICENSE")] == ["skipped"]
    assert all(ASSUMPTION_NOTE in (r.note or "") for r in loaded)  # the assumption is said
    series = store.series("request_rate")
    assert series.height == 2
    # the store's per-step sum over the clients equals the trace reader's sum
    got = store.query("SELECT s.ts_ms, sum(s.value) AS rps FROM samples s JOIN series r ON s.series_id = r.id "
                      "WHERE r.metric = 'request_rate' GROUP BY s.ts_ms ORDER BY s.ts_ms")
    want = read_servegen_rate(FOLDER)
    assert got.height == want.height
    assert got["rps"].to_list() == pytest.approx(want["rps"].to_list())
    assert (got["ts_ms"] == want["ts"].dt.epoch("ms")).all()
    # a re-load changes nothing
    again = ingest_path(store, FOLDER)
    assert {r.status for r in again if r.name.endswith(".csv")} == {"skipped"}


def test_the_rhythm_reads_it_and_states_the_assumption(store) -> None:
    from analytics.rhythm import RhythmConfig
    from analytics.rhythm.digest import rhythm_page_data

    ingest_path(store, FOLDER)
    data = rhythm_page_data(store, RhythmConfig(), step_s=600)
    assert "metric:request_rate" in [s.name for s in data.signals]
    assert ASSUMPTION_NOTE in data.assumption_notes


def test_a_bad_row_is_refused_with_its_line_and_the_store_unchanged(store, tmp_path) -> None:
    lines = (FOLDER / "chunk-1-trace.csv").read_text().splitlines()
    lines[6] = "3600,lots,0,,0,0"
    bad = tmp_path / "m-large" / "chunk-7-trace.csv"
    bad.parent.mkdir()
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(IngestError) as err:
        ingest_bytes(store, str(bad), bad.read_bytes())
    assert f"{bad}:7" in str(err.value) and "rate_rps" in str(err.value)
    assert store.totals()["samples"] == 0


def test_the_model_is_named_from_the_folder(store, tmp_path) -> None:
    model = tmp_path / "m-large"
    model.mkdir()
    shutil.copy(FOLDER / "chunk-0-trace.csv", model / "chunk-0-trace.csv")
    ingest_path(store, model)
    labels = store.series("request_rate")["labels"].to_list()
    assert labels and all('"model":"m-large"' in lb and '"client":"0"' in lb for lb in labels)
