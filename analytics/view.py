"""What the app is looking at: the view settings, and their round trip through a URL.

A capacity review shares a link; the colleague who opens it must see the same view. Every
setting the sidebar holds (data source, time range, analysis step, SLO, display zone) lives in
:class:`ViewSettings`, which turns into URL query parameters and back without Streamlit, so the
round trip is tested as plain Python. Only values that differ from the defaults go into the URL.

>>> v = ViewSettings(step_s=300, slo_ms={"*": 250.0})
>>> v.to_query_params()
{'step': '300', 'slo': '250'}
>>> parse_query_params(v.to_query_params())[0] == v
True
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import timezone
from pathlib import Path
from typing import Any, Mapping
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from analytics.config import UPLOADS_DB_ENV, env_setting
from analytics.data_dir import confine_store_path
from analytics.errors import ConfigError
from analytics.fieldhelp import field_help
from analytics.slo import ALL, DEFAULT_SLO_MS, SloTable, parse_slo_ms  # one fallback and one rule, shared with the CLI
from analytics.store import DEFAULT_DB
from analytics.times import STEP_MAX_S, format_span, iso_utc, parse_step_s, parse_time_ms
from analytics.workloads import Rule

# Where "uploaded files" land when the user has not chosen a DuckDB file of their own.

SOURCE_KINDS: dict[str, str] = {
    "sample": "Bundled sample",
    "uploads": "Uploaded files",
    "duckdb": "DuckDB file",
}
STEP_CHOICES_S: tuple[int, ...] = (60, 300, 900, 3600)
STEP_RULE = f"the step is whole seconds from 1 s to 1 d ({STEP_MAX_S:,} s), e.g. 300"
ALL_SERVICES = ALL  # the SLO for services without their own


def uploads_db_path() -> Path:
    """The store that uploads go to when the source is the sample or "uploaded files"."""
    env = env_setting(UPLOADS_DB_ENV)
    if env:
        return Path(env)

    return DEFAULT_DB


def format_step(step_s: int) -> str:
    """A step as people say it.

    >>> format_step(60), format_step(900), format_step(3600), format_step(45)
    ('1 min', '15 min', '1 h', '45 s')
    """
    if step_s % 3600 == 0:
        return f"{step_s // 3600} h"
    if step_s % 60 == 0:
        return f"{step_s // 60} min"
    return f"{step_s} s"


def format_slo(slo_ms: Mapping[str, float]) -> str:
    """SLOs as the URL writes them: ``250`` for one, ``chat-vllm:500,recommender:100`` per service.

    >>> format_slo({"*": 250.0}), format_slo({"b": 1.5, "a": 100.0})
    ('250', 'a:100,b:1.5')
    """
    parts = []
    for name in sorted(slo_ms, key=lambda k: (k != ALL_SERVICES, k)):
        value = f"{slo_ms[name]:.10g}"
        parts.append(value if name == ALL_SERVICES else f"{name}:{value}")
    return ",".join(parts)


def parse_slo(text: str) -> dict[str, float]:
    """Inverse of :func:`format_slo`; raises ``ValueError`` naming the bad part (each SLO by
    :func:`analytics.slo.check_slo_ms`, the CLI's rule; a service given twice refused).

    >>> parse_slo("250,chat-vllm:500")
    {'*': 250.0, 'chat-vllm': 500.0}
    """
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.rpartition(":")
        key = name.strip() or ALL_SERVICES
        if key in out:
            raise ValueError(f"SLO {part!r}: {key} is given twice; give each service one SLO")
        try:
            out[key] = parse_slo_ms(value, "SLO" if key == ALL_SERVICES else f"SLO of {key}")
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
    if not out:
        raise ValueError("SLO is empty")
    return out


def _default_slo() -> dict[str, float]:
    return {ALL_SERVICES: DEFAULT_SLO_MS}


@dataclass(frozen=True)
class ViewSettings:
    """The view the sidebar selects; every field survives a copied link."""

    source: str = field(default="sample", metadata={
        "help": "Where the data comes from: the bundled sample, the files uploaded on the Data page, "
                "or a DuckDB store file on this machine.", "param": "source"})
    db_path: str | None = field(default=None, metadata={
        "help": "Path of the DuckDB store file (only for the 'DuckDB file' source).", "param": "db"})
    start_ms: int | None = field(default=None, metadata={
        "help": "Start of the analysed range (UTC, inclusive); empty means the data's first sample.",
        "param": "start"})
    end_ms: int | None = field(default=None, metadata={
        "help": "End of the analysed range (UTC); empty means the data's last sample.", "param": "end"})
    step_s: int = field(default=60, metadata={
        "help": "Analysis step: each point of a timeline summarises (t - step, t].", "param": "step"})
    slo_ms: dict[str, float] = field(default_factory=_default_slo, metadata={
        "help": "Latency SLO on p99 in milliseconds, one for every service or per service "
                "(e.g. 250 or chat-vllm:500,recommender:100).", "param": "slo"})
    tz: str = field(default="UTC", metadata={
        "help": "Zone that times are shown in; data stays UTC inside.", "param": "tz"})
    slo_known: SloTable = field(default_factory=SloTable, metadata={
        "help": "SLOs tidelens.toml and the store declare per service (not in the URL: they come "
                "with the data; analytics.slo.resolve_slos)", "param": None})

    def __hash__(self) -> int:  # slo_ms is a dict; hash its items so settings can key caches
        return hash((self.source, self.db_path, self.start_ms, self.end_ms, self.step_s,
                     tuple(sorted(self.slo_ms.items())), self.tz, self.slo_known))

    # -- derived ----------------------------------------------------------------------------
    @property
    def slos(self) -> SloTable:
        """Every service's SLO in this view, the one table its analyses take: the user's own
        over what tidelens.toml and the store declare, the "all services" setting for the rest
        (:meth:`analytics.slo.SloTable.over`, the CLI's precedence too).

        >>> known = SloTable({"a": (9.0, "the store"), "b": (1000.0, "tidelens.toml [slo]")})
        >>> v = ViewSettings(slo_ms={"*": 200.0, "a": 50.0}, slo_known=known)
        >>> v.slos.ms("a"), v.slos.ms("b"), v.slos.ms("c"), v.slos.source("a")
        (50.0, 1000.0, 200.0, 'your setting')
        """
        return self.slo_known.over(self.slo_ms, "your setting", fallback_ms=self.slo_ms.get(ALL_SERVICES))

    def db_file(self, folder: Path) -> Path | None:
        """The store file this view reads, or ``None`` for the sample (built on demand).

        A DuckDB path (typed in the sidebar or carried by a link) is confined to ``folder``, the
        data folder (:mod:`analytics.data_dir`); outside it, :class:`ConfigError` says so.
        """
        if self.source == "duckdb":

            return confine_store_path(self.db_path, folder) if self.db_path else None
        if self.source == "uploads":
            return uploads_db_path()
        return None

    def describe(self, first_ms: int | None = None, last_ms: int | None = None) -> str:
        """One line naming the view (the sidebar shows it above the folded settings).

        >>> ViewSettings(start_ms=0, end_ms=86_400_000, step_s=300).describe()
        'Jan 1 00:00 → Jan 2 00:00 UTC · step 5 min · SLO 100 ms'
        >>> ViewSettings(slo_ms={"*": 250.0, "chat": 900.0}).describe(0, 3_600_000)
        'Jan 1 00:00 → Jan 1 01:00 UTC · step 1 min · SLO 250 ms, chat 900 ms'
        """
        start, end = self.clamp_range(first_ms, last_ms)
        if start is None or end is None:
            span = "all data"
        else:
            span = format_span(start, end, self.tz)
        slos = ", ".join(f"{v:.10g} ms" if k == ALL_SERVICES else f"{k} {v:.10g} ms"
                         for k, v in self.slos.items())
        return f"{span} · step {format_step(self.step_s)} · SLO {slos}"

    def clamp_range(self, first_ms: int | None, last_ms: int | None) -> tuple[int | None, int | None]:
        """The range to analyse given the data's span: missing ends filled, outside ends clipped.

        >>> ViewSettings(start_ms=0, end_ms=10**12).clamp_range(1000, 5000)
        (1000, 5000)
        >>> ViewSettings(start_ms=2000).clamp_range(1000, 5000)
        (2000, 5000)
        """
        start = self.start_ms if self.start_ms is not None else first_ms
        end = self.end_ms if self.end_ms is not None else last_ms
        if first_ms is not None and start is not None:
            start = max(start, first_ms)
        if last_ms is not None and end is not None:
            end = min(end, last_ms)
        if start is not None and end is not None and start > end:
            start, end = first_ms, last_ms
        return start, end

    def zone(self) -> ZoneInfo | timezone:
        return timezone.utc if self.tz == "UTC" else ZoneInfo(self.tz)

    # -- URL round trip ----------------------------------------------------------------------
    def to_query_params(self) -> dict[str, str]:
        """The settings that differ from the defaults, as URL query parameters."""
        default = ViewSettings()
        out: dict[str, str] = {}
        if self.source != default.source:
            out["source"] = self.source
        if self.db_path:
            out["db"] = self.db_path
        if self.start_ms is not None:
            out["start"] = iso_utc(self.start_ms)
        if self.end_ms is not None:
            out["end"] = iso_utc(self.end_ms)
        if self.step_s != default.step_s:
            out["step"] = str(self.step_s)
        if self.slo_ms != default.slo_ms:
            out["slo"] = format_slo(self.slo_ms)
        if self.tz != default.tz:
            out["tz"] = self.tz
        return out



def _last(value: Any) -> str | None:
    # Streamlit hands a repeated key as a list; the last occurrence wins, as in st.query_params.
    if isinstance(value, (list, tuple)):
        value = value[-1] if value else None
    return None if value is None else str(value)


def parse_query_params(params: Mapping[str, Any]) -> tuple[ViewSettings, list[str]]:
    """Settings from URL query parameters, and one message per value that was ignored.

    >>> v, problems = parse_query_params({"step": "abc", "tz": "Europe/Paris"})
    >>> v.step_s, v.tz, problems
    (60, 'Europe/Paris', ["step='abc' ignored: the step is whole seconds from 1 s to 1 d (86,400 s), e.g. 300"])
    >>> parse_query_params({"db": "mine.duckdb"})[0].source
    'duckdb'
    """
    values: dict[str, Any] = {}
    problems: list[str] = []
    p = {k: _last(v) for k, v in params.items()}

    def bad(key: str, why: str) -> None:
        problems.append(f"{key}={p[key]!r} ignored: {why}")

    if p.get("source"):
        if p["source"] in SOURCE_KINDS:
            values["source"] = p["source"]
        else:
            bad("source", f"choose one of {', '.join(SOURCE_KINDS)}")
    if p.get("db"):
        values["db_path"] = p["db"]
        if not p.get("source"):  # ?db=mine.duckdb alone means that file, never the sample
            values["source"] = "duckdb"
    for key, attr in (("start", "start_ms"), ("end", "end_ms")):
        if p.get(key):
            try:
                values[attr] = parse_time_ms(p[key], what=key)
            except ConfigError:
                bad(key, "not a time: write ISO-8601 such as 2026-11-28T09:30Z (or epoch seconds)")
    if p.get("step"):
        try:  # the one step rule, the CLI's --step's: a link's 99999999999 would build no timeline
            values["step_s"] = parse_step_s(p["step"], "step")
        except ConfigError:
            bad("step", STEP_RULE)
    if p.get("slo"):
        try:
            values["slo_ms"] = parse_slo(p["slo"])
        except ValueError as exc:
            bad("slo", str(exc))
    if p.get("tz"):
        try:
            if p["tz"] != "UTC":
                ZoneInfo(p["tz"])
            values["tz"] = p["tz"]
        except (ZoneInfoNotFoundError, ValueError):
            bad("tz", "not a time zone name such as Europe/Berlin")
    settings = ViewSettings(**values)
    if (settings.start_ms is not None and settings.end_ms is not None
            and settings.start_ms >= settings.end_ms):
        problems.append("start is not before end: the whole data range is shown")
        settings = replace(settings, start_ms=None, end_ms=None)
    return settings, problems


APP_RULE_PREFIX = "app: "


def apply_workload_edits(wmap: Any, edits: list[dict[str, Any]]) -> Any:
    """A workload map with the Data page's edits as user rules, first in line.

    Each edit is ``{"namespace", "workload", "cls", "team"}`` for one workload; it becomes (or
    replaces) the rule ``app: <namespace>/<workload>`` matching that workload exactly, so the
    edit wins over every built-in default and survives in ``tidelens.toml``.
    """
    import re


    rules = list(wmap.rules)
    for edit in edits:
        ns, wl = edit.get("namespace"), edit.get("workload")
        name = f"{APP_RULE_PREFIX}{ns or '*'}/{wl}"
        match = {"workload": re.escape(str(wl))}
        if ns:
            match["namespace"] = re.escape(str(ns))
        # Rules read back from tidelens.toml carry the file name in front ("tidelens.toml: app: ...").
        rules = [r for r in rules if r.name != name and not r.name.endswith(": " + name)]
        rules.insert(0, Rule(name=name, match=match, cls=edit.get("cls") or None,
                             team=edit.get("team") or None))
    return replace(wmap, rules=rules)


def help_of(name: str) -> str:
    """The help text of a :class:`ViewSettings` field (sidebar tooltips use it)."""

    return field_help(ViewSettings, name)
