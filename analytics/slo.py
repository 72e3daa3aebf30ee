"""Per-service p99 SLOs: one source for the app, the CLI and ``tidelens.toml``.

:func:`resolve_slos` decides every service's SLO the same way wherever it is asked, so the app
and ``tidelens events`` find the same events with the same ids. In order:

1. the user's setting for that service (the page's per-service SLOs; ``--slo SERVICE=MS`` on
   the command line);
2. ``--slo-ms`` on the command line, for every service;
3. ``tidelens.toml``'s ``[slo]`` table::

       [slo]
       chat-vllm = 1000
       recommender = 120

4. the SLOs the store itself declares (its ``slos`` table: the bundled sample writes its
   scenario's there);
5. the one fallback, for a service nothing names: the page's "all services" SLO, by default
   :data:`DEFAULT_SLO_MS`.

Light to import (no polars, no analysis): the app's view settings and the CLI's start use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from analytics.errors import ConfigError

if TYPE_CHECKING:
    from analytics.store import Store

# The fallback p99 SLO of a service nothing names (the app's "all services" default too).
DEFAULT_SLO_MS = 100.0
ALL = "*"


def slos_from_config(path: str | Path | None) -> dict[str, float]:
    """The ``[slo]`` table of a config file (``{}`` when the file or table is absent).

    Raises
    ------
    ConfigError
        The file does not parse, or an SLO is not a positive number.
    """
    from analytics.config import read_config

    if path is None or not Path(path).exists():
        return {}
    table = read_config(path).get("slo", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [slo] must be a table of service = milliseconds")
    out: dict[str, float] = {}
    for service, value in table.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ConfigError(f"{path}: [slo] {service} = {value!r}: write a positive number of milliseconds")
        out[str(service)] = float(value)
    return out


def parse_service_slos(items: Sequence[str] | None, flag: str = "--slo") -> dict[str, float]:
    """``SERVICE=MS`` items as typed on the command line (repeatable), as a per-service table.

    >>> parse_service_slos(["chat-vllm=1000", "image-gen=70000"])
    {'chat-vllm': 1000.0, 'image-gen': 70000.0}
    """
    out: dict[str, float] = {}
    for item in items or []:
        service, sep, value = str(item).rpartition("=")
        try:
            ms = float(value)
        except ValueError:
            ms = float("nan")
        if not sep or not service.strip() or not (ms > 0 and ms != float("inf")):
            raise ConfigError(f"{flag} {item!r}: write SERVICE=MILLISECONDS, e.g. {flag} chat-vllm=1000")
        out[service.strip()] = ms
    return out


def store_slos(store: "Store") -> dict[str, tuple[float, str]]:
    """The SLOs the store declares (its ``slos`` table; none in a store that has no table)."""
    from analytics.sql import store as q

    if not store.con.execute(q.HAS_SLOS_TABLE).fetchall()[0][0]:
        return {}
    rows = store.con.execute(q.SLOS).fetchall()
    return {str(svc): (float(ms), f"the store ({src})") for svc, ms, _metric, src in rows}


@dataclass(frozen=True)
class SloTable:
    """Every service's p99 SLO and where it came from (:func:`resolve_slos`).

    >>> t = SloTable({"chat": (1000.0, "tidelens.toml")}, 100.0, "default")
    >>> t.ms("chat"), t.ms("other"), t.source("other")
    (1000.0, 100.0, 'default')
    """

    per_service: dict[str, tuple[float, str]]
    fallback_ms: float
    fallback_source: str

    def ms(self, service: str) -> float:
        return self.per_service.get(service, (self.fallback_ms, ""))[0]

    def source(self, service: str) -> str:
        return self.per_service.get(service, (0.0, self.fallback_source))[1]

    def for_services(self, services: Sequence[str]) -> dict[str, float]:
        """``{service: ms}`` for these services (what :func:`analytics.events.analyse` takes)."""
        return {s: self.ms(s) for s in services}

    def items(self) -> tuple[tuple[str, float], ...]:
        """Hashable ``(service, ms)`` pairs with ``("*", fallback)`` first (a cache key)."""
        return ((ALL, self.fallback_ms), *sorted((k, v[0]) for k, v in self.per_service.items()))


def resolve_slos(store: "Store | None", *, config: str | Path | None = None, every_ms: float | None = None,
                 per_service: Mapping[str, float] | None = None, fallback_ms: float | None = None,
                 per_service_source: str = "your setting") -> SloTable:
    """Every service's SLO, decided in the module's order.

    Parameters
    ----------
    store:
        The store whose ``slos`` table is read (``None``: none).
    config:
        ``tidelens.toml`` (its ``[slo]`` table), when it exists.
    every_ms:
        ``--slo-ms``: one SLO for every service, over the file and the store.
    per_service:
        The user's own per-service SLOs (the page's setting, the CLI's ``--slo``), over
        everything; ``per_service_source`` is what the table says they came from.
    fallback_ms:
        The SLO of a service nothing names (default :data:`DEFAULT_SLO_MS`).
    """
    table: dict[str, tuple[float, str]] = {}
    if store is not None:
        table.update(store_slos(store))
    table.update({k: (v, f"{Path(config).name} [slo]") for k, v in slos_from_config(config).items()})
    if every_ms is not None:
        table = {k: (float(every_ms), "--slo-ms") for k in table}
    table.update({k: (float(v), per_service_source) for k, v in (per_service or {}).items() if k != ALL})
    if every_ms is not None:
        return SloTable(table, float(every_ms), "--slo-ms")
    if fallback_ms is not None:
        return SloTable(table, float(fallback_ms), "your setting (all services)")
    return SloTable(table, DEFAULT_SLO_MS, f"default ({DEFAULT_SLO_MS:g} ms)")


def write_store_slos(store: "Store", slos: Mapping[str, tuple[float, str | None]], source: str) -> None:
    """Declare SLOs in the store (``service -> (p99 ms, metric)``), replacing those of the same services."""
    from analytics.sql import store as q

    for service, (ms, metric) in slos.items():
        store.con.execute(q.SLO_UPSERT, {"service": service, "p99_ms": float(ms), "metric": metric,
                                         "source": source})
