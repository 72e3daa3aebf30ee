"""Per-service p99 SLOs: one type (:class:`SloTable`) from the sidebar and the CLI to every analysis.

An analysis takes an :class:`SloTable` (every service's SLO, where it came from, and the fallback
for a service nothing names); the surfaces build it once: the CLI's flags through
:func:`resolve_slos`, the sidebar's settings over the data's own (``ViewSettings.slos``), both by
the one precedence of :meth:`SloTable.over`, so the app and ``tidelens events`` find the same
events with the same ids. In order:

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
   :data:`DEFAULT_SLO_MS`. A table without one (``SloTable.from_ms`` of SLOs with no ``"*"``, as
   the tests score the simulator's truth) judges such a service by the events' relative rule.

Light to import (no polars, no analysis): the app's view settings and the CLI's start use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from analytics.config import read_config
from analytics.errors import ConfigError
from analytics.limits import IngestLimits
from analytics.sql import store as q

if TYPE_CHECKING:
    from analytics.store import Store

# The fallback p99 SLO of a service nothing names (the app's "all services" default too).
DEFAULT_SLO_MS = 100.0
DEFAULT_SOURCE = f"default ({DEFAULT_SLO_MS:g} ms)"
# The key of the fallback where SLOs are written as {service: ms} (the sidebar, a link: "*").
ALL = "*"
# The largest SLO: a latency above a day is a wrong unit, the bound a request log's latency meets too.
MAX_SLO_MS = float(IngestLimits.max_latency_s * 1000)


def check_slo_ms(value: Any, where: str) -> float:
    """The one rule for a p99 SLO wherever it is given (``--slo-ms``, ``--slo``, ``[slo]``, the
    sidebar, a link, ``SloTable.from_ms``): a positive, finite number of
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

    if not store.con.execute(q.HAS_SLOS_TABLE).fetchall()[0][0]:
        return {}
    rows = store.con.execute(q.SLOS).fetchall()
    return {str(svc): (float(ms), f"the store ({src})") for svc, ms, _metric, src in rows}


@dataclass(frozen=True)
class SloTable:
    """Every service's p99 SLO and where it came from (:func:`resolve_slos`): the one type an
    analysis takes. ``fallback_ms`` is the SLO of a service nothing names (``None``: it has none,
    and the events judge it by their relative rule).

    >>> t = SloTable({"chat": (1000.0, "tidelens.toml")}, 100.0, "default")
    >>> t.ms("chat"), t.ms("other"), t.source("other")
    (1000.0, 100.0, 'default')
    >>> t.over({"other": 250.0}, "--slo").ms("other"), SloTable.from_ms({"chat": 9.0}).ms("other")
    (250.0, None)
    """

    per_service: Mapping[str, tuple[float, str]] = field(default_factory=dict)
    fallback_ms: float | None = DEFAULT_SLO_MS
    fallback_source: str = DEFAULT_SOURCE

    @classmethod
    def every(cls, ms: float, source: str) -> "SloTable":
        """One SLO for every service (a preset's, a scenario's)."""
        return cls({}, float(ms), source)

    def __hash__(self) -> int:  # per_service is a dict; a view's settings key caches with the table
        return hash((self.items(), self.fallback_source,
                     tuple(sorted((k, v[1]) for k, v in self.per_service.items()))))

    @classmethod
    def from_ms(cls, slo_ms: Mapping[str, float], source: str = "your setting") -> "SloTable":
        """SLOs written as ``{service: ms}``, ``"*"`` for every other service; without ``"*"``
        a service it does not name has none. Each by :func:`check_slo_ms`.

        >>> SloTable.from_ms({"*": 250, "chat": 900}).items()
        (('*', 250.0), ('chat', 900.0))
        """
        per = {str(k): (check_slo_ms(v, f"SLO of {k}"), source) for k, v in slo_ms.items() if k != ALL}
        every = slo_ms.get(ALL)
        return cls(per, None if every is None else check_slo_ms(every, "SLO"), source)

    def over(self, slo_ms: Mapping[str, float], source: str, *, fallback_ms: float | None = None,
             fallback_source: str = "your setting (all services)") -> "SloTable":
        """The precedence, in one place: ``slo_ms`` (``{service: ms}``) over this table's own
        SLOs, and ``fallback_ms``, when given, for a service nothing names. :func:`resolve_slos`
        lays the store, ``tidelens.toml`` and the flags on each other with it, the sidebar the
        user's settings on what the data declares (``ViewSettings.slos``)."""
        per = {**self.per_service, **{k: (float(v), source) for k, v in slo_ms.items() if k != ALL}}
        if fallback_ms is None:
            return SloTable(per, self.fallback_ms, self.fallback_source)
        return SloTable(per, float(fallback_ms), fallback_source)

    def ms(self, service: str) -> float | None:
        """The service's SLO (the fallback where nothing names it)."""
        return self.per_service.get(service, (self.fallback_ms, ""))[0]

    def source(self, service: str) -> str:
        """Where the service's SLO came from."""
        return self.per_service.get(service, (0.0, self.fallback_source))[1]

    def for_services(self, services: Sequence[str]) -> dict[str, float | None]:
        """``{service: ms}`` for these services (the SLO each is judged by)."""
        return {s: self.ms(s) for s in services}

    def items(self) -> tuple[tuple[str, float | None], ...]:
        """Hashable ``(service, ms)`` pairs with ``("*", fallback)`` first (a cache key, and what
        the sidebar's summary lists)."""
        return ((ALL, self.fallback_ms), *sorted((k, v[0]) for k, v in self.per_service.items()))


def resolve_slos(store: "Store | None", *, config: str | Path | None = None, every_ms: float | None = None,
                 per_service: Mapping[str, float] | None = None, fallback_ms: float | None = None,
                 per_service_source: str = "your setting") -> SloTable:
    """Every service's SLO, decided in the module's order (by :meth:`SloTable.over`).

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
    table = SloTable(store_slos(store) if store is not None else {})
    if config is not None:
        table = table.over(slos_from_config(config), f"{Path(config).name} [slo]")
    if every_ms is not None:
        table = SloTable({k: (float(every_ms), "--slo-ms") for k in table.per_service}, float(every_ms), "--slo-ms")
    return table.over(per_service or {}, per_service_source, fallback_ms=fallback_ms if every_ms is None else None)


def write_store_slos(store: "Store", slos: Mapping[str, tuple[float, str | None]], source: str) -> None:
    """Declare SLOs in the store (``service -> (p99 ms, metric)``), replacing those of the same services."""

    for service, (ms, metric) in slos.items():
        store.con.execute(q.SLO_UPSERT, {"service": service, "p99_ms": float(ms), "metric": metric,
                                         "source": source})
