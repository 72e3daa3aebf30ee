"""What a device is (issue 44, deliverable 1): a mapping's ``[device]`` says what identifies a GPU
(``per = "pod"``, or ``columns``); a pod-level table loaded without one, where many pods share one
GPU key at once, says so in its load note and in ``tidelens signals``."""

from __future__ import annotations

import json

import polars as pl
import pytest

from analytics.cli import main
from analytics.errors import ConfigError
from analytics.ingest import ingest_bytes
from analytics.ingest.mapping import load_mapping, mapping_toml
from analytics.store import Store
from analytics.timeline import TimelineConfig, pool_timeline, shared_gpu_keys

T0 = 1_767_571_200
PODS = [f"10.1.0.{i}" for i in range(12)]
MAPPING = """
[time]
column = "timestamp_anon"
[values]
columns = ["duty_cycle"]
[metric]
name = "duty_cycle"
[labels]
container_ip = "pod"
[signals.duty_cycle]
metric = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
scale = 0.01
"""


def _table(extra: bool = False) -> bytes:
    rows = [f"{T0 + 60 * m},{pod},{10 + i}" + (f",node{i // 4},{i % 4}" if extra else "")
            for m in range(6) for i, pod in enumerate(PODS)]
    head = "timestamp_anon,container_ip,duty_cycle" + (",node,gpu_index" if extra else "")
    return (head + "\n" + "\n".join(rows) + "\n").encode()


def _mapping(tmp_path, text: str):
    p = tmp_path / f"m{abs(hash(text))}.toml"
    p.write_text(text)
    return load_mapping(p)


def _gpus(store) -> float:
    return float(pool_timeline(store, TimelineConfig(step_s=60))["gpus_total"].max())


def test_without_a_device_table_many_pods_on_one_key_is_said_in_the_note_and_in_signals(tmp_path, capsys) -> None:
    db = tmp_path / "s.duckdb"
    with Store(db) as store:
        r = ingest_bytes(store, "duty.csv", _table(), columns=_mapping(tmp_path, MAPPING))
        assert r.status == "loaded"
        assert ("12 pods share one GPU key ('?/?': no UUID, hostname or gpu column) at the same time, so they "
                "count as one GPU") in r.note and '[device] per = "pod"' in r.note
        assert _gpus(store) == 1.0
        assert shared_gpu_keys(store).rows()[0][:2] == ("?/?", 12)
    assert main(["signals", "--db", str(db), "--json"]) == 0
    shared = json.loads(capsys.readouterr().out)["shared_gpu_keys"]
    assert shared[0]["gpu_key"] == "?/?" and shared[0]["pods_at_once"] == 12
    assert main(["signals", "--db", str(db)]) == 0
    assert "GPU keys many pods share at once" in capsys.readouterr().out


def test_device_per_pod_makes_each_pod_its_own_gpu(store, tmp_path) -> None:
    m = _mapping(tmp_path, MAPPING + '[device]\nper = "pod"\n')
    r = ingest_bytes(store, "duty.csv", _table(), columns=m)
    assert r.status == "loaded" and "each pod its own GPU" in r.note and "share one GPU key" not in r.note
    assert _gpus(store) == 12.0
    assert shared_gpu_keys(store).height == 0
    assert store.query("SELECT count(DISTINCT uuid) AS n FROM series")["n"][0] == 12
    assert load_mapping_text(tmp_path, mapping_toml(m)) == m


def test_device_columns_name_the_gpu(store, tmp_path) -> None:
    m = _mapping(tmp_path, MAPPING + '[device]\ncolumns = ["node", "gpu_index"]\n')
    r = ingest_bytes(store, "duty.csv", _table(extra=True), columns=m)
    assert r.status == "loaded" and "a GPU is each 'node' + 'gpu_index'" in r.note
    assert _gpus(store) == 12.0
    assert load_mapping_text(tmp_path, mapping_toml(m)) == m


def test_a_mapping_without_device_keeps_its_digest(tmp_path) -> None:
    # the same table re-loaded under an unchanged mapping must still be "already loaded"
    assert _mapping(tmp_path, MAPPING).digest() == "20909bee73d11536"  # as before [device] existed
    assert _mapping(tmp_path, MAPPING).digest() != _mapping(tmp_path, MAPPING + '[device]\nper = "pod"\n').digest()


@pytest.mark.parametrize("text, words", [
    ('[device]\nper = "node"\n', 'only per = "pod"'),
    ('[device]\nper = "pod"\ncolumns = ["node"]\n', "not both"),
    ('[device]\ncolumn = "node"\n', "has no key 'column'"),
    ('[device]\ncolumns = [1]\n', "must name columns"),
])
def test_a_device_table_that_cannot_say_what_a_gpu_is_is_refused(tmp_path, text, words) -> None:
    with pytest.raises(ConfigError, match=words.replace("(", r"\(")):
        _mapping(tmp_path, MAPPING + text)


def test_per_pod_needs_a_pod_label(tmp_path) -> None:
    with pytest.raises(ConfigError, match="needs a column mapped to the pod label"):
        _mapping(tmp_path, MAPPING.replace('container_ip = "pod"', 'container_ip = "ip"') + '[device]\nper = "pod"\n')


def load_mapping_text(tmp_path, text: str):
    return _mapping(tmp_path, text)


def test_the_data_page_form_offers_one_gpu_per_pod(tmp_path, monkeypatch) -> None:
    from apptest_helpers import isolate, map_pod_duty_cycle, open_store_page

    isolate(monkeypatch, tmp_path)
    db = tmp_path / "mine.duckdb"
    at = open_store_page("pages/data.py", db, tab="Your own table")
    at.file_uploader(key="map_file").set_value([("pod_duty.csv", _table(), "text/csv")]).run()
    map_pod_duty_cycle(at)
    assert any("each pod its own GPU" in s.value for s in at.success), [e.value for e in at.error]
    assert load_mapping(db.with_name("mine.duckdb.columns.toml")).device_per == "pod"
    with Store(db, read_only=True) as st:
        assert st.query("SELECT count(DISTINCT uuid) AS n FROM series")["n"][0] == len(PODS)


def test_device_columns_never_collapse_two_gpus_into_one_key(store, tmp_path) -> None:
    """Issue 50, 7: node ``a/b`` GPU ``c`` and node ``a`` GPU ``b/c`` were one GPU ``a/b/c``. Each value
    is percent-encoded before the join; urllib's unquote reads every part back."""
    from urllib.parse import unquote

    nodes_gpus = [("a/b", "c"), ("a", "b/c"), ("a%2Fb", "c"), ("a", "%"), ("a", "%25"), ("", "x"), ("x", "")]
    rows = [f"{T0 + 60 * m},10.1.0.{i},{10 + i},{node},{gpu}" for m in range(3)
            for i, (node, gpu) in enumerate(nodes_gpus)]
    table = ("timestamp_anon,container_ip,duty_cycle,node,gpu_index\n" + "\n".join(rows) + "\n").encode()
    m = _mapping(tmp_path, MAPPING + '[device]\ncolumns = ["node", "gpu_index"]\n')
    assert ingest_bytes(store, "duty.csv", table, columns=m).status == "loaded"
    keys = store.query("SELECT DISTINCT uuid FROM series")["uuid"].to_list()
    assert len(keys) == len(nodes_gpus), keys
    assert sorted(tuple(unquote(p) for p in k.split("/")) for k in keys) == sorted(nodes_gpus)
    assert _gpus(store) == len(nodes_gpus)
    assert "a/b/c" not in keys
