"""``tidelens whatif``: presets, policy selection, SLO override, errors."""

from __future__ import annotations

import json

import orjson
import pytest

from analytics.cli import main
from analytics.whatif import PRESETS, scenario_to_toml

KEYS = ("slo_compliance", "slo_compliance_minutes", "violation_minutes", "p99_ms",
        "worst_minute_p99_ms", "pool_utilization", "pool_utilization_active",
        "batch_gpu_hours", "batch_goodput_gpu_hours", "externality_cost")


def test_preset_json_has_the_promised_keys(capsys) -> None:
    rc = main(["whatif", "--preset", "morning-ramp", "--days", "2", "--json",
               "--policy", "shared", "--policy", "partitioned"])
    assert rc == 0
    out = orjson.loads(capsys.readouterr().out)
    assert set(out["policies"]) == {"shared", "partitioned"}
    for name, summary in out["policies"].items():
        for key in KEYS:
            assert isinstance(summary[key], float), (name, key)
    assert out["policies"]["shared"]["violation_minutes"] > 0
    assert out["policies"]["partitioned"]["violation_minutes"] == 0
    assert out["policies"]["shared"]["externality"][0]["team"] == "ml-research"


def test_slo_override_changes_the_answer(capsys) -> None:
    main(["whatif", "--preset", "morning-ramp", "--days", "2", "--json", "--policy", "shared",
          "--slo-ms", "1000"])
    out = orjson.loads(capsys.readouterr().out)
    assert out["scenario"]["slo_ms"] == 1000.0
    assert out["policies"]["shared"]["violation_minutes"] == 0.0


def test_table_output_and_scenario_file(capsys, tmp_path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(scenario_to_toml(PRESETS["tidal-a100"](1)))
    assert main(["whatif", "--scenario", str(path), "--policy", "mig"]) == 0
    text = capsys.readouterr().out
    assert "tidal-a100" in text and "mig" in text and "slo_compliance" in text


def test_missing_db_points_to_presets_and_is_not_created(capsys, tmp_path) -> None:
    rc = main(["whatif", "--db", str(tmp_path / "x.duckdb"), "--json"])
    assert rc == 2
    assert "use --preset" in capsys.readouterr().err
    assert not (tmp_path / "x.duckdb").exists()


def test_bad_scenario_file_is_one_line(capsys, tmp_path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("traffic_rps = [1, 2]\n[pool]\ngpuz = 1\n")
    assert main(["whatif", "--scenario", str(path)]) == 2
    err = capsys.readouterr().err
    assert "bad.toml" in err and "gpuz" in err


@pytest.mark.slow
def test_a_store_calibration_reads_the_workload_map_the_app_reads(tmp_path, capsys, monkeypatch) -> None:
    """``whatif --db`` calibrates with tidelens.toml (``--config``, else $TIDELENS_CONFIG, as the
    What-if page does): a map that classes the training namespaces as 'other' leaves it no batch."""
    from analytics.sample.export import load_into
    from analytics.sample.sim import simulate
    from analytics.store import Store

    db = tmp_path / "s.duckdb"
    with Store(db) as st:
        load_into(st, simulate("morning", days=3, gpus=16, seed=3))
    monkeypatch.chdir(tmp_path)  # no ./tidelens.toml
    monkeypatch.delenv("TIDELENS_CONFIG", raising=False)

    def batch_gpu_h(*extra: str) -> float:
        assert main(["whatif", "--db", str(db), "--json", "--policy", "shared", *extra]) == 0
        return json.loads(capsys.readouterr().out)["backtest"]["observed_batch_gpu_hours"]

    assert batch_gpu_h() > 1
    cfg = tmp_path / "map.toml"
    cfg.write_text('[[rule]]\nname = "no batch here"\nnamespace = "ml-training|data-pipelines"\nclass = "other"\n')
    assert batch_gpu_h("--config", str(cfg)) == 0
    monkeypatch.setenv("TIDELENS_CONFIG", str(cfg))  # the app's variable, the same answer
    assert batch_gpu_h() == 0
