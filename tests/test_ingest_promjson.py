"""Prometheus HTTP API JSON ingest: envelopes, matrix/vector/scalar, the large-file path, errors."""

from __future__ import annotations

import math

import orjson
import pytest

from analytics.errors import IngestError
from analytics.ingest import detect_format, ingest_bytes, ingest_path
from analytics.ingest.promjson import parse_prom_json
from test_ingest_exposition import ListSink


def load(data: bytes, *, large: bool) -> ListSink:
    sink = ListSink()
    parse_prom_json(data, sink, "q.json", fast_path_bytes=0 if large else 1 << 40)
    return sink


def rows(sink: ListSink) -> list:
    return sorted(((n, l, t, "nan" if math.isnan(v) else v) for n, l, t, v in sink.rows()), key=repr)


def expected(result: list) -> list:
    out = []
    for elem in result:
        labels = dict(elem["metric"])
        name = labels.pop("__name__")
        for ts, v in elem["values"]:
            out.append((name, tuple(sorted(labels.items())), round(ts * 1000), float(v)))
    return sorted(((n, l, t, "nan" if math.isnan(v) else v) for n, l, t, v in out), key=repr)


@pytest.fixture
def real_result(fixtures) -> list:
    return orjson.loads((fixtures / "prom_query_range_up_201907281200.json").read_bytes())


@pytest.mark.parametrize("large", [False, True])
def test_real_bare_result_array(fixtures, real_result, large):
    data = (fixtures / "prom_query_range_up_201907281200.json").read_bytes()
    assert detect_format(data) == "prom-json"
    got = rows(load(data, large=large))
    assert len(got) == 6839
    assert got == expected(real_result)


@pytest.mark.parametrize("large", [False, True])
@pytest.mark.parametrize("indent", [False, True])
def test_envelope_compact_and_pretty(real_result, large, indent):
    doc = {"status": "success", "data": {"resultType": "matrix", "result": real_result}}
    data = orjson.dumps(doc, option=orjson.OPT_INDENT_2 if indent else 0)
    assert rows(load(data, large=large)) == expected(real_result)


@pytest.mark.parametrize("large", [False, True])
def test_special_values_and_key_order(large):
    data = (b'{"status":"success","data":{"resultType":"matrix","result":['
            b'{"values":[[1.5,"NaN"],[2,"+Inf"]],"metric":{"__name__":"a","values":"x"}},'
            b'{"metric":{"__name__":"b","le":"+Inf"},"values":[[3.001,"-Inf"],[4,"1e-3"]]},'
            b'{"metric":{"__name__":"c"},"values":[]}]}}')
    got = rows(load(data, large=large))
    assert got == sorted([("a", (("values", "x"),), 1500, "nan"), ("a", (("values", "x"),), 2000, math.inf),
                          ("b", (("le", "+Inf"),), 3001, -math.inf), ("b", (("le", "+Inf"),), 4000, 0.001)],
                         key=repr)


def test_vector_and_scalar(store):
    vec = b'{"status":"success","data":{"resultType":"vector","result":[' \
          b'{"metric":{"__name__":"up","job":"a"},"value":[1767225600,"1"]},' \
          b'{"metric":{"job":"b"},"value":[1767225600.5,"0"]}]}}'
    res = ingest_bytes(store, "up_now.json", vec)
    assert (res.status, res.series, res.samples) == ("loaded", 2, 2)
    assert "named 'up_now'" in res.note  # a series without __name__ is named after the file
    sc = b'{"status":"success","data":{"resultType":"scalar","result":[1767225600,"42"]}}'
    res = ingest_bytes(store, "answer.json", sc)
    assert (res.series, res.samples, res.first_ts_ms) == (1, 1, 1767225600000)


def test_error_envelope_message(store):
    data = b'{"status":"error","errorType":"bad_data","error":"parse error at char 5"}'
    with pytest.raises(IngestError) as err:
        ingest_bytes(store, "err.json", data)
    assert str(err.value).startswith("err.json at status: the saved response is a Prometheus error (bad_data")


@pytest.mark.parametrize("large", [False, True])
def test_native_histogram_refused_with_path(large):
    data = (b'{"status":"success","data":{"resultType":"matrix","result":['
            b'{"metric":{"__name__":"a"},"values":[[1,"1"]]},'
            b'{"metric":{"__name__":"h"},"histograms":[[1,{"count":"2","sum":"1","buckets":[]}]]}]}}')
    with pytest.raises(IngestError) as err:
        load(data, large=large)
    assert "native histograms" in str(err.value)
    assert err.value.where == "data.result[1].histograms"


@pytest.mark.parametrize("large", [False, True])
def test_bad_value_names_json_path(large):
    data = (b'{"status":"success","data":{"resultType":"matrix","result":['
            b'{"metric":{"__name__":"a"},"values":[[1,"1"]]},'
            b'{"metric":{"__name__":"b"},"values":[[1,"1"],[2,"oops"]]}]}}')
    with pytest.raises(IngestError) as err:
        load(data, large=large)
    assert err.value.where == "data.result[1].values[1]"
    assert "q.json at data.result[1].values[1]:" in str(err.value)


def test_invalid_json_names_line(store):
    with pytest.raises(IngestError) as err:
        ingest_bytes(store, "cut.json", b'{"status":"success",\n"data":{"resultType":"matrix","result":[{"metric"')
    assert err.value.line == 2 and "invalid JSON" in str(err.value)


def test_real_file_through_store(store, fixtures):
    (res,) = ingest_path(store, fixtures / "prom_query_range_up_201907281200.json")
    assert (res.status, res.format, res.series, res.samples) == ("loaded", "prom-json", 9, 6839)
    assert res.first_ts_ms == 1564308004347
    assert set(store.series("up")["hostname"].to_list()) >= {
        "metrics-exporter-thoth-frontend-stage.cloud.paas.psi.redhat.com:80"}
