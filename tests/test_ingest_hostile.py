"""Hostile input to the loaders: implausible times, misleading format markers, decompression bombs.

Each is refused with the file and the line (or JSON path) named and the store left as it was,
or read right and said so; a store that already holds a stray row from before still serves every
reader. Times here run under the default window (2000-01-01 .. now + 1 day): the conftest's
wider one for epoch-zero unit tests is lifted.
"""

from __future__ import annotations

import gzip
import json

import pytest

from analytics.cli import main
from analytics.errors import IngestError
from analytics.ingest import ingest_bytes, ingest_path
from analytics.store import TIME_WINDOW_ENV, Store
from analytics.timeline import TimelineConfig, pool_timeline

T = 1_764_316_800_000  # 2025-11-28T08:00Z


@pytest.fixture(autouse=True)
def default_window(monkeypatch):
    monkeypatch.delenv(TIME_WINDOW_ENV, raising=False)


def _load(store: Store, name: str, data: bytes) -> IngestError:
    with pytest.raises(IngestError) as exc:
        ingest_bytes(store, name, data)
    assert store.totals()["samples"] == 0  # nothing of it was kept
    return exc.value


@pytest.mark.parametrize("ts,hint", [(253_402_300_800_000, "year 10000"), (3_170_843, "1970"),
                                     (T // 1000, "seconds where milliseconds were expected")])
def test_an_implausible_exposition_time_is_refused_with_its_line(store, ts, hint):
    err = _load(store, "far.prom", f'# TYPE x gauge\nx{{a="1"}} 1 {T}\nx{{a="1"}} 2 {ts}\n'.encode())
    assert err.line == 3 and hint in str(err) and "plausible window" in str(err)
    assert TIME_WINDOW_ENV in str(err)  # how to widen it


def test_json_and_csv_times_name_their_place(store):
    body = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "x"}, "values": [[T / 1000, "1"]]},
        {"metric": {"__name__": "y"}, "values": [[T / 1000, "1"], [T / 1000 + 60, "2"], [T, "3"]]}]}}
    err = _load(store, "q.json", json.dumps(body).encode())
    assert err.where == "data.result[1].values[2]" and "milliseconds where seconds were expected" in str(err)
    err = _load(store, "mix.csv", f"timestamp,metric,value\n{T},x,1\n{T // 1000 + 60},x,2\n".encode())
    assert err.line == 3 and "seconds where milliseconds" in str(err)
    err = _load(store, "huge.csv", f"timestamp,metric,value\n{T},x,1\n1e30,x,2\n".encode())
    assert err.line == 3 and "far outside" in str(err)


def test_the_window_is_configurable(store, monkeypatch):
    monkeypatch.setenv(TIME_WINDOW_ENV, "1970-01-01,now+1d")
    assert ingest_bytes(store, "old.prom", b"x 1 60000\n").status == "loaded"
    monkeypatch.setenv(TIME_WINDOW_ENV, "not a window")
    with pytest.raises(Exception, match="FROM,TO"):
        ingest_bytes(store, "again.prom", b"x 2 120000\n")


def test_a_stray_eof_does_not_turn_milliseconds_into_seconds(store):
    r = ingest_bytes(store, "eof.prom", f'# TYPE x gauge\n# UNIT x seconds\nx{{a="1"}} 1 {T}\n# EOF\n'.encode())
    assert r.format == "prom-text" and "integer milliseconds" in (r.note or "")
    assert store.totals()["first_ts_ms"] == T
    om = ingest_bytes(store, "om.prom", f'# TYPE y gauge\ny{{a="1"}} 1 {T / 1000:.3f}\n# EOF\n'.encode())
    assert om.format == "openmetrics" and store.totals()["last_ts_ms"] == T


def test_every_reader_survives_a_stray_row_already_in_the_store(tmp_path, capsys):
    db = tmp_path / "old.duckdb"
    with Store(db) as st:
        ingest_bytes(st, "good.prom", "".join(
            f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="G0",Hostname="n",pod="p-0",namespace="ml"}} 50 {T + m * 60_000}\n'
            for m in range(10)).encode())
        # a row an older build let in: year 10000
        st.con.execute("INSERT INTO samples SELECT series_id, 253402300800000, 1 FROM samples LIMIT 1")
        st.con.execute("UPDATE sources SET last_ts_ms = 253402300800000")
        tl = pool_timeline(st, TimelineConfig(step_s=60))
        assert tl.height == 10  # the real span, not 8,000 years of steps
        assert st.totals()["last_ts_ms"] == T + 9 * 60_000
    assert main(["sources", "--db", str(db)]) == 0
    assert "good.prom" in capsys.readouterr().out


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, 9)


@pytest.mark.parametrize("name,body,what", [
    ("zeros.prom.gz", b"# TYPE x gauge\n" + b"0" * (40 << 20), "decompression bomb"),
    ("lines.prom.gz", b"# TYPE x gauge\n" + f"x 1 {T}\n".encode() * (4 << 20), "decompression bomb"),
    ("json.json.gz", b'{"status":"success","data":{"resultType":"matrix","result":[' + b" " * (60 << 20) + b"]}}",
     "decompression bomb"),
    ("csv.csv.gz", b"timestamp,metric,value\n" + f"{T},x,1\n".encode() * (4 << 20), "decompression bomb"),
])
def test_decompression_bombs_are_refused_as_they_stream(tmp_path, monkeypatch, name, body, what):
    monkeypatch.setenv("TIDELENS_MAX_LINE_BYTES", str(8 << 20))
    path = tmp_path / name
    path.write_bytes(_gz(body))
    assert len(body) > 200 * path.stat().st_size
    with Store(tmp_path / "s.duckdb") as st:
        (result,) = ingest_path(st, path)
        assert result.status == "failed" and what in result.error, result.error
        assert st.totals()["samples"] == 0
        with pytest.raises(IngestError, match=what):  # an upload's bytes, the same bounds
            ingest_bytes(st, name, path.read_bytes())


def test_a_line_without_end_is_refused_before_it_is_read_whole(tmp_path, monkeypatch):
    monkeypatch.setenv("TIDELENS_MAX_LINE_BYTES", str(1 << 20))
    path = tmp_path / "one-line.prom"
    path.write_bytes(b"# TYPE x gauge\n" + b"x" * (6 << 20))
    with Store(tmp_path / "s.duckdb") as st:
        (result,) = ingest_path(st, path)
        assert result.status == "failed" and "a line longer than 1,048,576 bytes" in result.error
        with pytest.raises(IngestError, match="a line longer than") as exc:
            ingest_bytes(st, "one-line.prom", path.read_bytes())
        assert exc.value.line == 2


def test_a_long_line_that_ends_inside_the_next_read_is_refused_too():
    """A chunk cut inside a line is finished with one bounded readline; a line that ends there
    but is longer than the limit (8 bytes of chunk + 8 of readline > 12) is refused, not passed."""
    import io

    from analytics.ingest.sources import check_line_lengths, iter_chunks

    data = b"ab\n" + b"x" * 15 + b"\ncd\n"
    with pytest.raises(IngestError, match="a line longer than 12 bytes") as exc:
        list(iter_chunks(io.BytesIO(data), chunk_bytes=8, max_line_bytes=12, name="f"))
    assert exc.value.line == 2
    with pytest.raises(IngestError, match="a line longer than 12 bytes") as exc:
        check_line_lengths(data, "f", max_line_bytes=12)
    assert exc.value.line == 2
    assert len(list(iter_chunks(io.BytesIO(data), chunk_bytes=8, max_line_bytes=15))) >= 1
    check_line_lengths(data, "f", max_line_bytes=15)


def test_a_source_with_too_many_series_is_refused(store, monkeypatch):
    monkeypatch.setenv("TIDELENS_MAX_SERIES_PER_SOURCE", "100")
    text = "".join(f'x{{id="{i}"}} 1 {T}\n' for i in range(500)).encode()
    err = _load(store, "many.prom", text)
    assert "more than 100 series" in str(err)


def test_a_real_sized_archive_stays_within_the_default_bounds(tmp_path):
    # highly repetitive scrapes compress well; the default 200x ratio still admits them
    body = "".join(f'DCGM_FI_DEV_GPU_UTIL{{gpu="{g}",UUID="G{g}",Hostname="n"}} {g} {T + m * 60_000}\n'
                   for m in range(2000) for g in range(8)).encode()
    path = tmp_path / "ok.prom.gz"
    path.write_bytes(_gz(body))
    with Store(tmp_path / "ok.duckdb") as st:
        (result,) = ingest_path(st, path)
    assert result.status == "loaded" and result.samples == 16000


def test_a_bomb_is_stopped_by_its_running_ratio_long_before_the_whole_cap(tmp_path, monkeypatch):
    """A gzip whose output runs ahead of 200x its input is refused once past the slack, not
    after 200 x its whole size (which, for a 24 MB bomb, was 5 GB read and 5.7 GB of memory)."""
    from analytics.ingest import sources

    monkeypatch.setattr(sources, "RATIO_SLACK_BYTES", 1 << 20)
    line = f'x{{a="1"}} 1 {T}\n'.encode()
    # A bomb's first half, then enough poorly compressible text that the whole file's cap
    # (200 x its size) is far away: only the running ratio can stop it early.
    import os as _os

    bomb = gzip.compress(b"# TYPE x gauge\n" + line * (2 << 20), 9) + gzip.compress(_os.urandom(4 << 20).hex().encode(), 1)
    path = tmp_path / "bomb.prom.gz"
    path.write_bytes(bomb)
    with Store(tmp_path / "s.duckdb") as st:
        (result,) = ingest_path(st, path)
        assert result.status == "failed" and "more than 200x" in result.error, result.error
        assert "bytes of gzip gave" in result.error
        with pytest.raises(IngestError, match="more than 200x"):
            ingest_bytes(st, "bomb.prom.gz", bomb)
        assert st.totals()["samples"] == 0
