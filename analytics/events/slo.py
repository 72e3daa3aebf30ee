"""Per-service p99 SLOs from ``tidelens.toml``.

The file's ``[slo]`` table maps a service to its p99 objective in milliseconds::

    [slo]
    chat-vllm = 1000
    recommender = 120

A ``--slo-ms`` on the command line (or the page's SLO setting) overrides it for every service.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from analytics.errors import ConfigError


def slos_from_config(path: str | Path | None) -> dict[str, float]:
    """The ``[slo]`` table of a config file (``{}`` when the file or table is absent).

    Raises
    ------
    ConfigError
        The file does not parse, or an SLO is not a positive number.
    """
    if path is None or not Path(path).exists():
        return {}
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}; fix the TOML syntax") from exc
    table = data.get("slo", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [slo] must be a table of service = milliseconds")
    out: dict[str, float] = {}
    for service, value in table.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ConfigError(f"{path}: [slo] {service} = {value!r}: write a positive number of milliseconds")
        out[str(service)] = float(value)
    return out
