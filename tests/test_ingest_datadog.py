"""Datadog's v1 query API JSON as its own format: the DCGM integration's names and Kubernetes tags
read back onto dcgm-exporter's, so the timelines and signals see a Datadog export as they see
dcgm-exporter's; bad input is refused with the JSON path, the store unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from analytics.cli import main
from analytics.errors import IngestError
from analytics.ingest import detect_format, ingest_bytes
from analytics.ingest.datadog import dcgm_name
from analytics.timeline import signal_report

FIXTURE = Path(__file__).parent / "fixtures" / "datadog_v1_query_dcgm.json"


def test_detected_and_read_onto_dcgm_exporters_names(store) -> None:
    data = FIXTURE.read_bytes()
    assert detect_format(data, FIXTURE.name) == "datadog-v1"
    r = ingest_bytes(store, FIXTURE.name, data)
    assert r.status == "loaded" and r.format == "datadog-v1", r
    assert "null point(s) skipped" in (r.note or "") and "dcgm-exporter's names" in (r.note or "")
    metrics = set(store.metrics()["metric"].to_list())
    assert {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "system.load.1"} <= metrics
    util = store.series("DCGM_FI_DEV_GPU_UTIL")
    labels = [orjson.loads(x) for x in util["labels"]]
    assert {(lb["namespace"], lb["pod"], lb["UUID"], lb["gpu"]) for lb in labels} == {
        ("inference", "chat-vllm-6d9c7b5f4-x2k4q", "gpu-0a1b", "0"), ("ml-training", "train-job-0", "gpu-0a1c", "1")}
    assert all(lb["container"] and lb["Hostname"] == "gpu-node-1" for lb in labels)
    report = dict(signal_report(store).select("signal", "found").iter_rows())
    assert report["gpu_activity"] and report["gpu_holders"]  # pod labels: GPUs have holders
    assert store.totals()["samples"] == 6 + 6 + 6 + 6 + 6 - 1  # the null point skipped


def test_the_pool_timeline_reads_a_datadog_export(store) -> None:
    from analytics.timeline import TimelineConfig, pool_timeline

    ingest_bytes(store, FIXTURE.name, FIXTURE.read_bytes())
    pool = pool_timeline(store, TimelineConfig(step_s=60))
    assert pool.height >= 1
    assert float(pool["gpus_total"].max()) == 2.0


def test_the_cli_loads_it_and_a_reload_changes_nothing(tmp_path, capsys) -> None:
    db = tmp_path / "dd.duckdb"
    assert main(["ingest", "--db", str(db), str(FIXTURE), "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(["ingest", "--db", str(db), str(FIXTURE), "--json"]) == 0
    second = json.loads(capsys.readouterr().out)
    as_text = json.dumps(first) + json.dumps(second)
    assert "datadog-v1" in as_text and "skipped" in json.dumps(second)


def _doc(**series_changes):
    doc = json.loads(FIXTURE.read_text())
    doc["series"][1].update(series_changes)
    return json.dumps(doc).encode()


@pytest.mark.parametrize("data,where,said", [
    (b'{"status": "error", "errors": ["Rate limit"], "series": []}', "status", "Datadog error"),
    (_doc(pointlist="x"), "series[1].pointlist", "list of [milliseconds, value]"),
    (_doc(pointlist=[["soon", 1.0]]), "series[1].pointlist[0][0]", "not a number of milliseconds"),
    (_doc(pointlist=[[1767571200000.0, "high"]]), "series[1].pointlist[0][1]", "is not a number"),
    (_doc(tag_set="pod_name:x"), "series[1].tag_set", "list of \"key:value\""),
    (_doc(pointlist=[[4102444800000.0 * 3, 1.0]]), "series[1].pointlist[0]", ""),  # implausible time
])
def test_bad_input_is_refused_with_its_path_and_the_store_unchanged(store, data, where, said) -> None:
    before = store.totals()
    if b'"series": []' in data:
        data = data.replace(b'"series": []', b'"series": [{"metric": "m", "pointlist": []}]')
    with pytest.raises(IngestError) as err:
        ingest_bytes(store, "dd.json", data)
    assert str(err.value).startswith("dd.json") and where in str(err.value) and said in str(err.value), err.value
    assert store.totals()["samples"] == before["samples"] and store.metrics().height == 0


def test_names_map_both_agent_generations() -> None:
    assert dcgm_name("dcgm.fb_used") == dcgm_name("dcgm.frame_buffer.used") == "DCGM_FI_DEV_FB_USED"
    assert dcgm_name("dcgm.gr_engine_active") == "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
    assert dcgm_name("dcgm.power_usage") == "DCGM_FI_DEV_POWER_USAGE"
    assert dcgm_name("dcgm.unknown_thing") == "dcgm.unknown_thing"  # kept, never guessed
