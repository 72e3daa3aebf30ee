"""One ``tidelens.toml``: the app, every command and the live pulls find the same file by one
rule (--config, else $TIDELENS_CONFIG, else ./tidelens.toml) and parse it in one place."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from analytics.cli.common import config_path
from analytics.config import config_location, find_config, read_config
from analytics.data_dir import data_dir
from analytics.errors import ConfigError
from analytics.live.client import allowed_servers
from analytics.slo import slos_from_config
from analytics.workloads import load_map

ROOT = Path(__file__).resolve().parent.parent
TOML = """
[app]
data_dir = "stores"

[slo]
chat = 900

[live]
servers = ["http://127.0.0.1:9090"]

[[rule]]
name = "research trains"
namespace = "research"
class = "batch"
"""


def _readers(explicit: Path | None = None) -> dict[str, object]:
    """What each part of Tidelens reads from the configuration it finds."""
    from pages._store import config_file

    args = argparse.Namespace(config=str(explicit) if explicit else None)
    cli = config_path(args)
    return {"app file": config_file().resolve() if config_file().exists() else None,
            "cli file": cli.resolve() if cli else None,
            "data dir": data_dir(cli).name, "slo": slos_from_config(cli),
            "servers": allowed_servers(explicit), "map": [r.name for r in load_map(cli).rules if not r.builtin]}


def test_every_reader_takes_the_same_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TIDELENS_CONFIG", raising=False)
    monkeypatch.delenv("TIDELENS_DATA_DIR", raising=False)
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir(), elsewhere.mkdir()
    (here / "tidelens.toml").write_text(TOML)
    (elsewhere / "other.toml").write_text(TOML.replace("900", "450").replace("stores", "other"))
    monkeypatch.chdir(here)
    found = _readers()
    assert found["app file"] == found["cli file"] == (here / "tidelens.toml").resolve()
    assert (found["data dir"], found["slo"], found["servers"]) == ("stores", {"chat": 900.0},
                                                                   ["http://127.0.0.1:9090"])
    assert found["map"] == ["research trains"]
    # $TIDELENS_CONFIG moves every reader at once, the app's included
    monkeypatch.setenv("TIDELENS_CONFIG", str(elsewhere / "other.toml"))
    moved = _readers()
    assert moved["app file"] == moved["cli file"] == (elsewhere / "other.toml").resolve()
    assert (moved["data dir"], moved["slo"]) == ("other", {"chat": 450.0})
    # --config over both; a --config that is not there is said, never the defaults
    assert _readers(here / "tidelens.toml")["slo"] == {"chat": 900.0}
    with pytest.raises(ConfigError, match="no such config file"):
        find_config(tmp_path / "typo.toml")
    assert config_location() == elsewhere / "other.toml"


def test_a_broken_file_is_named_by_every_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TIDELENS_DATA_DIR", raising=False)
    bad = tmp_path / "tidelens.toml"
    bad.write_text("[slo\nchat = 1\n")
    for read in (read_config, slos_from_config, load_map, data_dir, allowed_servers):
        with pytest.raises(ConfigError, match=re.escape(str(bad)) + ".*not valid TOML"):
            read(bad)


def test_the_file_is_parsed_in_one_place() -> None:
    """A reader of tidelens.toml goes through analytics.config (tomllib elsewhere reads other
    files: a column mapping, a saved what-if scenario)."""
    others = {"analytics/ingest/mapping.py", "analytics/whatif/scenario_toml.py"}
    found = [str(p.relative_to(ROOT)) for folder in ("analytics", "pages") for p in (ROOT / folder).rglob("*.py")
             if "tomllib" in p.read_text(encoding="utf-8").replace("tomllib gives values", "")]
    assert sorted(set(found) - others) == ["analytics/config.py"]
