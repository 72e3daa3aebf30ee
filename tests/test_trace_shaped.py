"""A small store shaped like a published production serving trace (issue 44, deliverable 10):
pod-level GPU duty-cycle and memory tables with no device column, a per-container QPS gauge, a
per-container latency log with second-scale values and SUCCEED/FAILED words, each CSV inside a
.tar.gz with a macOS ``._`` twin; loaded through mappings as a user would, by the CLI and by the
Data page's upload function, then read: each pod its own GPU, the gauge the traffic, the words right."""

from __future__ import annotations

import io
import json
import tarfile

import polars as pl
import pytest

from analytics.cli import main
from analytics.ingest.mapping import load_mapping
from analytics.store import TIME_WINDOW_ENV, Store
from analytics.timeline import TimelineConfig, pool_timeline, service_timeline, shared_gpu_keys

T0 = 1_767_571_200  # 2026-01-05 00:00 UTC
MINUTES = 12
SERVICES = {"sdxl": [f"10.2.0.{i}" for i in range(7)], "flux": [f"10.2.1.{i}" for i in range(7)]}
PODS = [p for pods in SERVICES.values() for p in pods]
QPS_PER_POD = 0.5

TIME = '[time]\ncolumn = "timestamp_anon"\nunit = "s"\n'
DEVICE = '[labels]\ncontainer_ip = "pod"\n[device]\nper = "pod"\n'
MAPPINGS = {
    "duty": TIME + '[values]\ncolumns = ["duty_cycle"]\n[metric]\nname = "duty_cycle"\n' + DEVICE
    + '[signals.duty_cycle]\nmetric = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"\nscale = 0.01\n',
    "memory": TIME + '[values]\ncolumns = ["memory_used"]\n[metric]\nname = "memory_used"\n' + DEVICE
    + '[signals.memory_used]\nmetric = "DCGM_FI_DEV_FB_USED"\nscale = 1.0\n',
    "qps": TIME + '[values]\ncolumns = ["qps"]\n[metric]\nname = "qps"\n[labels]\ncontainer_ip = "pod"\n',
    "latency": TIME + '[requests]\nlatency = "rt"\nlatency_unit = "s"\nservice = "model"\npod = "container_ip"\n'
    'success = "predict_status"\n',
}


@pytest.fixture(autouse=True)
def default_window(monkeypatch):
    monkeypatch.delenv(TIME_WINDOW_ENV, raising=False)


def _csv(rows: list[dict]) -> bytes:
    buf = io.BytesIO()
    pl.DataFrame(rows).write_csv(buf)
    return buf.getvalue()


def _tables() -> dict[str, bytes]:
    minutes = range(MINUTES + 1)
    duty = [{"timestamp_anon": T0 + 60 * m, "container_ip": p, "duty_cycle": 20 + i} for m in minutes
            for i, p in enumerate(PODS)]
    mem = [{"timestamp_anon": T0 + 60 * m, "container_ip": p, "memory_used": 30000 + i} for m in minutes
           for i, p in enumerate(PODS)]
    qps = [{"timestamp_anon": T0 + 60 * m, "container_ip": p, "qps": QPS_PER_POD} for m in minutes for p in PODS]
    lat, n = [], 0
    for s in range(0, 60 * MINUTES, 10):  # each pod one request every 10 s: 0.1/s, not the gauge's 0.5
        for model, pods in SERVICES.items():
            for p in pods:
                lat.append({"timestamp_anon": T0 + s, "container_ip": p, "model": model,
                            "rt": 15.0 + (n * 7.3) % 75.0, "predict_status": "FAILED" if n % 5 == 0 else "SUCCEED"})
                n += 1
    return {"duty": _csv(duty), "memory": _csv(mem), "qps": _csv(qps), "latency": _csv(lat)}


def _archive(name: str, data: bytes) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for member, body in ((f"pod_{name}_anon.csv", data), (f"._pod_{name}_anon.csv", b"\x00\x05\x16\x07")):
            info = tarfile.TarInfo(member)
            info.size = len(body)
            tf.addfile(info, io.BytesIO(body))
    return buf.getvalue()


def _check(db) -> None:
    with Store(db, read_only=True) as st:
        cfg = TimelineConfig(step_s=60)
        pool = pool_timeline(st, cfg)
        assert pool["gpus_total"].max() == len(PODS)  # each pod its own GPU
        assert shared_gpu_keys(st).height == 0
        svc = service_timeline(st, cfg)
        for model, pods in SERVICES.items():
            inner = svc.filter(pl.col("service") == model).sort("ts").slice(1, MINUTES - 2)
            assert inner["rps"].to_list() == pytest.approx([QPS_PER_POD * len(pods)] * inner.height)  # the gauge
            assert inner["p99_ms"].drop_nulls().len() == inner.height  # successes read as successes
            assert inner["p99_ms"].min() > 15_000  # second-scale latency, in ms
        total, errors = st.query("SELECT count(*) AS n, count(*) FILTER (WHERE error) AS e FROM requests").row(0)
        assert errors == -(-total // 5)  # every fifth request FAILED, the rest SUCCEED


def test_the_trace_loads_from_its_archives_through_the_cli(tmp_path, capsys) -> None:
    db = tmp_path / "trace.duckdb"
    for name, data in _tables().items():
        (tmp_path / f"{name}.toml").write_text(MAPPINGS[name])
        (tmp_path / f"{name}.tar.gz").write_bytes(_archive(name, data))
        assert main(["ingest", "--db", str(db), "--json", "--columns", str(tmp_path / f"{name}.toml"),
                     str(tmp_path / f"{name}.tar.gz")]) == 0
        out = json.loads(capsys.readouterr().out)
        by = {s["name"]: s for s in out["sources"]}
        assert by[f"{tmp_path / name}.tar.gz!pod_{name}_anon.csv"]["status"] == "loaded", out
        assert "1 macOS metadata member(s) skipped" in by[f"{tmp_path / name}.tar.gz"]["note"]
        assert "share one GPU key" not in json.dumps(out)
    _check(db)
    assert main(["signals", "--db", str(db), "--json"]) == 0
    signals = json.loads(capsys.readouterr().out)
    assert signals["shared_gpu_keys"] == []
    # every GPU carries its pod: none is counted as without a pod label (it said 14, then 144)
    assert [(r["gpus"], r["unlabelled_gpus"]) for r in signals["unlabelled_gpus"]] == [(len(PODS), 0)]


def test_the_trace_loads_from_its_archives_through_the_data_pages_upload(tmp_path) -> None:
    from analytics.access import LOCAL_OPERATOR
    from pages._store import load_uploads

    db = tmp_path / "trace.duckdb"
    for name, data in _tables().items():
        (tmp_path / f"{name}.toml").write_text(MAPPINGS[name])
        outs = load_uploads(db, f"{name}.tar.gz", _archive(name, data), None,
                            columns=load_mapping(tmp_path / f"{name}.toml"), who=LOCAL_OPERATOR)
        assert [o.status for o in outs] == ["loaded", "skipped"], outs
    _check(db)


def test_the_data_pages_mapping_form_previews_and_loads_a_table_inside_a_tar_gz(tmp_path, monkeypatch) -> None:
    from apptest_helpers import isolate, map_pod_duty_cycle, open_store_page

    isolate(monkeypatch, tmp_path)
    db = tmp_path / "mine.duckdb"
    at = open_store_page("pages/data.py", db, tab="Your own table")
    at.file_uploader(key="map_file").set_value([("duty.tar.gz", _archive("duty", _tables()["duty"]),
                                                 "application/gzip")]).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.selectbox(key="map_time").value == "timestamp_anon"  # the member's table, previewed
    map_pod_duty_cycle(at)
    assert any("1 loaded, 1 skipped member" in s.value and "each pod its own GPU" in s.value
               for s in at.success), ([s.value for s in at.success], [e.value for e in at.error],
                                 [w.value for w in at.warning])
    with Store(db, read_only=True) as st:
        assert pool_timeline(st, TimelineConfig(step_s=60))["gpus_total"].max() == len(PODS)


def test_the_review_reads_a_request_log_store_as_the_other_commands_do(tmp_path, capsys) -> None:
    """The capacity review on a store whose latency and traffic come from a request log and a
    gauge: its events are `tidelens events`' (same ids), its minutes over the SLO per service
    are the service timeline's steps over the SLO (measures.minutes_over_slo), and its what-if is
    there with its best policy or named as missing, never both."""
    from analytics.measures import minutes_over_slo

    db = tmp_path / "trace.duckdb"
    for name, data in _tables().items():
        (tmp_path / f"{name}.toml").write_text(MAPPINGS[name])
        (tmp_path / f"{name}.tar.gz").write_bytes(_archive(name, data))
        assert main(["ingest", "--db", str(db), "--columns", str(tmp_path / f"{name}.toml"),
                     str(tmp_path / f"{name}.tar.gz")]) == 0
    capsys.readouterr()
    slos = ["--slo", "sdxl=60000", "--slo", "flux=60000"]
    assert main(["review", "--db", str(db), "--json", *slos]) == 0
    review = json.loads(capsys.readouterr().out)
    assert main(["events", "--db", str(db), "--json", *slos]) == 0
    events = json.loads(capsys.readouterr().out)
    assert review["events"]["ids"] == [e["id"] for e in events]
    # an event's evidence says what its notes say: no autoscaler is linked here, so the desired
    # replicas are not the autoscaler's (it said "autoscaler" beside a note saying none was)
    assert events and all(e["evidence"]["desired_replicas_source"].startswith("ready replicas (no autoscaler")
                          for e in events)
    with Store(db, read_only=True) as st:
        svc = service_timeline(st, TimelineConfig(step_s=60))
    for model in SERVICES:
        p99 = svc.filter(pl.col("service") == model)["p99_ms"].to_numpy()
        assert review["minutes_over_slo"][model] == minutes_over_slo(p99, 60_000.0, step_s=60) > 0
    assert review["slo_ms"] == {"flux": 60000.0, "sdxl": 60000.0}
    # the what-if is either there, with its best policy, or named as missing with why: never both
    assert ("whatif" in review) != ("what-if" in review["missing"])
    assert "whatif" not in review or review["whatif"]["best_policy"] in review["whatif"]["policies"]
