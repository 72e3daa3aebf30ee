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

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from analytics.errors import ConfigError
from analytics.limits import IngestLimits

if TYPE_CHECKING:
    from analytics.store import Store

# The fallback p99 SLO of a service nothing names (the app's "all services" default too).
DEFAULT_SLO_MS = 100.0
ALL = "*"
# The largest SLO: a latency above a day is a wrong unit, the bound a request log's latency meets too.
MAX_SLO_MS = float(IngestLimits.max_latency_s * 1000)


def check_slo_ms(value: Any, where: str) -> float:
    """The one rule for a p99 SLO wherever it is given (``--slo-ms``, ``--slo``, ``[slo]``, the
    sidebar, a link, :class:`analytics.events.EventsConfig`): a positive, finite number of
    milliseconds, at most :data:`MAX_SLO_MS`.

    Raises :class:`ConfigError` naming ``where`` (the flag, key or setting) and the rule.

    >>> check_slo_ms(250, "--slo-ms")
    250.0
    >>> check_slo_ms(float("nan"), "--slo-ms")
    Traceback (most recent call last):
    ...
    analytics.errors.ConfigError: --slo-ms nan: an SLO is a positive, finite number of milliseconds, at most 86,400,000 (a day)
    """
    ok = (not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
          and 0 < value <= MAX_SLO_MS)
    if not ok:
        shown = f"{value:g}" if isinstance(value, float) else repr(value)
        raise ConfigError(f"{where} {shown}: an SLO is a positive, finite number of milliseconds, "
                          f"at most {MAX_SLO_MS:,.0f} (a day)")
    return float(value)


def parse_slo_ms(text: str, where: str = "--slo-ms") -> float:
    """An SLO typed as text (``250``, ``1e3``), checked by :func:`check_slo_ms`.

    >>> parse_slo_ms("1e3")
    1000.0
    """
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"{where} {str(text)[:80]!r}: write a number of milliseconds, e.g. 250") from None
    return check_slo_ms(value, where)


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
        out[str(service)] = check_slo_ms(value, f"{path}: [slo] {service} =")
    return out


def parse_service_slos(items: Sequence[str] | None, flag: str = "--slo") -> dict[str, float]:
    """``SERVICE=MS`` items as typed on the command line (repeatable), as a per-service table;
    each SLO by :func:`check_slo_ms`, a service given twice refused (which one was meant?).

    >>> parse_service_slos(["chat-vllm=1000", "image-gen=70000"])
    {'chat-vllm': 1000.0, 'image-gen': 70000.0}
    """
    out: dict[str, float] = {}
    for item in items or []:
        service, sep, value = str(item).rpartition("=")
        if not sep or not service.strip():
            raise ConfigError(f"{flag} {item!r}: write SERVICE=MILLISECONDS, e.g. {flag} chat-vllm=1000")
        name = service.strip()
        if name in out:
            raise ConfigError(f"{flag} {name}: given twice ({name}={out[name]:g} and {item!r}); give each "
                              "service one SLO")
        out[name] = parse_slo_ms(value, f"{flag} {name}=")
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
