"""The structure docs/architecture.md states is held, and a planted violation of each part fails:

- the layers of its ``layers`` block are import-linter's ``layers`` contract in pyproject.toml,
  line for line, exhaustive over ``analytics/`` (with the forbidden-import contracts beside it);
- no module of the library imports one that imports it back (grimp's import graph, type-checking
  imports included);
- the project's own modules are imported at the top of a module, never inside a function (the
  CLI loads a command's module through ``importlib`` in its dispatch, the one place that may wait);
- no two modules of ``analytics/`` share a file name, but the conventions the doc names.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT = Path(sys.executable).with_name("lint-imports")
DOC = ROOT / "docs" / "architecture.md"
OWN = ("analytics", "pages")
# Imports of the project's own modules a function may make, each with its reason (a new one
# must say here why it cannot be at the top).
LATE_IMPORTS: dict[str, str] = {
    "analytics/sample/__init__.py:truth": "the simulator (numpy draws, scipy) loads on first use (PEP 562, "
                                         "as the package's other names): the app's first run only names the sample's file",
    "analytics/sample/__init__.py:ensure_default_store": "the same: the simulator loads only when the "
                                                        "bundled sample is built, once",
}
# File names several modules of analytics/ may share (docs/architecture.md, "The layers").
SHARED_NAMES = {"__init__.py", "__main__.py", "config.py"}
NAMED_AFTER_A_FEATURE = ("analytics/sql/", "analytics/charts/", "analytics/sample/")


def _lint(folder: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(folder)}
    return subprocess.run([str(LINT), "--config", str(folder / "pyproject.toml"), "--no-cache"],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=120)


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "analytics", tmp_path / "analytics", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def doc_layers(text: str) -> list[str]:
    """The ``layers`` block of docs/architecture.md, a layer a line, comments dropped."""
    block = re.search(r"```layers\n(.*?)```", text, re.S)
    assert block is not None, "docs/architecture.md has no ```layers block"
    return [" | ".join(p.strip() for p in line.split("#")[0].split("|"))
            for line in block.group(1).splitlines() if line.split("#")[0].strip()]


def test_the_layers_hold() -> None:
    done = _lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("KEPT") == 5


def test_the_layers_contract_is_the_docs_block() -> None:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [c for c in contracts if c["type"] == "layers"]
    assert layers["containers"] == ["analytics"] and layers["exhaustive"] is True
    assert layers["layers"] == doc_layers(DOC.read_text())


def test_an_import_up_a_layer_or_an_unplaced_module_breaks_them(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    chart = folder / "analytics" / "charts" / "whatif.py"
    chart.write_text(chart.read_text() + "\nfrom analytics.store import Store  # noqa: E402\n")
    pool = folder / "analytics" / "timeline" / "pool.py"
    pool.write_text(pool.read_text() + "\nfrom analytics.review import Review  # noqa: E402\n")
    (folder / "analytics" / "forecasting.py").write_text('"""A module the layers do not place."""\n')
    done = _lint(folder)
    assert done.returncode == 1
    assert "Charts draw frames; they never query the store BROKEN" in done.stdout
    assert "analytics.charts.whatif -> analytics.store" in done.stdout
    assert "The library's layers, as docs/architecture.md draws them BROKEN" in done.stdout
    assert "analytics.forecasting" in done.stdout  # exhaustive: every module has its layer
    (folder / "analytics" / "forecasting.py").unlink()  # placed, the upward import is what is left
    upward = _lint(folder)
    assert "The library's layers, as docs/architecture.md draws them BROKEN" in upward.stdout
    assert "analytics.timeline.pool -> analytics.review" in upward.stdout


CYCLES = """
import grimp, sys
g = grimp.build_graph("analytics", cache_dir=None)  # type-checking imports count too
for m in sorted(g.modules):
    for d in sorted(g.find_modules_directly_imported_by(m)):
        if d.startswith("analytics") and d != m and g.chain_exists(importer=d, imported=m):
            print(m, "->", d)
"""


def _cycles(folder: Path) -> list[str]:
    done = subprocess.run([sys.executable, "-c", CYCLES], cwd=folder, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(folder)}, timeout=120, check=True)
    return done.stdout.splitlines()


def test_no_module_imports_one_that_imports_it_back() -> None:
    assert _cycles(ROOT) == []


def test_a_planted_circle_is_found(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    measures = folder / "analytics" / "measures.py"
    measures.write_text(measures.read_text() + "\nif False:\n    from analytics.overview import summarise\n")
    found = _cycles(folder)
    assert "analytics.measures -> analytics.overview" in found, found


def late_imports(root: Path) -> dict[str, str]:
    """``path:line function -> module`` for each import of the project's own modules made inside
    a function of ``analytics/``, ``pages/``, ``app.py`` or ``serve.py``."""
    out = {}
    files = sorted(root.glob("analytics/**/*.py")) + sorted(root.glob("pages/*.py")) + [root / "app.py", root / "serve.py"]
    for path in files:
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                names = ([node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0
                         else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
                for name in names:
                    if name.split(".")[0] in OWN:
                        out[f"{path.relative_to(root)}:{fn.name}"] = name
    return out


def test_the_projects_modules_are_imported_at_the_top(tmp_path: Path) -> None:
    late = late_imports(ROOT)
    assert {k: v for k, v in late.items() if k not in LATE_IMPORTS} == {}
    assert len(LATE_IMPORTS) < 40 and all(reason.strip() for reason in LATE_IMPORTS.values())
    assert set(LATE_IMPORTS) <= set(late), "a listed late import is gone: take it off the list"
    # the scan finds one planted in a copy
    (tmp_path / "analytics").mkdir()
    (tmp_path / "pages").mkdir()
    for name in ("app.py", "serve.py"):
        (tmp_path / name).write_text("")
    (tmp_path / "analytics" / "x.py").write_text("def f():\n    if True:\n        from analytics.store import Store\n")
    assert late_imports(tmp_path) == {"analytics/x.py:f": "analytics.store"}


def test_module_names_say_their_job() -> None:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in sorted((ROOT / "analytics").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if path.name not in SHARED_NAMES and not rel.startswith(NAMED_AFTER_A_FEATURE):
            by_name[path.name].append(rel)
    assert {n: p for n, p in by_name.items() if len(p) > 1} == {}
