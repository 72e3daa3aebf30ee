"""A name the docs give is a name the code has (datasette's habit: a rule the docs state is a test).

Every dotted name of the library or the pages in README.md and docs/*.md (``analytics.measures
.best_policy``, ``pages/_queries.review_for``) must import and resolve, and every file they
name under ``analytics/``, ``pages/``, ``bench/``, ``tests/`` or ``docs/`` must exist: a newcomer
following docs/architecture.md from a number to its definition never meets a dead end.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# analytics.x.y, pages._queries.review_for, or the same written as a path (pages/_nav.NAME)
DOTTED = re.compile(r"(?<![\w/.-])((?:analytics|pages)(?:[./][A-Za-z_]\w*)+)")
# a file or folder of the repository's code, tests or docs (placeholders such as NAME aside)
PATHS = re.compile(r"(?<![\w./-])((?:analytics|pages|bench|tests|docs)/[\w./*-]*\w)")


def _names() -> list[tuple[str, str]]:
    found = {}
    for doc in DOCS:
        for m in DOTTED.finditer(doc.read_text(encoding="utf-8")):
            text = m.group(1)
            name = re.sub(r"\.py$", "", text).replace("/", ".")
            if "/" in text and text.endswith(".py"):
                continue  # a file path: the path check below
            found.setdefault(name, doc.name)
    return sorted(found.items())


def _resolve(name: str) -> bool:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


@pytest.mark.parametrize("name,doc", _names())
def test_every_dotted_name_in_the_docs_resolves(name: str, doc: str) -> None:
    assert _resolve(name), f"{doc} names {name}, which the code does not have"


def test_every_file_the_docs_name_exists() -> None:
    missing = []
    for doc in DOCS:
        for m in PATHS.finditer(doc.read_text(encoding="utf-8")):
            path = m.group(1)
            if re.search(r"\b[A-Z]{3,}\b", path):  # a placeholder: bench/NAME.py
                continue
            if "*" in path:
                ok = any(ROOT.glob(path))
            else:
                ok = (ROOT / path).exists() or (ROOT / f"{path}.py").exists() \
                    or (ROOT / re.sub(r"\.\w+$", ".py", path)).exists()
            if not ok:
                missing.append(f"{doc.name}: {path}")
    assert not missing, missing


def test_the_check_finds_a_dead_name() -> None:
    assert not _resolve("analytics.whatif.fit.reading_noise")
    assert _resolve("analytics.measures.best_policy")
