"""Every ``tidelens`` command is documented in the README and answers ``--help``."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from analytics.cli import build_parser

README = (Path(__file__).parent.parent / "README.md").read_text()
DEPLOYMENT = (Path(__file__).parent.parent / "docs" / "deployment.md").read_text()


def _commands() -> list[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(sub.choices)


@pytest.mark.parametrize("command", _commands())
def test_command_is_documented_in_readme(command):
    assert f"tidelens {command}" in README, f"README.md does not document `tidelens {command}`"


def test_module_entry_point_lists_every_command():
    out = subprocess.run([sys.executable, "-m", "analytics", "--help"], capture_output=True, text=True, check=True)
    for command in _commands():
        assert command in out.stdout


def test_every_setting_the_code_reads_is_in_the_readme():
    """A shared server's operator finds every TIDELENS_* variable the code reads in
    docs/deployment.md (the README points there)."""
    import re

    root = Path(__file__).parent.parent
    names = set()
    for path in [*root.glob("analytics/**/*.py"), *root.glob("pages/*.py"), root / "app.py"]:
        names |= set(re.findall(r"\bTIDELENS_[A-Z0-9_]+\b", path.read_text()))
    assert len(names) >= 10, names  # the scan found the settings
    missing = sorted(n for n in names if n not in DEPLOYMENT)
    assert not missing, f"docs/deployment.md does not mention {missing}"


def test_every_command_a_message_names_exists():
    """Guidance must be true: each ``tidelens WORD`` in the code's strings or the README is a
    command (a hint once named ``tidelens load``, which never existed)."""
    import re

    root = Path(__file__).parent.parent
    commands = set(_commands())
    texts = [README, *(p.read_text() for p in [*root.glob("analytics/**/*.py"), *root.glob("pages/*.py"),
                                                root / "app.py"])]
    named = {m for t in texts for m in re.findall(r"\btidelens ([a-z][a-z-]+)\b", t)}
    assert {"ingest", "events", "pull"} <= named  # the scan sees the hints
    assert named <= commands, f"messages name commands that do not exist: {sorted(named - commands)}"


@pytest.mark.parametrize("command", ["classify", "timeline", "events", "report", "whatif", "pull"])
def test_every_command_that_reads_the_config_takes_it_as_config(command):
    """One flag name for tidelens.toml, and the app's $TIDELENS_CONFIG as its default."""
    out = subprocess.run([sys.executable, "-m", "analytics.cli", command, "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert "--config FILE.toml" in out and "--map" not in out
    assert "TIDELENS_CONFIG" in " ".join(out.split())
