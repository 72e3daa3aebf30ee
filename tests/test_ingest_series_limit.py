"""A source past the series limit (issue 50): refused in every format with the limit and the line
of the first series past it, counted while the source streams, before its new series are kept.

The bench (``bench/hostile.py --only series``) measures the memory at 2.1 million series; here the
limit is lowered to a few hundred and each reader's order of work is what is checked: the
exposition reader parses no new series text of a chunk that would cross the limit, line protocol
is refused before it reads the chunks after the one that crossed it, a CSV before any series is
keyed. The readers' series index and the store's batched merge are checked against the plain
path on the same files (the index forced onto its hashed path, every hash made to collide).
"""

from __future__ import annotations

import pytest

from analytics import store as store_module
from analytics.cli import main
from analytics.errors import IngestError
from analytics.ingest import (
    exposition,
    ingest_bytes,
    ingest_path,
    series_index,
    sources,
)
from analytics.store import Store

T = 1_780_000_000_000
NS = T * 1_000_000
LIMIT = 300


def _exposition(n: int) -> bytes:
    return b"# TYPE u gauge\n" + "".join(f'u{{gpu="{i % 8}",UUID="GPU-{i}"}} 1 {T}\n' for i in range(n)).encode()


def _lineprotocol(n: int) -> bytes:
    return "".join(f"nvidia_smi,host=n,uuid=GPU-{i} utilization_gpu=1i {NS}\n" for i in range(n)).encode()


def _csv(n: int) -> bytes:
    return ("timestamp,metric,UUID,value\n" + "".join(f"{T},u,GPU-{i},1\n" for i in range(n))).encode()


# line protocol named its line before; what is new there is the streaming (below)
FILES = {"many.prom": (_exposition, 2), "many.csv": (_csv, 2)}


@pytest.fixture
def lowered(monkeypatch) -> None:
    monkeypatch.setenv("TIDELENS_MAX_SERIES_PER_SOURCE", str(LIMIT))


@pytest.mark.parametrize("name", sorted(FILES))
def test_each_format_past_the_limit_is_refused_naming_the_limit_and_the_line(tmp_path, capsys, lowered, name):
    """The first series past the limit is series 301: its line is named, through the upload and the
    CLI alike, and the store keeps nothing of the file; at the limit itself the file loads."""
    make, header = FILES[name]
    past = make(LIMIT + 50)
    with Store(tmp_path / "s.duckdb") as store:
        with pytest.raises(IngestError) as err:
            ingest_bytes(store, name, past)
        assert err.value.line == LIMIT + header and f"more than {LIMIT:,} series in one source" in str(err.value)
        assert store.totals()["series"] == 0
        assert ingest_bytes(store, "at-" + name, make(LIMIT)).series == LIMIT
    path = tmp_path / name
    path.write_bytes(past)
    assert main(["ingest", "--db", str(tmp_path / "cli.duckdb"), str(path)]) == 1
    said = capsys.readouterr().err
    assert f"{path}:{LIMIT + header}: more than {LIMIT:,} series in one source" in said, said


def test_exposition_parses_no_new_series_of_a_chunk_that_would_cross_the_limit(store, lowered, monkeypatch):
    """One chunk of 1,000 new series texts: refused on their count, before any is parsed (each was
    parsed and kept first, three dicts of Python objects a series)."""
    parsed = []
    real = exposition.parse_series
    monkeypatch.setattr(exposition, "parse_series", lambda *a, **k: parsed.append(a) or real(*a, **k))
    with pytest.raises(IngestError, match=f"more than {LIMIT:,} series") as err:
        ingest_bytes(store, "many.prom", _exposition(1_000))
    assert parsed == [] and err.value.line == LIMIT + 2


def test_line_protocol_is_refused_before_the_chunks_after_the_limit_are_read(tmp_path, lowered, monkeypatch):
    """Streamed chunk by chunk: a file whose last line is not UTF-8 is refused for its series, in
    an earlier chunk, never for the bytes it did not read (the whole text was decoded first); the
    upload, held in memory, is read in the same chunks."""
    monkeypatch.setattr(sources, "CHUNK_BYTES", 4096)
    path = tmp_path / "many.lp"
    path.write_bytes(_lineprotocol(2_000) + b"nvidia_smi,host=\xff utilization_gpu=1i 1\n")
    with Store(tmp_path / "s.duckdb") as store:
        (result,) = ingest_path(store, path)
        assert result.status == "failed" and f":{LIMIT + 1}: more than {LIMIT:,} series" in result.error, result.error
        with pytest.raises(IngestError, match=f"more than {LIMIT:,} series") as err:
            ingest_bytes(store, "many.lp", path.read_bytes())
        assert err.value.line == LIMIT + 1 and store.totals()["series"] == 0
        assert ingest_bytes(store, "at.lp", _lineprotocol(LIMIT)).series == LIMIT


def _rows(store: Store) -> list[tuple]:
    return store.query("SELECT s.key, x.ts_ms, x.value FROM samples x JOIN series s ON s.id = x.series_id "
                       "ORDER BY ALL").rows()


def test_the_series_index_hashed_and_colliding_keys_the_same_series(tmp_path, monkeypatch):
    """Past ``DIRECT_MAX`` seen keys a chunk is matched on hashes of its keys, then text for text:
    forced onto that path with every hash the same (each key collides with every other), over
    small chunks, the exposition and line-protocol stores equal the plain path's."""
    text = b"".join(f'u{{gpu="{g}",UUID="GPU-{g}"}} {m} {T + m * 60_000}\n'.encode() for m in range(20) for g in range(9))
    lp = b"".join(f"nvidia_smi,uuid=GPU-{g} utilization_gpu={m}i,power_draw={g}.5 {NS + m * 60 * 10**9}\n".encode()
                  for m in range(20) for g in range(9))
    plain = {}
    for name, data in (("u.prom", text), ("u.lp", lp)):
        with Store(tmp_path / f"plain-{name}.duckdb") as store:
            ingest_bytes(store, name, data)
            plain[name] = _rows(store)
    monkeypatch.setattr(sources, "CHUNK_BYTES", 512)
    monkeypatch.setattr(series_index, "DIRECT_MAX", 0)
    monkeypatch.setattr(series_index.SeriesIndex, "_hashed",
                        lambda self, keys: keys.with_columns(series_index.pl.lit(7, series_index.pl.UInt64)
                                                             .alias(series_index._HASH)))
    for name, data in (("u.prom", text), ("u.lp", lp)):
        with Store(tmp_path / f"hashed-{name}.duckdb") as store:
            result = ingest_bytes(store, name, data)
            assert result.series == (9 if name == "u.prom" else 18) and result.duplicates == 0
            assert _rows(store) == plain[name]


def test_the_merge_keys_series_batch_by_batch_as_in_one(tmp_path, monkeypatch):
    """Series keyed 7 at a time (a million at 25,000 in the store): the ids and samples of a first
    load, then a second sharing some of its series and adding more, equal one batch's."""
    first = _exposition(40)
    second = b"".join(f'u{{gpu="{i % 8}",UUID="GPU-{i}"}} 2 {T + 60_000}\n'.encode() for i in range(20, 70))
    got = []
    for batch in (1_000_000, 7):
        monkeypatch.setattr(store_module, "SERIES_BATCH", batch)
        with Store(tmp_path / f"b{batch}.duckdb") as store:
            ingest_bytes(store, "first.prom", first)
            assert ingest_bytes(store, "second.prom", second).series == 50
            got.append((store.query("SELECT id, key FROM series ORDER BY id").rows(), _rows(store)))
    assert got[0] == got[1] and [i for i, _ in got[0][0]] == list(range(1, 71))  # ids go on from the store's
