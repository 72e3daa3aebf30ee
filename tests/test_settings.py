"""Settings in one place: every ``TIDELENS_*`` environment variable is read by
``analytics.config.env_setting`` alone, named in ``analytics.config.ENV_SETTINGS`` and documented in
docs/deployment.md's table; and every third-party package the product imports is declared in
pyproject.toml (none arrives unnamed through another's requirements)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest

from analytics.config import ENV_SETTINGS, env_setting
from analytics.limits import IngestLimits

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = sorted([*ROOT.glob("analytics/**/*.py"), *ROOT.glob("pages/*.py"), *ROOT.glob("*.py")])
ENV_NAME = re.compile(r"\bTIDELENS_[A-Z0-9_]+\b")
# The environment read elsewhere, none of it a TIDELENS_ setting: a secret's variable the user names
# (--token-env, the Data page's form) and kaleido's browser.
OTHER_ENV_READERS = {"analytics/config.py", "analytics/secrets.py", "pages/_data_pull.py",
                     "analytics/charts/theme.py"}


def _environment_reads(tree: ast.AST) -> list[int]:
    """Lines of ``tree`` that read the environment: ``os.environ`` or ``os.getenv``."""
    return [n.lineno for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and n.attr in ("environ", "getenv")
            and isinstance(n.value, ast.Name) and n.value.id == "os"]


def test_only_the_config_reads_a_tidelens_variable() -> None:
    readers = {}
    for path in PRODUCT:
        rel = path.relative_to(ROOT).as_posix()
        lines = _environment_reads(ast.parse(path.read_text()))
        if lines and rel not in OTHER_ENV_READERS:
            readers[rel] = lines
    assert readers == {}, "read TIDELENS_ settings through analytics.config.env_setting"


def test_every_setting_is_listed_owned_and_documented() -> None:
    named = {m for path in PRODUCT for m in ENV_NAME.findall(path.read_text())}
    assert named - set(ENV_SETTINGS) == set(), "a TIDELENS_ name the config does not list"
    assert {f.metadata["env"] for f in IngestLimits.__dataclass_fields__.values()} <= set(ENV_SETTINGS)
    table = (ROOT / "docs" / "deployment.md").read_text()
    assert [n for n in ENV_SETTINGS if f"| `{n}`" not in table] == []
    with pytest.raises(KeyError, match="TIDELENS_NOPE: not a Tidelens setting"):
        env_setting("TIDELENS_NOPE")


def test_every_imported_package_is_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {re.split(r"[=<>!~ \[]", d, maxsplit=1)[0].lower().replace("_", "-")
                for d in [*project["dependencies"], *(d for extra in project["optional-dependencies"].values()
                                                      for d in extra)]}
    own = {"analytics", "pages", *(p.stem for p in ROOT.glob("*.py")), *(p.stem for p in ROOT.glob("tests/**/*.py")),
           "plugins"}
    distributions = importlib.metadata.packages_distributions()
    missing = {}
    for path in [*PRODUCT, *ROOT.glob("tests/**/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for top in {n.split(".")[0] for n in names} - own - set(sys.stdlib_module_names):
                dists = {d.lower().replace("_", "-") for d in distributions.get(top, [top])}
                if not dists & declared:
                    missing.setdefault(top, path.relative_to(ROOT).as_posix())
    assert missing == {}, "declare these in pyproject.toml"
