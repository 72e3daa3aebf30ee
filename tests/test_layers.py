"""The layers docs/architecture.md states hold (import-linter's contracts in pyproject.toml):
the library never imports Streamlit, charts never reach the store, readers never import an
analysis, and nothing in the library imports the simulator but the sample command. A copy of
the package with one forbidden import added must fail the same check."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(folder: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(folder)}
    return subprocess.run([str(LINT), "--config", str(folder / "pyproject.toml"), "--no-cache"],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=120)


def test_the_layers_hold() -> None:
    done = _lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("KEPT") == 4


def test_a_chart_that_queries_the_store_breaks_them(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "analytics", tmp_path / "analytics", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    chart = tmp_path / "analytics" / "charts" / "whatif.py"
    chart.write_text(chart.read_text() + "\nfrom analytics.store import Store  # noqa: E402\n")
    done = _lint(tmp_path)
    assert done.returncode == 1
    assert "Charts draw frames; they never query the store BROKEN" in done.stdout
    assert "analytics.charts.whatif -> analytics.store" in done.stdout
