"""Prometheus text 0.0.4 / OpenMetrics ingest, checked against prometheus_client's own parsers."""

from __future__ import annotations

import gzip
import math

import orjson
import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_families
from prometheus_client.parser import text_string_to_metric_families

from analytics.errors import IngestError
from analytics.ingest import detect_format, ingest_bytes, ingest_path
from analytics.ingest.exposition import parse_exposition

NO_TS = -(10 ** 15)  # marks "no timestamp" in these comparisons

EDGE_TEXT = r'''# HELP http_requests_total The total number of HTTP requests.
# TYPE http_requests_total counter
http_requests_total{method="post",code="200"} 1027 1395066363000
http_requests_total{method="post",code="400"}    3 1395066363000

# Escaping in label values:
msdos_file_access_time_seconds{path="C:\\DIR\\FILE.TXT",error="Cannot find file:\n\"FILE.TXT\""} 1.458255915e9
# Minimalistic line:
metric_without_timestamp_and_labels 12.47
# A weird metric from before the epoch:
something_weird{problem="division by zero"} +Inf -3982045
# HELP http_request_duration_seconds A histogram of the request duration.
# TYPE http_request_duration_seconds histogram
http_request_duration_seconds_bucket{le="0.05"} 24054
http_request_duration_seconds_bucket{le="0.1"} 33444
http_request_duration_seconds_bucket{le="+Inf"} 144320
http_request_duration_seconds_sum 53423
http_request_duration_seconds_count 144320
# HELP rpc_duration_seconds A summary of the RPC duration in seconds.
# TYPE rpc_duration_seconds summary
rpc_duration_seconds{quantile="0.01"} 3102
rpc_duration_seconds{quantile="0.99"} 76656
rpc_duration_seconds_sum 1.7560473e+07
rpc_duration_seconds_count 2693
# NOTE a comment that is neither HELP nor TYPE
nan_metric NaN
neg_inf_metric -Inf 1395066363001
spaces_in_labels{a="x y z",b="}"} 1 1000
braces_in_labels{a="{\"q\"}",b="a,b=c"} 2
trailing_comma{a="1",} 3
tabbed{a="1"}	4
empty_labels{} 5
unicode_labels{city="Zürich 東京"} 6
exp_value 1e-3
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-x",Hostname="h"} 9223372036854775794
   leading_space 7
'''

EDGE_OM = '''# HELP acme_http_router_request_seconds Latency though all of ACME's HTTP request router.
# TYPE acme_http_router_request_seconds summary
# UNIT acme_http_router_request_seconds seconds
acme_http_router_request_seconds_sum{path="/api/v1",method="GET"} 9036.32 1395066363.123
acme_http_router_request_seconds_count{path="/api/v1",method="GET"} 807283.0 1395066363.123
acme_http_router_request_seconds_created{path="/api/v1",method="GET"} 1605281325.0 1395066363.123
# TYPE foo histogram
foo_bucket{le="0.1"} 8 1395066364.5
foo_bucket{le="+Inf"} 17 1395066364.5 # {trace_id="oHg5SJYRHA0"} 9.8 1520879607.789
foo_count 17 1395066364.5
foo_sum 324789.3 1395066364.5
# TYPE go_goroutines gauge
go_goroutines 69
# TYPE process_cpu_seconds counter
process_cpu_seconds_total 4.20072246e+06
# TYPE weird gauge
weird{a="x \\" y"} NaN 1.5
# EOF
'''


class ListSink:
    """A Sink stand-in that keeps everything in Python lists."""

    def __init__(self) -> None:
        self.series: dict[int, tuple[str, dict[str, str]]] = {}
        self.samples: list[tuple[int, int, float]] = []

    def add_series(self, frame) -> None:
        for skey, metric, labels in frame.iter_rows():
            self.series.setdefault(skey, (metric, orjson.loads(labels)))

    def add_samples(self, frame, *, locate=None) -> None:
        self.samples.extend(frame.iter_rows())

    def rows(self) -> list[tuple[str, tuple, int | None, float]]:
        out = []
        for skey, ts, value in self.samples:
            name, labels = self.series[skey]
            out.append((name, tuple(sorted(labels.items())), None if ts == NO_TS else ts, value))
        return out


def ours(text: str, *, openmetrics: bool, vectorised: bool, chunk: int | None = None) -> list:
    sink = ListSink()
    data = text.encode()
    chunks = [data] if chunk is None else [data[i:i + chunk] for i in range(0, len(data), chunk)]
    if chunk is not None:  # re-cut on line boundaries as the sources module does
        from analytics.ingest.sources import iter_bytes_chunks
        chunks = list(iter_bytes_chunks(data, chunk))
    parse_exposition(chunks, sink, "t", openmetrics=openmetrics, default_ts_ms=NO_TS, vectorised=vectorised)
    return sink.rows()


def reference(text: str, *, openmetrics: bool) -> list:
    out = []
    families = om_families(text) if openmetrics else text_string_to_metric_families(text)
    for fam in families:
        for s in fam.samples:
            name = s.name
            # prometheus_client renames counter samples to *_total; the file's own name is what we keep
            if fam.type == "counter" and name.endswith("_total") and f"\n{name}" not in "\n" + text \
                    and f"\n{name}{{" not in "\n" + text:
                name = name[:-6]
            ts = s.timestamp
            if ts is not None:
                ts = (ts.sec * 1000 + round(ts.nsec / 1e6)) if hasattr(ts, "sec") else round(ts * 1000)
            out.append((name, tuple(sorted(s.labels.items())), ts, float(s.value)))
    return out


def same(a: list, b: list) -> bool:
    def key(r):
        return (r[0], r[1], r[2], "nan" if math.isnan(r[3]) else r[3])
    return sorted(map(key, a), key=repr) == sorted(map(key, b), key=repr)


@pytest.mark.parametrize("vectorised", [True, False])
def test_real_dcgm_scrape_equals_prometheus_client(fixtures, vectorised):
    text = (fixtures / "datadog_dcgm_t4_scrape.prom").read_text()
    got = ours(text, openmetrics=False, vectorised=vectorised)
    assert len(got) == 23
    assert same(got, reference(text, openmetrics=False))


@pytest.mark.parametrize("vectorised", [True, False])
@pytest.mark.parametrize("chunk", [None, 97])
def test_edge_corpus_equals_prometheus_client(vectorised, chunk):
    got = ours(EDGE_TEXT, openmetrics=False, vectorised=vectorised, chunk=chunk)
    ref = reference(EDGE_TEXT, openmetrics=False)
    assert len(got) == len(ref) == 25
    assert same(got, ref)
    by_name = {r[0]: r for r in got}
    assert by_name["msdos_file_access_time_seconds"][1] == (
        ("error", 'Cannot find file:\n"FILE.TXT"'), ("path", "C:\\DIR\\FILE.TXT"))
    assert by_name["something_weird"][2:] == (-3982045, math.inf)  # 0.0.4: integer milliseconds
    assert by_name["spaces_in_labels"][1] == (("a", "x y z"), ("b", "}"))


@pytest.mark.parametrize("vectorised", [True, False])
def test_openmetrics_equals_prometheus_client(vectorised):
    got = ours(EDGE_OM, openmetrics=True, vectorised=vectorised)
    assert same(got, reference(EDGE_OM, openmetrics=True))
    by_name = {r[0]: r for r in got}
    assert by_name["acme_http_router_request_seconds_sum"][2] == 1395066363123  # OpenMetrics: seconds
    assert by_name["weird"][2] == 1500


def test_detects_text_and_openmetrics():
    assert detect_format(EDGE_TEXT.encode()) == "prom-text"
    assert detect_format(EDGE_OM.encode()) == "openmetrics"
    assert detect_format(gzip.compress(EDGE_OM.encode())) == "openmetrics"


def test_concatenated_timestamped_scrapes_load_all(store):
    scrape = "# TYPE up gauge\nup{job=\"a\"} {v} {ts}\nup{job=\"b\"} 1 {ts}\n"
    text = "".join(scrape.replace("{v}", str(i)).replace("{ts}", str(1000 * (i + 1))) for i in range(5))
    res = ingest_bytes(store, "many.prom", text.encode())
    assert (res.status, res.series, res.samples) == ("loaded", 2, 10)
    assert res.note is None


def test_untimestamped_single_scrape_takes_at_then_mtime(store):
    text = b'# TYPE up gauge\nup{job="a"} 1\n'
    res = ingest_bytes(store, "one.prom", text, at_ms=1767225600000, mtime_ms=5)
    assert res.first_ts_ms == 1767225600000
    assert res.note == "timestamps from --at 2026-01-01T00:00:00Z"
    res = ingest_bytes(store, "two.prom", text + b"up{job=\"b\"} 2\n", mtime_ms=1767225601000)
    assert res.first_ts_ms == 1767225601000 and "mtime" in res.note


def test_untimestamped_concatenated_scrapes_refused_with_line(store):
    text = b'# TYPE up gauge\nup{job="a"} 1\nup{job="b"} 1\n# TYPE up gauge\nup{job="a"} 2\n'
    with pytest.raises(IngestError) as err:
        ingest_bytes(store, "cat.prom", text, at_ms=0)
    assert err.value.line == 5
    assert "concatenated" in str(err.value) and str(err.value).startswith("cat.prom:5:")
    assert store.totals()["samples"] == 0


@pytest.mark.parametrize("vectorised", [True, False])
@pytest.mark.parametrize("line,expect", [
    ('up{job="a"} abc 1000', "invalid sample value 'abc'"),
    ('up{job="a" 1 1000', "labels not closed"),
    ('up{job=a} 1', "double quotes"),
    ('up{job="a",job="b"} 1', "duplicate label name"),
    ('up{job="a"}', "no value"),
    ('up{job="a"} 1 2 3', "unexpected text"),
    ('9up 1', "invalid metric name"),
    ('up 1_000', "invalid sample value"),
])
def test_bad_lines_name_file_and_line(vectorised, line, expect):
    text = f"# TYPE up gauge\nup{{job=\"ok\"}} 1 1000\n{line}\nup{{job=\"ok\"}} 2 2000\n"
    with pytest.raises(IngestError) as err:
        ours_err(text, vectorised)
    assert err.value.line == 3, str(err.value)
    assert expect in str(err.value)
    assert str(err.value).startswith("t:3: ")


def ours_err(text: str, vectorised: bool) -> None:
    parse_exposition([text.encode()], ListSink(), "t", openmetrics=False, default_ts_ms=0, vectorised=vectorised)


def test_native_histogram_line_refused():
    text = 'h {count:3,sum:1.5,buckets:[1,2]} 1000\n'
    with pytest.raises(IngestError, match="native histogram"):
        ours_err(text, True)


def test_invalid_utf8_names_line(store):
    data = b'up{job="a"} 1 1000\nup{job="\xff"} 1 1000\n'
    with pytest.raises(IngestError, match="UTF-8") as err:
        ingest_bytes(store, "bin.prom", data)
    assert err.value.line == 2


def test_real_scrape_through_store_with_gzip(store, fixtures, tmp_path):
    raw = (fixtures / "datadog_dcgm_t4_scrape.prom").read_bytes()
    gz = tmp_path / "scrape.prom.gz"
    gz.write_bytes(gzip.compress(raw))
    (res,) = ingest_path(store, gz, at_ms=1767225600000)
    assert (res.status, res.format, res.series, res.samples) == ("loaded", "prom-text", 23, 23)
    util = store.series("DCGM_FI_DEV_GPU_UTIL")
    assert util["uuid"].to_list() == ["GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"]
    assert util["hostname"].to_list() == ["424773df46e0"]
    # the same content uncompressed is the same source
    plain = tmp_path / "scrape.prom"
    plain.write_bytes(raw)
    (again,) = ingest_path(store, plain)
    assert again.status == "skipped"


@pytest.mark.parametrize("vectorised", [True, False])
def test_crlf_line_endings(vectorised):
    text = EDGE_TEXT.replace("\n", "\r\n")
    assert same(ours(text, openmetrics=False, vectorised=vectorised), reference(EDGE_TEXT, openmetrics=False))


def test_concatenated_openmetrics_scrapes(store):
    one = '# TYPE up gauge\nup{{job="a"}} {v} {t}\n# EOF\n'
    text = one.format(v=1, t="1767225600.000") + one.format(v=2, t="1767225615.000")
    res = ingest_bytes(store, "two.om", text.encode())
    assert (res.format, res.series, res.samples) == ("openmetrics", 1, 2)
    assert (res.first_ts_ms, res.last_ts_ms) == (1767225600000, 1767225615000)
