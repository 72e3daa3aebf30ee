"""One SLO type from the sidebar and the CLI to every analysis (:class:`analytics.slo.SloTable`):
the two surfaces build it by the one precedence (``SloTable.over``), and no analysis unpacks an
SLO of its own ("the service's SLO, else ``*``", an ``isinstance`` on a float or a dict)."""

from __future__ import annotations

import re
from pathlib import Path

from analytics.slo import SloTable, resolve_slos, write_store_slos
from analytics.view import ViewSettings

ROOT = Path(__file__).resolve().parent.parent
# What an analysis wrote before the table: the fallback looked up by hand, or the SLO's type tested.
UNPACKING = re.compile(r"""\.get\(\s*(["']\*["']|ALL\b|ALL_SERVICES\b)|isinstance\(\s*slo\w*\s*,|\bslo_for\b""")
# The type itself, and the surface that builds it from the sidebar's fields ("*": the field for
# every other service, as a link writes it).
OWNERS = {"analytics/slo.py", "analytics/view.py", "pages/_sidebar.py"}


def test_the_sidebar_and_the_cli_decide_every_slo_alike(store, tmp_path) -> None:
    """The store says chat 900 and search 300, tidelens.toml search 400 and embed 50; the user
    (the sidebar's fields, the CLI's --slo and the fallback) says chat 700 and 250 for the rest."""
    write_store_slos(store, {"chat": (900.0, None), "search": (300.0, None)}, "test")
    config = tmp_path / "tidelens.toml"
    config.write_text("[slo]\nsearch = 400\nembed = 50\n", encoding="utf-8")
    cli = resolve_slos(store, config=config, per_service={"chat": 700.0}, fallback_ms=250.0)
    view = ViewSettings(slo_ms={"*": 250.0, "chat": 700.0}, slo_known=resolve_slos(store, config=config)).slos
    services = ("chat", "search", "embed", "other")
    assert [cli.ms(s) for s in services] == [view.ms(s) for s in services] == [700.0, 400.0, 50.0, 250.0]
    assert [view.source(s) for s in services] == ["your setting", "tidelens.toml [slo]", "tidelens.toml [slo]",
                                                  "your setting (all services)"]
    assert cli == view and hash(cli) == hash(view) and view.items()[0] == ("*", 250.0)
    # --slo-ms is every service's, the user's own --slo over it
    every = resolve_slos(store, config=config, every_ms=120.0, per_service={"chat": 700.0})
    assert [every.ms(s) for s in services] == [700.0, 120.0, 120.0, 120.0]
    # a table without a fallback (the truth's SLOs) gives the others none: the relative rule
    assert SloTable.from_ms({"chat": 900.0}).ms("other") is None


def test_no_analysis_unpacks_an_slo_itself() -> None:
    found = []
    for folder in ("analytics", "pages"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            if rel in OWNERS:
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if UNPACKING.search(line.split("#", 1)[0]):
                    found.append(f"{rel}:{n}: {line.strip()}")
    assert not found, "take an analytics.slo.SloTable and ask it (.ms, .source):\n" + "\n".join(found)
    assert UNPACKING.search('slo = slo_for.get(obs.service, slo_for.get("*"))')
    assert UNPACKING.search("if isinstance(slo_for, dict):")
    assert UNPACKING.search("return float(self.slo_ms.get(service, self.slo_ms.get(\"*\", DEFAULT_SLO_MS)))")
