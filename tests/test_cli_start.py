"""The CLI starts at once: ``tidelens --help`` and the light commands import no heavy library.

statsmodels (~1 s), scipy and plotly load only in the commands that use them; the command table
(``analytics.cli.commands``) names every command without importing one. Times are measured by
``bench/cli.py``, never here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from analytics.cli import main
from analytics.cli.commands import COMMANDS

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("statsmodels", "scipy", "plotly", "pandas", "streamlit")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
                         capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


# events and forecast print; what draws (report's postmortem, analytics.forecast.drawn) lives apart.
# Sharing a module with report, every `events` imported plotly and pandas (a warm run 0.98 -> 0.57 s,
# 302 -> 239 MiB on the sample; bench/RESULTS.md 2026-12-08).
@pytest.mark.parametrize("argv", [["--help"], ["sources", "--help"], ["ingest", "--help"], ["series", "--help"],
                                  ["events", "--help"], ["forecast", "--help"]])
def test_start_imports_no_heavy_library(argv):
    code = ("from analytics.cli import main\n"
            f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass")
    loaded = _modules_after(code)
    assert not {m.split(".")[0] for m in loaded} & set(HEAVY), sorted(m for m in loaded if m.split(".")[0] in HEAVY)[:5]


def test_help_lists_every_command_without_importing_it(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    for name, (_module, help_) in COMMANDS.items():
        assert name in text and help_[:30] in text


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_parses_its_own_help(name, capsys):
    with pytest.raises(SystemExit) as done:
        main([name, "--help"])
    assert done.value.code == 0
    assert f"usage: tidelens {name}" in capsys.readouterr().out


def test_a_reader_that_leaves_early_is_no_traceback(tmp_path):
    """``tidelens classify | head -1``: the reader has gone when the command prints its next
    section, which exits quietly (it ended in a BrokenPipeError traceback)."""
    import os

    from analytics.store import Store

    db = tmp_path / "empty.duckdb"
    Store(db).close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before the command writes (head has its line)
    try:
        done = subprocess.run([sys.executable, "-m", "analytics", "classify", "--db", str(db)],
                              stdout=write_end, stderr=subprocess.PIPE, env=env, timeout=60)
    finally:
        os.close(write_end)
    err = done.stderr.decode()
    assert done.returncode == 1
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
