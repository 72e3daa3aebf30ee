"""The speed paths of file ingest: one-pass hashing, the '}'-split reader, batched staging, order checks.

Each fast path must give exactly what the plain path (or prometheus_client's parser) gives on the
same input; these tests pin the cases where a shortcut could silently differ.
"""

from __future__ import annotations



import polars as pl
import pytest
from prometheus_client.parser import text_string_to_metric_families

from analytics.errors import IngestError
from analytics.ingest import ingest_bytes, ingest_path, sources
from analytics.ingest.exposition import parse_exposition
from analytics.ingest.sources import HashedChunks, iter_bytes_chunks
from analytics.store import content_hash

LABELLED = "".join(
    f'# TYPE m{m} gauge\n' + "".join(f'm{m}{{gpu="{g}",model="NVIDIA H100 80GB HBM3"}} {g + m * 0.5} {1000 * s + 1}\n'
                                     for g in range(4))
    for s in range(6) for m in range(2))


class ListSink:
    def __init__(self) -> None:
        self.series: dict[int, tuple[str, tuple]] = {}
        self.samples: list[tuple[int, int, float]] = []

    def add_series(self, frame: pl.DataFrame) -> None:
        import orjson
        for skey, metric, labels in frame.iter_rows():
            self.series.setdefault(skey, (metric, tuple(sorted(orjson.loads(labels).items()))))

    def add_samples(self, frame: pl.DataFrame, *, locate=None) -> None:
        self.samples.extend(frame.iter_rows())

    def rows(self) -> list[tuple]:
        return [(*self.series[k], ts, v) for k, ts, v in self.samples]


def ours(text: str, chunk: int | None = None, vectorised: bool = True) -> list[tuple]:
    data = text.encode()
    sink = ListSink()
    chunks = [data] if chunk is None else list(iter_bytes_chunks(data, chunk))
    parse_exposition(chunks, sink, "t", openmetrics=False, default_ts_ms=-1, vectorised=vectorised)
    return sink.rows()


def reference(text: str) -> list[tuple]:
    # prometheus_client gives text 0.0.4 timestamps in seconds; the file holds milliseconds
    return [(s.name, tuple(sorted(s.labels.items())), round(s.timestamp * 1000), s.value)
            for fam in text_string_to_metric_families(text) for s in fam.samples]


@pytest.mark.parametrize("chunk", [None, 300, 1000])
def test_brace_split_reader_equals_prometheus_client_in_file_order(chunk):
    # every line labelled: the '}'-separated reader takes the chunk; order is file order
    got = ours(LABELLED, chunk)
    ref = reference(LABELLED)
    assert len(got) == 48
    assert got == ref


@pytest.mark.parametrize("extra,expect", [
    ('m0{gpu="0"} 1 2}', "timestamp '2}' is not an integer"),          # a trailing '}' the reader would drop as an empty field
    ('m0{gpu="0"}', "no value"),                      # ends on its only '}'
    ('m0{gpu="}"} 1 5}', "timestamp '5}' is not an integer"),          # two '}' and a trailing one
    ('} 1 2', "invalid metric name"),                 # nothing before the '}'
    ('m0 {gpu="0"} 1 2', "native histogram"),         # space before '{': not a labelled series text
])
def test_brace_split_reader_never_vouches_for_a_bad_line(extra, expect):
    text = LABELLED + extra + "\n" + LABELLED.replace(" 1\n", " 7\n")
    line = LABELLED.count("\n") + 1
    for vectorised in (True, False):
        with pytest.raises(IngestError) as err:
            ours(text, vectorised=vectorised)
        assert err.value.line == line and expect in str(err.value), (vectorised, str(err.value))


def test_quoted_brace_and_crlf_lines_equal_prometheus_client():
    text = LABELLED + 'm0{gpu="}",x="a b"} 3 9000\n' + 'm1{gpu="9"} 4 9000\r\n'
    got = ours(text)
    assert got == reference(text.replace("\r\n", "\n"))
    assert got[-2][1] == (("gpu", "}"), ("x", "a b"))


def test_duplicates_across_chunks_keep_the_last_in_file_order(store, monkeypatch):
    monkeypatch.setattr(sources, "CHUNK_BYTES", 256)
    again = 'm0{gpu="1",model="NVIDIA H100 80GB HBM3"} 99 1\n'  # same series and time as line 3
    res = ingest_bytes(store, "dup.prom", (LABELLED + again).encode())
    assert (res.samples, res.duplicates) == (48, 1)
    got = store.query("SELECT x.value FROM samples x JOIN series s ON s.id = x.series_id "
                      "WHERE s.metric = 'm0' AND s.gpu = '1' AND x.ts_ms = 1")
    assert got["value"].to_list() == [99.0]


def test_one_pass_hash_is_the_content_hash_and_reload_is_skipped(store, tmp_path):
    path = tmp_path / "a.prom"
    path.write_text(LABELLED)
    chunks = HashedChunks(path, chunk_bytes=200)
    assert b"".join(chunks) == LABELLED.encode()
    assert chunks.hexdigest() == content_hash(LABELLED.encode())
    (first,) = ingest_path(store, path)
    (second,) = ingest_path(store, path)
    assert (first.status, second.status) == ("loaded", "skipped")
    assert ingest_bytes(store, "same.prom", LABELLED.encode()).status == "skipped"
    assert store.totals()["sources"] == 1 and store.totals()["samples"] == 48
    hashes = store.sources()["content_hash"].to_list()
    assert hashes == [content_hash(LABELLED.encode())]


def test_failed_file_is_recorded_under_its_whole_content_hash(store, tmp_path):
    bad = LABELLED + 'm0{gpu="0"} oops 5\n' + LABELLED
    path = tmp_path / "bad.prom"
    path.write_text(bad)
    (res,) = ingest_path(store, path)
    assert res.status == "failed" and ":61:" in res.error
    failed = store.sources().filter(pl.col("status") == "failed")
    assert failed["content_hash"].to_list() == [content_hash(bad.encode())]
    assert store.totals()["samples"] == 0


def _frame(rows):
    return pl.DataFrame(rows, schema={"skey": pl.Int64, "ts_ms": pl.Int64, "value": pl.Float64}, orient="row")


def _series(n):
    return pl.DataFrame({"skey": list(range(n)), "metric": [f"s{i}" for i in range(n)], "labels": ["{}"] * n})


@pytest.mark.parametrize("frames,ordered", [
    ([[(0, 1, 1.0), (1, 1, 1.0), (0, 2, 1.0), (1, 2, 1.0)], [(0, 3, 1.0), (1, 3, 1.0)]], True),   # scrapes
    ([[(0, 1, 1.0), (1, 1, 1.0), (0, 2, 1.0)], [(1, 2, 1.0), (0, 3, 1.0)]], True),   # a scrape cut by chunks
    ([[(0, 1, 1.0), (1, 1, 1.0), (0, 2, 1.0)], [(0, 2, 5.0), (1, 3, 1.0)]], False),  # same time again, next chunk
    ([[(0, 1, 1.0), (1, 1, 1.0), (1, 1, 2.0)]], False),                              # twice in one scrape
    ([[(0, 1, 1.0), (1, 1, 1.0)], [(0, 0, 1.0)]], False),                            # time goes back
    ([[(0, 1, 1.0), (0, 2, 1.0), (1, 1, 1.0), (1, 2, 1.0)], [(2, 1, 1.0), (2, 5, 1.0)]], True),  # runs (JSON)
    ([[(0, 1, 1.0), (0, 2, 1.0), (1, 1, 1.0)], [(1, 1, 3.0)]], False),               # runs, then a repeat
    ([[(0, 1, 1.0), (0, 2, 1.0), (1, 1, 1.0)], [(1, 2, 3.0), (0, 3, 1.0)]], True),   # runs, then groups
])
def test_order_checks_decide_the_merge_and_the_result_is_the_same(store, frames, ordered):
    seen = {}

    def parse(sink):
        sink.add_series(_series(3))
        for rows in frames:
            sink.add_samples(_frame(rows))
        seen["ordered"] = sink.ordered

    res = store.load("x", "test", "h", parse)
    assert seen["ordered"] is ordered
    last: dict[tuple[int, int], float] = {}
    for rows in frames:
        for skey, ts, value in rows:
            last[(skey, ts)] = value
    got = store.query("SELECT s.metric, x.ts_ms, x.value FROM samples x JOIN series s ON s.id = x.series_id "
                      "ORDER BY ALL").rows()
    assert got == sorted((f"s{k}", ts, v) for (k, ts), v in last.items())
    assert res.samples == len(last)


def test_labelled_chunks_take_the_brace_reader_and_bare_names_the_whole_line_reader(monkeypatch):
    import analytics.ingest.exposition as expo
    seps: list[str] = []
    real = expo.pl.read_csv

    def spy(*args, **kwargs):
        seps.append(kwargs["separator"])
        return real(*args, **kwargs)

    monkeypatch.setattr(expo.pl, "read_csv", spy)
    ours(LABELLED)
    assert seps == ["}"]
    seps.clear()
    text = LABELLED + "up 1 5\n"
    assert ours(text) == reference(text)
    assert seps == ["}", "\x1f"]


def test_content_hash_is_xxh3_of_the_bytes(tmp_path):
    """The same bytes give the same hash, as a path (streamed) or an upload (whole)."""
    import xxhash

    from analytics.ingest.sources import HashedChunks

    data = LABELLED.encode()
    assert content_hash(data) == "xxh3-128:" + xxhash.xxh3_128(data).hexdigest()
    path = tmp_path / "x.prom"
    path.write_bytes(data)
    chunks = HashedChunks(path)
    for _ in chunks:
        pass
    assert chunks.hexdigest() == content_hash(data)


@pytest.mark.parametrize("batch_bytes", [1, 60, 1 << 20])
def test_json_values_batches_equal_the_orjson_path(monkeypatch, batch_bytes):
    import orjson

    from analytics.ingest import promjson
    result = [{"metric": {"__name__": "up", "job": str(j)},
               "values": [[1767225600 + 15 * k + 0.5 * j, str(k * j + 0.25)] for k in range(1 + 3 * j)]}
              for j in range(5)]
    data = orjson.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}},
                        option=orjson.OPT_INDENT_2)  # whitespace inside the values arrays too
    monkeypatch.setattr(promjson, "BATCH_BYTES", batch_bytes)
    fast, plain = ListSink(), ListSink()
    promjson.parse_prom_json(data, fast, "q.json", fast_path_bytes=0)
    promjson.parse_prom_json(data, plain, "q.json", fast_path_bytes=1 << 40)
    assert fast.rows() == plain.rows()
    assert len(fast.rows()) == sum(1 + 3 * j for j in range(5))
    assert fast.rows()[-1][2:] == (round((1767225600 + 15 * 12 + 2.0) * 1000), 12 * 4 + 0.25)
