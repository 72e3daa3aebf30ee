"""`tidelens timeline`, `tidelens signals` and `tidelens classify` on a store file."""

from __future__ import annotations

import json

import polars as pl
import pytest
from test_timeline_pool import Builder, mixed_node  # tests/ is on sys.path (rootdir conftest)
from test_timeline_service import add_hist

from analytics.cli import main
from analytics.store import Store


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "t.duckdb"
    b = Builder()
    mixed_node(b, range(1, 5))
    add_hist(b, "vllm:time_to_first_token_seconds", {"pod": "chat-vllm-7d9c8b6f5-x2k4q", "namespace": "inference"},
             [1, 2, 3, 4], [[0] * 5, [10, 10, 0, 0, 0], [10, 10, 0, 0, 0], [0, 0, 0, 0, 5]])
    with Store(path) as st:
        b.load(st)
    return path


def test_timeline_pool_csv_has_contract_columns(db, tmp_path, capsys):
    out = tmp_path / "pool.csv"
    assert main(["timeline", "--db", str(db), "--kind", "pool", "--step", "1m", "--csv", str(out)]) == 0
    frame = pl.read_csv(out)
    assert frame.columns[:9] == ["ts", "pool", "gpus_total", "gpus_inference", "gpus_batch", "gpus_other",
                                 "gpus_unmanaged", "gpus_unknown", "gpus_idle"]
    assert frame["ts"][0] == "1970-01-01T00:01:00Z" and frame.height == 4
    assert frame["gpus_total"].to_list() == pytest.approx([4.0] * 4)


def test_timeline_service_csv_and_step(db, tmp_path):
    out = tmp_path / "svc.csv"
    assert main(["timeline", "--db", str(db), "--kind", "service", "--step", "2m", "--csv", str(out)]) == 0
    frame = pl.read_csv(out)
    assert {"ts", "service", "rps", "p50_ms", "p95_ms", "p99_ms", "replicas"} <= set(frame.columns)
    assert frame["service"].unique().to_list() == ["chat-vllm"]
    assert frame["ts"].to_list() == ["1970-01-01T00:02:00Z", "1970-01-01T00:04:00Z"]
    assert frame["rps"].to_list() == pytest.approx([20 / 120, 25 / 120])


def test_signals_and_classify_print(db, capsys):
    assert main(["signals", "--db", str(db), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {r["signal"]: r for r in out["signals"]}
    assert [r["kubernetes_mode"] for r in out["unlabelled_gpus"]] != []
    assert rows["request_latency"]["found"] and not rows["autoscaler"]["found"]
    assert "vllm:time_to_first_token_seconds" in rows["request_latency"]["metrics_found"]
    assert main(["classify", "--db", str(db)]) == 0
    text = capsys.readouterr().out
    assert "nightly-finetune" in text and "default: batch name" in text


def test_bad_step_and_missing_map_exit_2(db, capsys):
    assert main(["timeline", "--db", str(db), "--step", "fast"]) == 2
    assert "not a duration" in capsys.readouterr().err
    assert main(["classify", "--db", str(db), "--config", "/nonexistent/tidelens.toml"]) == 2
    assert "tidelens.example.toml" in capsys.readouterr().err
