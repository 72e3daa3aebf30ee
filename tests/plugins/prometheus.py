"""pytest plugin: the session-scoped ``prometheus`` fixture (a real, backfilled server), and
``promtool`` (its path, for the tests that check rules with the real engine).

Register it with ``pytest_plugins = ["plugins.prometheus"]`` in ``tests/conftest.py``, or import
the fixture into a test module (``from plugins.prometheus import prometheus``). Either way one
server per process serves every module: modules importing the fixture get separate fixture
definitions, so the server itself is shared through a reference count.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import live_data  # noqa: E402
import prom_server  # noqa: E402

_shared: dict[str, object] = {"server": None, "samples": None, "users": 0}


@pytest.fixture(scope="session")
def promtool() -> str:
    """The path of ``promtool`` (the test skips outside CI where it is not installed)."""
    bins = prom_server.require_binaries()
    if bins is None:
        pytest.skip("promtool not installed (apt-get install prometheus)")
    return bins[1]


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: pytest.TempPathFactory):
    """A started Prometheus holding :func:`live_data.fleet_samples`; yields ``(url, samples)``."""
    bins = prom_server.require_binaries()
    if bins is None:
        pytest.skip("prometheus/promtool not installed (apt-get install prometheus)")
    if _shared["server"] is None:
        prom, tool = bins
        root = tmp_path_factory.mktemp("prometheus")
        samples = live_data.fleet_samples()
        om = prom_server.write_openmetrics(samples, root / "fleet.om")
        prom_server.backfill(tool, om, root / "data")
        _shared["server"] = prom_server.start(prom, root / "data", scrape_s=live_data.SCRAPE_S)
        _shared["samples"] = samples
    server: prom_server.PromServer = _shared["server"]  # type: ignore[assignment]
    _shared["users"] = int(_shared["users"]) + 1  # type: ignore[arg-type]
    try:
        yield server.url, _shared["samples"]
    finally:
        _shared["users"] = int(_shared["users"]) - 1  # type: ignore[arg-type]
        if _shared["users"] == 0:
            server.stop()
            _shared["server"] = None
