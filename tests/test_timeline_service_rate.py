"""Traffic from a request-rate gauge (issue 44, deliverable 6): a service's ``request_rate`` or a
QPS gauge loaded through a mapping is its traffic in the service timeline, over counting its
request log's rows or its histogram's count; the notes say which was used."""

from __future__ import annotations

import polars as pl

from analytics.events.pipeline import facts_notes
from analytics.ingest import ingest_bytes
from analytics.ingest.mapping import ColumnMapping
from analytics.timeline import service_timeline, timelines
from analytics.timeline.config import TimelineConfig
from analytics.timeline.provenance import latency_source_notes, request_log_summary, traffic_source_notes

T0 = 1_767_571_200  # 2026-01-05 00:00 UTC
MINUTES = 10
PODS = ("10.0.0.1", "10.0.0.2")


def _log() -> bytes:
    """One request a second (across both pods) for ten minutes, a second-scale latency."""
    rows = [f"{T0 + i},{PODS[i % 2]},imagegen,{2.0 + (i % 7) * 0.5}" for i in range(60 * MINUTES)]
    return ("timestamp,pod,service,latency_s\n" + "\n".join(rows) + "\n").encode()


def _qps() -> bytes:
    """Each pod's QPS gauge every minute: 4 and 6 requests a second, 10 in all."""
    rows = [f"{T0 + 60 * m},{pod},{4.0 if pod == PODS[0] else 6.0}" for m in range(MINUTES + 1) for pod in PODS]
    return ("timestamp_anon,container_ip,qps\n" + "\n".join(rows) + "\n").encode()


QPS = ColumnMapping(time="timestamp_anon", values=("qps",), metric="qps", labels={"container_ip": "pod"})


def _inner(tl: pl.DataFrame, service: str) -> pl.DataFrame:
    t = tl.filter(pl.col("service") == service).sort("ts")
    return t.slice(1, t.height - 2)  # the steps fully inside the data


def test_a_qps_gauge_of_pods_is_the_traffic_over_the_logs_row_count_and_the_notes_say_so(store) -> None:
    assert ingest_bytes(store, "latency.csv", _log()).status == "loaded"
    before = _inner(service_timeline(store, TimelineConfig(step_s=60)), "imagegen")
    assert before["rps"].to_list() == [1.0] * before.height  # the log's rows per second
    assert ingest_bytes(store, "qps.csv", _qps(), columns=QPS).status == "loaded"
    tl = _inner(service_timeline(store, TimelineConfig(step_s=60)), "imagegen")
    assert tl.height >= MINUTES - 2 and tl["rps"].to_list() == [10.0] * tl.height
    assert tl["p99_ms"].drop_nulls().len() == tl.height  # latency still from the log
    [note] = traffic_source_notes(store)
    assert note == ("imagegen: traffic from its request-rate gauge 'qps' (2 series summed), not from counting "
                    "its request log's rows")
    summary = request_log_summary(store)
    assert summary["traffic"].to_list() == ["gauge 'qps' (2 series summed)"]
    assert "not from counting the log's rows" in summary["note"][0]
    facts = timelines(store, TimelineConfig(step_s=60)).facts  # read in the timeline pass
    assert note in facts_notes(facts, pl.DataFrame({"service": ["imagegen"], "slo_metric": ["requests.latency_ms"]}),
                               {"imagegen": None})


def test_a_request_rate_gauge_with_a_service_label_wins_over_the_histogram_count(store) -> None:
    lines = ["# TYPE http_server_request_duration_seconds histogram", "# TYPE request_rate gauge"]
    for i in range(MINUTES + 1):
        ts, n = (T0 + 60 * i) * 1000, 60 * i
        for le in ("0.1", "+Inf"):
            lines.append(f'http_server_request_duration_seconds_bucket{{service="chat",pod="chat-0",le="{le}"}} '
                         f"{n} {ts}")
        lines.append(f'http_server_request_duration_seconds_count{{service="chat",pod="chat-0"}} {n} {ts}')
        lines.append(f'request_rate{{service="chat"}} 7 {ts}')
    assert ingest_bytes(store, "scrape.prom", ("\n".join(lines) + "\n").encode()).status == "loaded"
    tl = _inner(service_timeline(store, TimelineConfig(step_s=60)), "chat")
    assert tl["rps"].to_list() == [7.0] * tl.height  # not the histogram's 1 a second
    assert traffic_source_notes(store) == [
        "chat: traffic from its request-rate gauge 'request_rate' (1 series summed), not from its "
        "http_server_request_duration_seconds count"]


def test_without_a_gauge_nothing_is_said_and_the_log_notes_keep_traffic(store) -> None:
    assert ingest_bytes(store, "latency.csv", _log()).status == "loaded"
    assert traffic_source_notes(store) == []
    summary = request_log_summary(store)
    assert summary["traffic"].to_list() == ["request log"]
    assert latency_source_notes(summary.with_columns(pl.lit("h").alias("histogram")))[0].startswith(
        "imagegen: traffic and latency come from its request log")


def test_a_service_known_only_from_its_rate_gauge_has_traffic_and_no_latency(store) -> None:
    rows = [f"{T0 + 60 * m},{pod},imagegen,{4.0 if pod == PODS[0] else 6.0}"
            for m in range(MINUTES + 1) for pod in PODS]
    text = ("timestamp_anon,container_ip,app,qps\n" + "\n".join(rows) + "\n").encode()
    mapping = ColumnMapping(time="timestamp_anon", values=("qps",), metric="qps",
                            labels={"container_ip": "pod", "app": "service"})
    assert ingest_bytes(store, "qps.csv", text, columns=mapping).status == "loaded"
    tl = _inner(service_timeline(store, TimelineConfig(step_s=60)), "imagegen")
    assert tl.height >= MINUTES - 2 and tl["rps"].to_list() == [10.0] * tl.height
    assert tl["p99_ms"].null_count() == tl.height  # no latency signal: none made up
    [note] = traffic_source_notes(store)
    assert note == ("imagegen: traffic from its request-rate gauge 'qps' (2 series summed); it has no latency "
                    "signal (no histogram, no request log), so no p99 and no tail events")
