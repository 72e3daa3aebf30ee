"""Telegraf's InfluxDB line protocol as its own format: the nvidia_smi input onto dcgm-exporter's
names (its GPUs carry no pod, so they follow the unlabelled-GPU rule), and the prometheus input
in metric_version 1 and 2 read to the same series; a bad line is refused with its number."""

from __future__ import annotations

from pathlib import Path

import orjson
import polars as pl
import pytest

from analytics.errors import IngestError
from analytics.ingest import detect_format, ingest_bytes
from analytics.ingest.lineprotocol import split_line
from analytics.store import Store

HERE = Path(__file__).parent / "fixtures" / "telegraf"


def test_nvidia_smi_reads_onto_dcgm_exporters_names(store) -> None:
    data = (HERE / "nvidia_smi.lp").read_bytes()
    assert detect_format(data, "nvidia_smi.lp") == "influx-lp"
    r = ingest_bytes(store, "nvidia_smi.lp", data)
    assert r.status == "loaded" and "string or boolean field(s) skipped" in (r.note or "")
    util = store.series("DCGM_FI_DEV_GPU_UTIL")
    labels = sorted((orjson.loads(x) for x in util["labels"]), key=lambda lb: lb["gpu"])
    assert [lb["gpu"] for lb in labels] == ["0", "1"]
    assert labels[0]["UUID"] == "GPU-823bc202-6279-6f2c-d729-868a30f14d96"
    assert labels[0]["modelName"] == "NVIDIA H100 80GB HBM3" and labels[0]["Hostname"] == "gpu-node-1"
    assert {"DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE"} <= set(store.metrics()["metric"])
    totals = store.totals()
    assert totals["first_ts_ms"] == 1_767_571_200_000  # nanoseconds read as such


def test_its_gpus_without_a_pod_follow_the_unlabelled_rule(store) -> None:
    from analytics.timeline import TimelineConfig, pool_timeline

    ingest_bytes(store, "nvidia_smi.lp", (HERE / "nvidia_smi.lp").read_bytes())
    pool = pool_timeline(store, TimelineConfig(step_s=60))
    assert float(pool["gpus_total"].max()) == 2.0
    assert float(pool["gpus_inference"].fill_null(0).max()) == 0.0 and float(pool["gpus_batch"].fill_null(0).max()) == 0.0
    assert float((pool["gpus_idle"].fill_null(0) + pool["gpus_unknown"].fill_null(0)).max()) == 2.0


def _read(path: Path, tmp_path: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    with Store(tmp_path / f"{path.stem}.duckdb") as st:
        assert ingest_bytes(st, path.name, path.read_bytes()).status == "loaded"
        series = st.query("SELECT metric, labels FROM series ORDER BY metric, labels")
        samples = st.query("SELECT r.metric, r.labels, s.ts_ms, s.value FROM samples s JOIN series r "
                           "ON s.series_id = r.id ORDER BY 1, 2, 3")
    return series, samples


def test_prometheus_input_v1_and_v2_read_to_the_same_series(tmp_path) -> None:
    s1, v1 = _read(HERE / "prometheus_v1.lp", tmp_path)
    s2, v2 = _read(HERE / "prometheus_v2.lp", tmp_path)
    assert s1.equals(s2) and v1.equals(v2)
    les = sorted(orjson.loads(lb)["le"] for m, lb in s1.iter_rows() if m.endswith("_bucket"))
    assert les == ["+Inf", "0.1", "0.5", "2.5"]
    assert {"vllm:time_to_first_token_seconds_count", "vllm:time_to_first_token_seconds_sum",
            "vllm:num_requests_running"} <= set(s1["metric"])


def test_escapes_and_quoted_strings() -> None:
    m, tags, fields, ts = split_line(r'cpu\,x,host=a\ b,re\=gion=eu\,w msg="a \"quoted\", spaced",v=1.5,n=3i,ok=t 17')
    assert m == "cpu,x" and tags == {"host": "a b", "re=gion": "eu,w"}
    assert fields == {"msg": None, "v": 1.5, "n": 3.0, "ok": None} and ts == 17


@pytest.mark.parametrize("bad,said", [
    ("nvidia_smi,index=0 utilization_gpu=lots 1767571200000000000", "not a number"),
    ("nvidia_smi,index=0 utilization_gpu=80i soon", "not an integer"),
    ('nvidia_smi,index=0 name="unterminated 1767571200000000000', "unterminated"),
    ("nvidia_smi,index=0 utilization_gpu=80i", "without a timestamp"),
])
def test_a_bad_line_is_refused_with_its_number(store, bad: str, said: str) -> None:
    good = (HERE / "nvidia_smi.lp").read_text().splitlines()[:3]
    data = "\n".join([*good, bad]) + "\n"
    with pytest.raises(IngestError) as err:
        ingest_bytes(store, "gpus.lp", data.encode())
    assert "gpus.lp:4" in str(err.value) and said in str(err.value), err.value
    assert store.totals()["samples"] == 0
