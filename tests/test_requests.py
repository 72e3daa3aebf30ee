"""Per-request logs (one row per request: gateway, access log, vLLM request log) as CSV, JSON lines
or Parquet: kept in their own table, the service timeline's traffic and p50/p95/p99 per step exactly
(numpy's linear interpolation), errors apart, logs winning over histograms where they cover a step,
hostile logs refused with file, line and column, the store unchanged; and the issue's "done when":
a warehouse CSV, a request log and a traffic trace give the signals, the rhythm and a planted event."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import orjson
import polars as pl
import pytest

from analytics.cli import main
from analytics.errors import IngestError
from analytics.ingest import detect_format, ingest_bytes
from analytics.ingest.mapping import load_mapping, mapping_toml
from analytics.timeline import service_timeline
from analytics.timeline.config import TimelineConfig
from analytics.timeline.provenance import request_log_summary
from analytics.timeline.service import LOG_LATENCY, LOG_TTFT
from analytics.slo import SloTable

T0 = 1_767_571_200  # 2026-01-05 00:00 UTC, a Monday


def _log(n: int = 4000, seed: int = 0, span_s: float = 3600.0, t0: int = T0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    ts = t0 + np.sort(rng.uniform(0, span_s, n))
    return pl.DataFrame({
        "timestamp": np.round(ts, 3), "service": np.where(rng.uniform(size=n) < 0.7, "chat", "search"),
        "latency_ms": np.round(rng.lognormal(3.0, 0.6, n), 3),
        "status": np.where(rng.uniform(size=n) < 0.03, 503, 200), "pod": [f"chat-7d9-{i % 4}" for i in range(n)]})


def _csv(frame: pl.DataFrame) -> bytes:
    buf = io.BytesIO()
    frame.write_csv(buf)
    return buf.getvalue()


def _numpy_steps(frame: pl.DataFrame, step_s: int = 60) -> pl.DataFrame:
    """What the service timeline must say per (service, step), computed with numpy alone."""
    ts_ms = np.round(frame["timestamp"].to_numpy() * 1000).astype(np.int64)
    end = -(-ts_ms // (step_s * 1000)) * (step_s * 1000)
    rows = []
    for service in sorted(set(frame["service"])):
        svc = frame["service"].to_numpy() == service
        for e in np.unique(end[svc]):
            m = svc & (end == e)
            ok = m & (frame["status"].to_numpy() < 500)
            p50, p95, p99 = np.percentile(frame["latency_ms"].to_numpy()[ok], [50, 95, 99])
            rows.append({"service": service, "ts_ms": int(e), "rps": m.sum() / step_s,
                         "error_rps": (m & ~ok).sum() / step_s, "p50_ms": p50, "p95_ms": p95, "p99_ms": p99})
    return pl.DataFrame(rows)


def _timeline(store) -> pl.DataFrame:
    tl = service_timeline(store, TimelineConfig(step_s=60))
    return tl.with_columns(pl.col("ts").dt.epoch("ms").alias("ts_ms"))


def test_a_gateway_csv_gives_exact_per_step_percentiles_and_errors_apart(store) -> None:
    log = _log()
    data = _csv(log)
    assert detect_format(data, "gateway.csv") == "requests-csv"
    r = ingest_bytes(store, "gateway.csv", data)
    assert r.status == "loaded" and r.format == "requests-csv" and r.extra["requests"] == log.height
    assert "4,000 requests of 2 services" in r.note
    # many requests share a millisecond: none collapses (the samples table would have)
    assert store.query("SELECT count(*) AS n FROM requests")["n"][0] == log.height
    got = _timeline(store)
    want = _numpy_steps(log)
    j = want.join(got, on=["service", "ts_ms"], how="left", suffix="_got")
    assert j.height == want.height and j["p99_ms_got"].null_count() == 0
    for c in ("rps", "error_rps", "p50_ms", "p95_ms", "p99_ms"):
        assert j[f"{c}_got"].to_list() == pytest.approx(j[c].to_list(), rel=1e-9), c
    assert set(got["slo_metric"]) == {LOG_LATENCY}
    assert got.filter(pl.col("service") == "chat")["replicas"].max() == 4  # the pods the log names
    # a re-load of the same file changes nothing
    assert ingest_bytes(store, "gateway.csv", data).status == "skipped"
    assert store.query("SELECT count(*) AS n FROM requests")["n"][0] == log.height


def test_json_lines_and_parquet_of_the_same_log_give_the_same_timeline(store, tmp_path) -> None:
    from analytics.store import Store

    log = _log(1500, seed=3)
    jsonl = b"\n".join(orjson.dumps(r) for r in log.to_dicts()) + b"\n"
    buf = io.BytesIO()
    log.write_parquet(buf)
    frames = []
    for name, data, fmt in (("a.csv", _csv(log), "requests-csv"), ("a.jsonl", jsonl, "requests-jsonl"),
                            ("a.parquet", buf.getvalue(), "requests-parquet")):
        with Store(":memory:") as st:
            r = ingest_bytes(st, name, data)
            assert (r.status, r.format) == ("loaded", fmt)
            frames.append(_timeline(st).drop("ts"))
    assert frames[0].equals(frames[1]) and frames[0].equals(frames[2])


def test_access_logs_of_real_tools_name_their_units(store) -> None:
    # nginx: $time_local and $request_time (seconds); Envoy: START_TIME and %DURATION% (ms)
    nginx = (b"time_local,upstream,request_time,status\n"
             b"05/Jan/2026:00:00:01 +0000,chat,0.120,200\n"
             b"05/Jan/2026:01:00:01 +0100,chat,0.080,502\n")
    envoy = (b"start_time,upstream_cluster,duration,response_code\n"
             b"2026-01-05T00:00:02.000Z,search,35,200\n")
    assert ingest_bytes(store, "nginx.csv", nginx).status == "loaded"
    assert ingest_bytes(store, "envoy.csv", envoy).status == "loaded"
    rows = store.query("SELECT ts_ms, service, latency_ms, error FROM requests ORDER BY service, latency_ms")
    assert rows.rows() == [((T0 + 1) * 1000, "chat", 80.0, True), ((T0 + 1) * 1000, "chat", 120.0, False),
                           ((T0 + 2) * 1000, "search", 35.0, False)]


def test_a_latency_without_a_unit_is_refused_not_guessed(store) -> None:
    data = b"timestamp,service,latency\n1767571200,chat,12\n"
    with pytest.raises(IngestError) as exc:
        ingest_bytes(store, "gw.csv", data)
    assert "gw.csv:1" in str(exc.value) and "--columns" in str(exc.value)


@pytest.mark.parametrize("data, said", [
    (b"timestamp,service,latency_ms\n1767571200,chat,12\n1767571201,chat,fast\n", ["gw.csv:3", "'latency_ms'", "'fast'"]),
    (b"timestamp,service,latency_ms\n1767571200,chat,12\n1767571201,chat,-4\n", ["gw.csv:3", "negative"]),
    (b"timestamp,service,latency_ms\n2026-01-05T00:00:00Z,chat,12\nyesterday,chat,3\n",
     ["gw.csv:3", "'timestamp'", "ISO-8601"]),
    (b"timestamp,service,latency_ms\n1767571200,chat,12\n99999999999999,chat,3\n", ["gw.csv:3"]),
    (b"timestamp,service,latency_ms\n1767571200,,12\n", ["gw.csv:2", "'service'", "service name"]),
    (b"timestamp,service,latency_ms\n1767571200,chat,12\n1767571201,ch\x00at,3\n", ["gw.csv:3", "NUL"]),
])
def test_a_hostile_log_is_refused_with_file_line_and_column_store_unchanged(store, data, said) -> None:
    assert ingest_bytes(store, "good.csv", _csv(_log(50))).status == "loaded"
    before = store.query("SELECT count(*) AS n FROM requests")["n"][0]
    with pytest.raises(IngestError) as exc:
        ingest_bytes(store, "gw.csv", data)
    for s in said:
        assert s in str(exc.value), str(exc.value)
    assert store.query("SELECT count(*) AS n FROM requests")["n"][0] == before
    assert store.sources().filter(pl.col("status") == "loaded").height == 1


def test_a_bad_json_line_is_named(store) -> None:
    data = b'{"timestamp": 1767571200, "service": "chat", "latency_ms": 3}\n\n{"timestamp": 1767571201, "service"\n'
    with pytest.raises(IngestError) as exc:
        ingest_bytes(store, "log.jsonl", data)
    assert "log.jsonl:3" in str(exc.value)


def test_a_per_request_id_as_service_is_refused(store, monkeypatch) -> None:
    monkeypatch.setenv("TIDELENS_MAX_SERVICES_PER_SOURCE", "10")
    log = _log(200).with_columns(pl.format("req-{}", pl.int_range(0, 200)).alias("service"))
    with pytest.raises(IngestError, match="more than 10 services"):
        ingest_bytes(store, "gw.csv", _csv(log))
    assert store.totals()["requests"] == 0


MAPPING = """[time]
column = "when"
unit = "ms"
[requests]
latency = "elapsed"
latency_unit = "s"
service_name = "chat-vllm"
status = "code"
"""


def test_a_mapping_reads_a_log_whose_header_is_unknown(store, tmp_path) -> None:
    (tmp_path / "m.toml").write_text(MAPPING)
    m = load_mapping(tmp_path / "m.toml")
    assert m.layout == "requests"
    data = b"when,elapsed,code\n1767571200000,0.25,200\n1767571200000,0.5,500\n"
    r = ingest_bytes(store, "odd.csv", data, columns=m)
    assert r.status == "loaded" and m.digest() in r.note
    assert store.query("SELECT service, latency_ms, error FROM requests ORDER BY 2").rows() == [
        ("chat-vllm", 250.0, False), ("chat-vllm", 500.0, True)]
    # the mapping round-trips through its TOML, and is part of the source's identity
    (tmp_path / "again.toml").write_text(mapping_toml(m))
    assert load_mapping(tmp_path / "again.toml") == m
    other = load_mapping_text(tmp_path, MAPPING.replace('latency_unit = "s"', 'latency_unit = "ms"'))
    assert other.digest() != m.digest() and ingest_bytes(store, "odd.csv", data, columns=other).status == "loaded"
    # a mapping naming a column the log lacks: refused with the file and line, nothing loaded
    bad = load_mapping_text(tmp_path, MAPPING.replace('"elapsed"', '"took"'))
    before = store.totals()["requests"]
    with pytest.raises(IngestError, match=r"odd\.csv:1: .*no column 'took'"):
        ingest_bytes(store, "odd.csv", data, columns=bad)
    assert store.totals()["requests"] == before


def load_mapping_text(tmp_path: Path, text: str):
    p = tmp_path / f"m{abs(hash(text))}.toml"
    p.write_text(text)
    return load_mapping(p)


def _histogram_store(store, t0: int = T0, minutes: int = 60) -> None:
    """A real exposition of service chat's histogram: every minute 60 requests in (0.05, 0.1] s."""
    lines = ["# TYPE http_server_request_duration_seconds histogram"]
    for i in range(minutes + 1):
        n = 60 * i
        ts = (t0 + 60 * i) * 1000
        for le, v in (("0.05", 0), ("0.1", n), ("+Inf", n)):
            lines.append(f'http_server_request_duration_seconds_bucket{{service="chat",pod="chat-7d9-0",'
                         f'namespace="web",le="{le}"}} {v} {ts}')
        lines.append(f'http_server_request_duration_seconds_count{{service="chat",pod="chat-7d9-0",'
                     f'namespace="web"}} {n} {ts}')
    assert ingest_bytes(store, "scrape.prom", ("\n".join(lines) + "\n").encode()).status == "loaded"


def test_logs_win_over_histograms_where_they_cover_a_step_and_the_pages_say_so(store) -> None:
    _histogram_store(store)
    hist_only = _timeline(store)
    # a request log of chat for the second half hour only
    log = _log(3000, seed=5, span_s=1700, t0=T0 + 1900).with_columns(pl.lit("chat").alias("service"))
    assert ingest_bytes(store, "gateway.csv", _csv(log)).status == "loaded"
    tl = _timeline(store)
    lo = -(-(T0 + 1900) * 1000 // 60_000) * 60_000
    inside = tl.filter(pl.col("ts_ms") >= lo)
    outside = tl.filter(pl.col("ts_ms") < lo)
    assert set(inside["slo_metric"]) == {LOG_LATENCY}
    assert set(outside["slo_metric"].drop_nulls()) == {"http_server_request_duration_seconds"}
    # outside the log's span the histogram's numbers stand as they were
    same = outside.join(hist_only, on=["service", "ts_ms"], suffix="_h")
    assert same.height == outside.height and (same["p99_ms"] == same["p99_ms_h"]).all()
    want = _numpy_steps(log)
    j = want.join(inside, on=["service", "ts_ms"])
    assert j.height == want.height and j["p99_ms_right"].to_list() == pytest.approx(j["p99_ms"].to_list())
    # the Data page's summary and the Events page's notes say which source won
    summary = request_log_summary(store)
    assert summary.row(0, named=True)["histogram"] == "http_server_request_duration_seconds"
    assert "used only outside that span" in summary["note"][0]
    from analytics.events.config import EventsConfig
    from analytics.events.pipeline import analyse_store

    notes = analyse_store(store, EventsConfig(), slos=SloTable.from_ms({"chat": 200.0})).notes
    assert any("chat: traffic and latency come from its request log" in n for n in notes)


def test_an_llm_log_with_ttft_takes_its_percentiles_from_time_to_first_token(store) -> None:
    rows = [{"timestamp": T0 + i, "model": "llama", "ttft_s": 0.1 + i / 1000, "e2e_latency_s": 2.0 + i / 100,
             "status": 200} for i in range(50)]
    data = b"\n".join(orjson.dumps(r) for r in rows)
    r = ingest_bytes(store, "vllm-requests.jsonl", data)
    assert r.format == "requests-jsonl" and "time to first token" in r.note
    tl = _timeline(store)
    assert set(tl["slo_metric"]) == {LOG_TTFT}
    first = tl.row(0, named=True)
    want = np.percentile([0.1 + i / 1000 for i in range(50) if (T0 + i) * 1000 <= first["ts_ms"]], 99) * 1000
    assert first["p99_ms"] == pytest.approx(want)


def _day_shape(hours: np.ndarray) -> np.ndarray:
    """Traffic per hour of day: a trough at 04:00, a peak at 15:00 (not a symmetric sine)."""
    return 1.0 + 4.0 * np.exp(-((hours - 15.0) ** 2) / 18.0) + 0.3 * np.cos(2 * np.pi * (hours - 4) / 24)


def test_done_when_three_files_give_signals_rhythm_and_the_planted_event(tmp_path, capsys) -> None:
    """A warehouse CSV of per-container GPU activity, a per-request log and a traffic trace, loaded
    the way the Data page loads uploads: the signals are found, the rhythm's peak and trough hours
    are within 1 h of the data's own hourly means, and the event planted in the log is found."""
    from analytics.access import LOCAL_OPERATOR
    from pages._store import load_upload

    rng = np.random.default_rng(11)
    days, t0 = 4, T0
    # 1) the request log: 4 days of chat, traffic following the day, one planted 25-minute tail
    minute = np.arange(days * 1440)
    rate = _day_shape((minute % 1440) / 60.0) * 1.5  # requests per second
    counts = rng.poisson(rate * 60)
    ts = np.concatenate([t0 + 60 * m + np.sort(rng.uniform(0, 60, c)) for m, c in zip(minute, counts)])
    lat = rng.lognormal(np.log(18.0), 0.3, ts.size)
    planted = (t0 + 2 * 86400 + 10 * 3600, t0 + 2 * 86400 + 10 * 3600 + 25 * 60)
    lat[(ts >= planted[0]) & (ts < planted[1])] *= 12
    log = pl.DataFrame({"timestamp": np.round(ts, 3), "service": "chat", "latency_ms": np.round(lat, 2),
                        "status": 200})
    # 2) the warehouse CSV: per-container duty cycle, busier when traffic is
    wh_t = t0 + 60 * minute[::5]
    warehouse = pl.DataFrame({"timestamp_anon": np.repeat(wh_t, 2), "container_ip": ["10.0.0.1", "10.0.0.2"] * wh_t.size,
                              "duty_cycle": np.round(np.repeat(rate[::5] / rate.max() * 90, 2), 2)})
    mapping = tmp_path / "m.toml"
    mapping.write_text('[time]\ncolumn = "timestamp_anon"\nunit = "s"\n[metric]\nname = "duty_cycle"\n'
                       '[values]\ncolumns = ["duty_cycle"]\n[labels]\ncontainer_ip = "pod"\n'
                       '[signals.duty_cycle]\nmetric = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"\nscale = 0.01\n')
    # 3) a traffic trace of another model (a rate per minute)
    trace = pl.DataFrame({"timestamp": t0 + 60 * minute, "metric": "request_rate", "value": np.round(rate * 3, 3),
                          "model": "embed"})
    db = tmp_path / "s.duckdb"
    outs = [load_upload(db, "requests.csv", _csv(log), None, who=LOCAL_OPERATOR),
            load_upload(db, "gpu_duty.csv", _csv(warehouse), None, columns=load_mapping(mapping), who=LOCAL_OPERATOR),
            load_upload(db, "embed-rate.csv", _csv(trace), None, who=LOCAL_OPERATOR)]
    assert [o.status for o in outs] == ["loaded"] * 3, [o.message for o in outs]

    assert main(["signals", "--db", str(db), "--json"]) == 0
    found = {r["signal"]: r["found"] for r in orjson.loads(capsys.readouterr().out)["signals"]}
    assert found["gpu_activity"] and found["request_rate"] and found["request_latency"]

    from analytics.events.config import EventsConfig
    from analytics.events.pipeline import analyse_store
    from analytics.rhythm.digest import rhythm_report
    from analytics.store import Store

    with Store(db, read_only=True) as st:
        tl = service_timeline(st, TimelineConfig(step_s=60)).filter(pl.col("service") == "chat")
        hourly = tl.group_by(pl.col("ts").dt.hour().alias("h")).agg(pl.col("rps").mean()).sort("h")
        peak_h = int(hourly.sort("rps")["h"][-1])
        trough_h = int(hourly.sort("rps")["h"][0])
        (rh,) = rhythm_report(st, signals=["rps:chat"])
        assert rh.summary is not None, rh.error
        assert min(abs(rh.summary.peak_hour - peak_h), 24 - abs(rh.summary.peak_hour - peak_h)) <= 1
        assert min(abs(rh.summary.trough_hour - trough_h), 24 - abs(rh.summary.trough_hour - trough_h)) <= 1
        events = analyse_store(st, EventsConfig(), slos=SloTable.from_ms({"chat": 100.0})).events
    hits = [e for e in events if e.service == "chat" and e.start_ms < planted[1] * 1000
            and e.end_ms > planted[0] * 1000]
    assert len(hits) == 1 and abs(hits[0].start_ms - planted[0] * 1000) <= 120_000
    assert abs(hits[0].end_ms - planted[1] * 1000) <= 120_000
    assert len([e for e in events if e.service == "chat"]) == 1  # nothing else is a tail


def test_the_data_page_loads_a_request_log_and_events_say_where_latency_came_from(tmp_path, monkeypatch) -> None:
    from apptest_helpers import isolate, open_store_page, tables

    isolate(monkeypatch, tmp_path)
    db = tmp_path / "mine.duckdb"
    from analytics.store import Store

    with Store(db) as st:
        _histogram_store(st)
    log = _log(2000, seed=7, span_s=3000, t0=T0 + 300).with_columns(pl.lit("chat").alias("service"))
    at = open_store_page("pages/data.py", db)
    at.file_uploader(key="upload_files").set_value([("gateway.csv", _csv(log), "text/csv")]).run()
    assert not at.exception, [e.value for e in at.exception]
    uploads = next(df.value for df in tables(at) if "file" in df.value.columns and "status" in df.value.columns)
    assert list(uploads["status"]) == ["loaded"] and "2,000 requests of 1 service" in uploads["message"][0]
    logs = next(df.value for df in tables(at) if "histogram" in df.value.columns)
    assert list(logs["service"]) == ["chat"] and list(logs["requests"]) == [2000]
    assert list(logs["histogram"]) == ["http_server_request_duration_seconds"]
    at.switch_page("pages/events.py").run()
    assert not at.exception, [e.value for e in at.exception]
    from apptest_helpers import shown

    assert any("chat: traffic and latency come from its request log" in shown(c.value) for c in at.caption)


def _map_request_log(tmp_path, monkeypatch, name: str, data: bytes, time: tuple[str, str],
                     latency: tuple[str, str], service: str, **more: str):
    """The Data page's "Your own table" tab mapping ``data`` as a request log, as a user fills the
    form (``more``: further selectboxes and text inputs by key), then the load; returns the store."""
    from apptest_helpers import isolate, open_store_page

    isolate(monkeypatch, tmp_path)
    db = tmp_path / f"{Path(name).stem}.duckdb"
    at = open_store_page("pages/data.py", db, tab="Your own table")
    at.file_uploader(key="map_file").set_value([(name, data, "text/csv")]).run()
    at.radio(key="map_kind").set_value("one request").run()
    at.selectbox(key="map_time").set_value(time[0])
    at.selectbox(key="map_unit").set_value(time[1])
    at.selectbox(key="map_req_latency").set_value(latency[0])
    at.selectbox(key="map_req_unit").set_value(latency[1])
    at.selectbox(key="map_req_service").set_value(service).run()
    for key, value in more.items():
        (at.text_input if key.endswith("_values") else at.selectbox)(key=key).set_value(value).run()
    at.button(key="map_load_go").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("Mapping saved" in s.value for s in at.success), [e.value for e in at.error]
    return db


def test_the_data_page_maps_a_request_log_with_an_unknown_header(tmp_path, monkeypatch) -> None:
    data = b"when,took,upstream,code\n1767571200000,0.25,chat,200\n1767571201000,0.5,chat,503\n"
    db = _map_request_log(tmp_path, monkeypatch, "mine.csv", data, ("when", "ms"), ("took", "s"), "upstream",
                          map_req_status="code")
    from analytics.store import Store

    with Store(db, read_only=True) as st:
        assert st.query("SELECT service, latency_ms, error FROM requests ORDER BY 2").rows() == [
            ("chat", 250.0, False), ("chat", 500.0, True)]
    saved = load_mapping(db.with_name("mine.duckdb.columns.toml"))
    assert saved.layout == "requests" and saved.requests.latency == "took"
    # the next table with a request log's own header is guessed as one
    from analytics.ingest.mapping import guess_mapping

    g = guess_mapping(pl.DataFrame({"time_local": ["05/Jan/2026:00:00:01 +0000"], "request_time": ["0.1"]}))
    assert g.layout == "requests" and g.time_unit == "clf" and g.requests.latency_unit == "s"


def test_the_data_page_maps_a_success_column_in_words(tmp_path, monkeypatch) -> None:
    """A trace's ``predict_status`` (SUCCEED / FAILED): without its words every request reads as
    failed; the form's success values name them, and the saved mapping keeps them."""
    data = (b"ts,latency_s,svc,predict_status\n1767571200,20.5,imagegen,SUCCEED\n"
            b"1767571201,31.0,imagegen,FAILED\n1767571202,45.0,imagegen,SUCCEED\n")
    db = _map_request_log(tmp_path, monkeypatch, "trace.csv", data, ("ts", "s"), ("latency_s", "s"), "svc",
                          map_req_success="predict_status", map_req_success_values="SUCCEED")
    from analytics.store import Store

    with Store(db, read_only=True) as st:
        assert st.query("SELECT latency_ms, error FROM requests ORDER BY 1").rows() == [
            (20500.0, False), (31000.0, True), (45000.0, False)]
    saved = load_mapping(db.with_name("trace.duckdb.columns.toml"))
    assert saved.requests.success == "predict_status" and saved.requests.success_values == ("SUCCEED",)


def test_the_cli_loads_a_log_and_counts_its_requests(tmp_path, capsys) -> None:
    log = tmp_path / "gateway.csv"
    log.write_bytes(_csv(_log(300)))
    db = tmp_path / "s.duckdb"
    assert main(["ingest", "--db", str(db), str(log)]) == 0
    out = capsys.readouterr().out
    assert "requests-csv" in out and "1 loaded, 0 skipped, 0 failed: 0 series, 0 samples, 300 requests" in out
    assert main(["ingest", "--db", str(db), "--json", str(log)]) == 0
    again = orjson.loads(capsys.readouterr().out)
    assert again["requests"] == 0 and again["sources"][0]["status"] == "skipped"


def test_a_view_outside_the_logs_span_keeps_the_histogram_and_a_logs_only_store_opens_every_page(
        store, tmp_path, monkeypatch) -> None:
    _histogram_store(store)
    log = _log(500, seed=9, span_s=600, t0=T0 + 3000).with_columns(pl.lit("chat").alias("service"))
    assert ingest_bytes(store, "g.csv", _csv(log)).status == "loaded"
    zoom = service_timeline(store, TimelineConfig(step_s=60, start_ms=T0 * 1000, end_ms=(T0 + 1200) * 1000))
    assert zoom.height == 21 and set(zoom["slo_metric"]) == {"http_server_request_duration_seconds"}
    coarse = service_timeline(store, TimelineConfig(step_s=300))
    assert coarse["slo_metric"].to_list()[-2:] == [LOG_LATENCY, LOG_LATENCY]

    from apptest_helpers import isolate, open_store_page

    from analytics.store import Store

    isolate(monkeypatch, tmp_path)
    db = tmp_path / "logs.duckdb"
    with Store(db) as st:
        assert ingest_bytes(st, "g.csv", _csv(_log(3000, seed=2, span_s=7200))).status == "loaded"
    at = open_store_page("pages/overview.py", db)
    assert not at.exception, [e.value for e in at.exception]
    for page in ("data", "rhythm", "events", "whatif", "chargeback"):
        at.switch_page(f"pages/{page}.py").run()
        assert not at.exception, (page, [e.value for e in at.exception])


def test_a_grafana_panel_of_latency_stays_a_grafana_export() -> None:
    # Grafana's CSV of a latency panel is series joined by time ("Time" first), not one row per request
    assert detect_format(b"Time,latency_ms\n2026-01-05 00:00:00,12.5\n", "panel.csv") == "csv-grafana"
    assert detect_format(b"time,latency_ms,service\n2026-01-05T00:00:00Z,12.5,chat\n", "gw.csv") == "requests-csv"


def test_a_rate_gauge_alone_is_found_as_traffic(store) -> None:
    # a traffic trace (a request_rate gauge, e.g. ServeGen's) is traffic without any request log
    from analytics.timeline import signal_report

    trace = b"timestamp,metric,value,model\n1767571200,request_rate,3.5,embed\n1767571260,request_rate,4.0,embed\n"
    assert ingest_bytes(store, "embed-rate.csv", trace).status == "loaded"
    rep = {r["signal"]: r for r in signal_report(store).iter_rows(named=True)}
    assert rep["request_rate"]["found"] and rep["request_rate"]["metrics_found"] == "request_rate"
    assert not rep["request_latency"]["found"] and rep["request_latency"]["cost_if_missing"]
