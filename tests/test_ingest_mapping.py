"""A column mapping for any CSV or Parquet (``tidelens ingest --columns mapping.toml``): a
warehouse export of per-container GPU duty cycle becomes the standard signal; the mapping is part
of the source's identity; a hostile mapping is refused with file, line and column, store unchanged."""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import polars as pl
import pytest

from analytics.cli import main
from analytics.errors import ConfigError, IngestError
from analytics.ingest import ingest_bytes
from analytics.ingest.mapping import ColumnMapping, load_mapping

WAREHOUSE = b"""timestamp_anon,container_ip,duty_cycle,mem_mib
1767571200,10.0.0.1,45.0,61000
1767571200,10.0.0.2,97.5,70000
1767571260,10.0.0.1,50.0,61010
1767571260,10.0.0.2,98.0,
"""
MAPPING = """[time]
column = "timestamp_anon"
unit = "s"
[values]
columns = ["duty_cycle", "mem_mib"]
[labels]
container_ip = "pod"
[signals.duty_cycle]
metric = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
scale = 0.01
[signals.mem_mib]
metric = "DCGM_FI_DEV_FB_USED"
"""


def _mapping(tmp_path: Path, text: str = MAPPING) -> ColumnMapping:
    p = tmp_path / "mapping.toml"
    p.write_text(text)
    return load_mapping(p)


def test_a_warehouse_csv_becomes_the_standard_signals(store, tmp_path) -> None:
    m = _mapping(tmp_path)
    r = ingest_bytes(store, "gpu_duty.csv", WAREHOUSE, columns=m)
    assert r.status == "loaded" and r.format == "mapped-csv" and m.digest() in (r.note or "")
    active = store.query("SELECT r.labels, s.ts_ms, s.value FROM samples s JOIN series r ON s.series_id = r.id "
                         "WHERE r.metric = 'DCGM_FI_PROF_GR_ENGINE_ACTIVE' ORDER BY 1, 2")
    assert [orjson.loads(x)["pod"] for x in active["labels"]] == ["10.0.0.1", "10.0.0.1", "10.0.0.2", "10.0.0.2"]
    assert active["value"].to_list() == pytest.approx([0.45, 0.50, 0.975, 0.98])  # scaled
    assert active["ts_ms"].to_list()[:2] == [1_767_571_200_000, 1_767_571_260_000]
    assert store.series("DCGM_FI_DEV_FB_USED").height == 2 and store.totals()["samples"] == 7  # empty cell skipped
    from analytics.timeline import signal_report

    assert dict(signal_report(store).select("signal", "found").iter_rows())["gpu_activity"]
    # the same file under the same mapping: nothing changes; under another mapping: a new load
    assert ingest_bytes(store, "gpu_duty.csv", WAREHOUSE, columns=m).status == "skipped"
    other = _mapping(tmp_path, MAPPING.replace("scale = 0.01", "scale = 1.0"))
    assert other.digest() != m.digest()
    assert ingest_bytes(store, "gpu_duty.csv", WAREHOUSE, columns=other).status == "loaded"


def test_long_layout_iso_times_in_a_zone_and_parquet(store, tmp_path) -> None:
    frame = pl.DataFrame({"when": ["2026-01-05 09:00:00", "2026-01-05 09:01:00"], "what": ["rps", "rps"],
                          "v": ["12.5", "13.0"], "svc": ["chat", "chat"]})
    m = ColumnMapping(time="when", time_unit="iso", time_zone="Europe/Berlin", values=("v",),
                      metric_column="what", labels={"svc": "service"}, signals={"rps": ("request_rate", 1.0)})
    buf = io.BytesIO()
    frame.write_parquet(buf)
    r = ingest_bytes(store, "traffic.parquet", buf.getvalue(), columns=m)
    assert r.status == "loaded" and r.format == "mapped-parquet"
    got = store.query("SELECT s.ts_ms, s.value FROM samples s JOIN series r ON s.series_id = r.id "
                      "WHERE r.metric = 'request_rate' ORDER BY 1")
    assert got["ts_ms"].to_list()[0] == 1_767_600_000_000  # 09:00 in Berlin is 08:00 UTC
    assert got["value"].to_list() == [12.5, 13.0]


@pytest.mark.parametrize("data,mapping_change,line,column,said", [
    (WAREHOUSE, ('container_ip = "pod"', 'container_id = "pod"'), 1, "container_id", "does not have"),
    (WAREHOUSE.replace(b"1767571260,10.0.0.1", b"soon,10.0.0.1"), None, 4, "timestamp_anon", "not a number of s"),
    (WAREHOUSE.replace(b"50.0", b"high"), None, 4, "duty_cycle", "is not a number"),
])
def test_a_hostile_mapping_or_table_is_refused_with_file_line_and_column(store, tmp_path, data, mapping_change,
                                                                        line, column, said) -> None:
    text = MAPPING if mapping_change is None else MAPPING.replace(*mapping_change)
    with pytest.raises(IngestError) as err:
        ingest_bytes(store, "gpu_duty.csv", data, columns=_mapping(tmp_path, text))
    msg = str(err.value)
    assert msg.startswith(f"gpu_duty.csv:{line}:") and repr(column) in msg and said in msg, msg
    assert store.totals()["samples"] == 0 and store.metrics().height == 0


def test_a_mapping_that_maps_nothing_useful_says_so(store, tmp_path) -> None:
    text = MAPPING.split("[signals.duty_cycle]")[0]  # no signal mapping: duty_cycle, mem_mib
    with pytest.raises(IngestError, match="none of which any analysis reads"):
        ingest_bytes(store, "gpu_duty.csv", WAREHOUSE, columns=_mapping(tmp_path, text))
    assert store.totals()["samples"] == 0


@pytest.mark.parametrize("text,said", [
    (MAPPING.replace('unit = "s"', 'unit = "weeks"'), "unit 'weeks'"),
    (MAPPING.replace('columns = ["duty_cycle", "mem_mib"]', ""), "[values] columns is required"),
    ('[time]\ncolumn = "t"\n[values]\ncolumns = ["v"]\n', "exactly one of column, name or from_file"),
    ("[time\n", "not valid TOML"),
])
def test_a_bad_mapping_file_names_itself(tmp_path, capsys, text, said) -> None:
    with pytest.raises(ConfigError, match=said.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")):
        _mapping(tmp_path, text)
    csv = tmp_path / "t.csv"
    csv.write_bytes(WAREHOUSE)
    assert main(["ingest", "--db", str(tmp_path / "s.duckdb"), "--columns", str(tmp_path / "mapping.toml"),
                 str(csv)]) == 2
    assert "mapping.toml" in capsys.readouterr().err


def test_the_cli_reads_a_folder_through_the_mapping(tmp_path, capsys) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    (folder / "day1.csv").write_bytes(WAREHOUSE)
    (folder / "README.md").write_text("# exports\n")
    (tmp_path / "mapping.toml").write_text(MAPPING)
    db = tmp_path / "s.duckdb"
    assert main(["ingest", "--db", str(db), "--columns", str(tmp_path / "mapping.toml"), str(folder)]) == 0
    out = capsys.readouterr().out
    assert "mapped-csv" in out and "1 loaded, 1 skipped" in out
    from analytics.store import Store

    with Store(db, read_only=True) as st:
        assert st.series("DCGM_FI_PROF_GR_ENGINE_ACTIVE").height == 2


def test_the_data_page_maps_a_table_and_saves_the_mapping_beside_the_store(tmp_path, monkeypatch) -> None:
    from apptest_helpers import isolate, open_store_page, tables

    isolate(monkeypatch, tmp_path)
    db = tmp_path / "mine.duckdb"
    at = open_store_page("pages/data.py", db, tab="Your own table")
    at.file_uploader(key="map_file").set_value([("gpu_duty.csv", WAREHOUSE, "text/csv")]).run()
    assert not at.exception, [e.value for e in at.exception]
    # the guess: time and unit, numeric values, the rest as labels
    assert at.selectbox(key="map_time").value == "timestamp_anon" and at.selectbox(key="map_unit").value == "s"
    assert at.multiselect(key="map_values").value == ["duty_cycle", "mem_mib"]
    assert at.multiselect(key="map_labels").value == ["container_ip"]
    at.text_input(key="map_renames").set_value("container_ip:pod").run()
    at.selectbox(key="map_sig_0").set_value("DCGM_FI_PROF_GR_ENGINE_ACTIVE")
    at.number_input(key="map_scale_0").set_value(0.01).run()
    becomes = next(df.value for df in tables(at) if "becomes" in df.value.columns)
    assert list(becomes["becomes"]) == ["DCGM_FI_PROF_GR_ENGINE_ACTIVE", "mem_mib"]
    at.button(key="map_load_go").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("Mapping saved" in s.value for s in at.success), [e.value for e in at.error]
    saved = load_mapping(db.with_name("mine.duckdb.columns.toml"))
    assert saved.labels == {"container_ip": "pod"} and saved.signals["duty_cycle"] == ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.01)
    from analytics.store import Store

    with Store(db, read_only=True) as st:
        active = st.series("DCGM_FI_PROF_GR_ENGINE_ACTIVE")
        assert active.height == 2 and all('"pod"' in lb for lb in active["labels"])
