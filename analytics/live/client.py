"""HTTP client of a Prometheus-compatible query API: auth, TLS, timeouts, retries, range splitting.

Owns everything about talking to a server (Prometheus, Thanos, Mimir, VictoriaMetrics) and
nothing about what is asked: :mod:`analytics.promql` builds the PromQL and
:mod:`analytics.live.pull` decides what to fetch and where it lands.

Secrets (bearer tokens, basic-auth passwords, secret header values) are read from
environment variables or files at request time, and never appear in :meth:`PromClient.describe`,
source names, error messages or logs.
"""

from __future__ import annotations

import base64
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import orjson

from analytics.config import config_location, config_section
from analytics.errors import ConfigError, TidelensError
from analytics.outbound import RETRY_STATUSES, Hints, HttpConfig, Outbound, Reply, check_url, safe_url  # noqa: F401
from analytics.secrets import MIN_REDACTED_LEN, Redactor, secret_from_env, secret_from_file  # noqa: F401

# Prometheus refuses a range query whose result would exceed 11,000 points per series.
MAX_POINTS_PER_SERIES = 11_000
# One week of a 1,000-GPU fleet's holders in one request took Prometheus past 10 GB; a day-long
# chunk of the same stayed at 2 GB. Chunks are sized from the series count the guard saw.
MAX_SAMPLES_PER_REQUEST = 2_000_000


class PullError(TidelensError):
    """A live pull failed; the message names the server, the query and what to do."""


class SeriesGuardError(PullError):
    """A query would return more series than allowed; the message says how to narrow it."""


@dataclass
class AuthConfig:
    """How to authenticate and verify the server. Secrets are named, never held as values."""

    bearer_token_env: str | None = field(default=None, metadata={
        "help": "environment variable holding a bearer token"})
    bearer_token_file: str | None = field(default=None, metadata={
        "help": "file holding a bearer token (e.g. a mounted service-account token)"})
    basic_user: str | None = field(default=None, metadata={"help": "basic-auth user name"})
    basic_password_env: str | None = field(default=None, metadata={
        "help": "environment variable holding the basic-auth password"})
    basic_password_file: str | None = field(default=None, metadata={
        "help": "file holding the basic-auth password"})
    headers: dict[str, str] = field(default_factory=dict, metadata={
        "help": "extra non-secret headers, e.g. X-Scope-OrgID for Mimir/Cortex tenants"})
    header_envs: dict[str, str] = field(default_factory=dict, metadata={
        "help": "extra headers whose values come from environment variables (header -> variable)"})
    ca_bundle: str | None = field(default=None, metadata={
        "help": "PEM file of CAs to verify the server's certificate"})
    insecure: bool = field(default=False, metadata={
        "help": "skip TLS verification (explicit opt-in; never the default)"})

    def names_secrets(self) -> bool:
        """Whether any credential is read from the environment or a file."""
        return bool(self.bearer_token_env or self.bearer_token_file or self.basic_password_env
                    or self.basic_password_file or self.header_envs)

    def secret_names(self) -> list[str]:
        """Every environment variable name and file path this configuration reads a secret from."""
        return [n for n in (self.bearer_token_env, self.bearer_token_file, self.basic_password_env,
                            self.basic_password_file, *self.header_envs.values()) if n]

    def resolve_headers(self) -> dict[str, str]:
        """Headers to send, with secrets read now from their environment variables or files."""
        out = dict(self.headers)
        for header, var in self.header_envs.items():
            out[header] = _secret_env(var, f"header {header}")
        token = None
        if self.bearer_token_env:
            token = _secret_env(self.bearer_token_env, "bearer token")
        elif self.bearer_token_file:
            token = _secret_file(self.bearer_token_file, "bearer token")
        if token:
            out["Authorization"] = f"Bearer {token}"
        return out

    def secret_values(self, headers: dict[str, str] | None = None,
                      basic: tuple[str, str] | None = None) -> list[str]:
        """Every secret this configuration sends: header values read from the environment, the
        bearer token and the basic-auth password (the :class:`Redactor` finds their encodings).

        ``headers`` and ``basic`` are the values a request is about to send, when it has read
        them already: a token file rotated in between must not leave the sent token unredacted.
        """
        headers = self.resolve_headers() if headers is None else headers
        basic = self.resolve_basic() if basic is None else basic
        out = [headers[h] for h in self.header_envs if h in headers]
        token = headers.get("Authorization", "")
        if token.startswith("Bearer "):
            out.append(token.removeprefix("Bearer "))
        if basic:  # the header's own value too, so an echo encoding it again is found
            pair = f"{basic[0]}:{basic[1]}"
            out += [basic[1], pair, base64.b64encode(pair.encode()).decode()]
        return sorted({v for v in out if len(v) >= MIN_REDACTED_LEN}, key=len, reverse=True)

    def resolve_basic(self) -> tuple[str, str] | None:
        if not self.basic_user:
            return None
        if self.basic_password_env:
            return self.basic_user, _secret_env(self.basic_password_env, "basic-auth password")
        if self.basic_password_file:
            return self.basic_user, _secret_file(self.basic_password_file, "basic-auth password")
        raise ConfigError(f"basic-auth user {self.basic_user!r} has no password: set "
                          "--password-env VAR or --password-file PATH")

    def verify(self) -> bool | str:
        if self.insecure:
            return False
        return self.ca_bundle or True


def _secret_env(var: str, what: str) -> str:
    return secret_from_env(var, what)


def _secret_file(path: str, what: str) -> str:
    return secret_from_file(path, what)


def allowed_servers(config_path: str | Path | None = None) -> list[str] | None:
    """Servers a shared deployment allows, from ``[live] servers`` in ``tidelens.toml``.

    ``None`` means no list is configured (a personal install: any server may be asked).
    The file is the one every reader uses (:func:`analytics.config.config_location`).
    """

    path = config_location(config_path)
    if not path.is_file():
        return None
    servers = config_section(path, "live").get("servers")
    if servers is None:
        return None
    if not isinstance(servers, list) or not all(isinstance(s, str) for s in servers):
        raise ConfigError(f"{path}: [live] servers must be a list of URL strings")
    return [safe_url(s) for s in servers]


def listed_secrets(config_path: str | Path | None = None) -> dict[str, list[str]] | None:
    """The secrets a shared deployment lets the app name for each server, from ``[live.secrets]``
    (server URL -> environment variable names and file paths); ``None`` when there is none.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "tidelens.toml")
    >>> _ = open(path, "w").write('[live.secrets]\\n"https://prom:9090/" = ["PROM_TOKEN"]\\n')
    >>> listed_secrets(path)
    {'https://prom:9090': ['PROM_TOKEN']}
    """

    path = config_location(config_path)
    if not path.is_file():
        return None
    table = config_section(path, "live").get("secrets")
    if table is None:
        return None
    if not isinstance(table, dict) or not all(
            isinstance(v, list) and all(isinstance(x, str) for x in v) for v in table.values()):
        raise ConfigError(f"{path}: [live.secrets] must map each server URL to a list of "
                          "environment variable names and file paths")
    return {safe_url(k): list(v) for k, v in table.items()}


def check_allowed(url: str, allowed: list[str] | None, config_hint: str = "tidelens.toml") -> None:
    if allowed is None:
        return
    if safe_url(url) not in allowed:
        raise ConfigError(f"server {safe_url(url)} is not in [live] servers of {config_hint}; "
                          f"allowed: {', '.join(allowed) or '(none)'}. Ask the deployment's "
                          "owner to add it")


@dataclass
class ClientConfig(HttpConfig):
    """Deadline, retries and limits for one server (:class:`~analytics.outbound.HttpConfig`'s,
    and the points per request a Prometheus takes)."""

    max_points: int = field(default=MAX_POINTS_PER_SERIES, metadata={
        "help": "points per series per range request (the server's limit is 11,000)"})
    max_samples: int = field(default=MAX_SAMPLES_PER_REQUEST, metadata={
        "help": "samples per range request (series x points): a query over many series asks "
                "for shorter ranges, so one answer never holds the server's memory hostage"})


@dataclass
class Response:
    """One successful API answer: the decoded ``data`` and the bytes that carried it."""

    data: Any
    content: bytes
    warnings: list[str] = field(default_factory=list)


_HINTS = Hints(
    timeout="narrow the range or scope, use a coarser --step, or raise --timeout",
    connect="is the server running and the URL right?",
    tls="pass --ca-bundle PEM, or --insecure if you accept the risk",
    redirect="If you trust that server, pull from it directly with --url (and add it to "
             "[live] servers)")


class PromClient:
    """A Prometheus HTTP API client.

    Parameters
    ----------
    url:
        Base URL, e.g. ``http://prometheus:9090`` or ``https://mimir/prometheus``.
    auth:
        Authentication and TLS settings.
    config:
        Deadline, retries and limits.
    allowed:
        Servers a shared deployment allows (see :func:`allowed_servers`); ``None``: any.
    sleep:
        Wait function used between retries (tests pass a no-op).
    """

    def __init__(self, url: str, auth: AuthConfig | None = None, config: ClientConfig | None = None,
                 *, allowed: list[str] | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.base = check_url(url)
        check_allowed(self.base, allowed)
        self.auth = auth or AuthConfig()
        self.config = config or ClientConfig()
        self._http = Outbound(self.base, self.config, error=PullError, verify=self.auth.verify(),
                              sleep=sleep, hints=_HINTS)

    @property
    def bytes_received(self) -> int:
        return self._http.bytes_received

    @property
    def requests_made(self) -> int:
        return self._http.requests_made

    def describe(self) -> str:
        """The server as it may be shown: no credentials."""
        return self.base

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "PromClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests -----------------------------------------------------------------------
    def get(self, path: str, params: dict[str, Any], *, what: str) -> Response:
        """GET ``path`` (retried when transient); raise :class:`PullError` with the server's own
        message, every secret of this client redacted from it."""
        headers = self.auth.resolve_headers()
        basic = self.auth.resolve_basic()
        redactor = Redactor(self.auth.secret_values(headers, basic))
        # POST would hide long queries from proxy logs, but not every proxy allows it; the
        # query itself is not secret.
        reply = self._http.request("GET", f"{self.base}/{path.lstrip('/')}", params=params,
                                   headers=headers, auth=basic, what=what, redactor=redactor)
        return self._decode(reply, what, redactor)

    def _decode(self, resp: Reply, what: str, redactor: Redactor) -> Response:
        fail = self._http.fail
        if resp.status in (401, 403):
            raise fail(f"{self.base}: {what}: HTTP {resp.status} (not authorised): "
                       "check the token or user and password", redactor)
        try:
            body = orjson.loads(resp.content)
        except orjson.JSONDecodeError:
            raise fail(f"{self.base}: {what}: HTTP {resp.status}, not a Prometheus API answer "
                       f"({redactor.snippet(resp.content[:4096], 120)!r}): is the URL the API's base "
                       "(e.g. http://host:9090 or .../prometheus)?", redactor) from None
        if not isinstance(body, dict):
            raise fail(f"{self.base}: {what}: HTTP {resp.status}, not a Prometheus API answer "
                       "(JSON, but not an object): is the URL the API's base?", redactor)
        if resp.status != 200 or body.get("status") != "success":
            kind = redactor.snippet(str(body.get("errorType", f"HTTP {resp.status}")), 80)
            error = redactor.snippet(str(body.get("error", "")))
            raise fail(f"{self.base}: {what} failed: {kind}: {error}", redactor)
        warnings = body.get("warnings") or []
        if not isinstance(warnings, list):
            warnings = [warnings]
        return Response(body.get("data"), resp.content,
                        [redactor.snippet(str(w)) for w in warnings[:20]])

    def _result(self, resp: Response, what: str) -> Response:
        """``resp`` checked to hold a query result (``data.result``, a list of series objects),
        so the pull reads it without meeting a shape it cannot handle."""
        data = resp.data
        where = None
        if not isinstance(data, dict) or not isinstance(data.get("result", []), list):
            where = "data.result"
        else:
            for i, item in enumerate(data.get("result") or []):
                if (not isinstance(item, dict) or not isinstance(item.get("metric", {}), dict)
                        or not all(isinstance(v, str) for v in (item.get("metric") or {}).values())
                        or not isinstance(item.get("values", []), list)
                        or not isinstance(item.get("value", []), list)):
                    where = f"data.result[{i}]"
                    break
        if where:
            raise PullError(f"{self.base}: {what}: the answer at {where} is not a query result "
                            "(a list of series with metric labels and values): is the URL a "
                            "Prometheus-compatible query API?")
        return resp

    # -- API ----------------------------------------------------------------------------
    def query(self, promql: str, at_ms: int) -> Response:
        """An instant query at ``at_ms``."""
        return self._result(self.get("api/v1/query", {"query": promql, "time": _sec(at_ms)},
                                     what="query"), "query")

    def query_range(self, promql: str, start_ms: int, end_ms: int, step_ms: int) -> Response:
        """One range query; callers split long ranges with :func:`split_range` first."""
        return self._result(self.get("api/v1/query_range", {"query": promql, "start": _sec(start_ms),
                                                            "end": _sec(end_ms), "step": _sec(step_ms)},
                                     what="range query"), "range query")

    def series(self, selector: str, start_ms: int, end_ms: int) -> Response:
        """The label sets of the series matching ``selector`` in ``[start, end]``."""
        resp = self.get("api/v1/series", {"match[]": selector, "start": _sec(start_ms),
                                          "end": _sec(end_ms)}, what="series lookup")
        if resp.data is not None and not isinstance(resp.data, list):
            raise PullError(f"{self.base}: series lookup: the answer's data is not a list of "
                            "label sets: is the URL a Prometheus-compatible query API?")
        return resp


def split_range(start_ms: int, end_ms: int, step_ms: int,
                max_points: int = MAX_POINTS_PER_SERIES) -> list[tuple[int, int]]:
    """Split ``[start, end]`` on the step grid into chunks of at most ``max_points`` points.

    Chunks are aligned to multiples of their length from the epoch, so pulling the same
    period again yields the same chunks (and the same content hashes).

    >>> split_range(0, 600_000, 60_000, max_points=5)
    [(0, 240000), (300000, 540000), (600000, 600000)]
    """
    if step_ms <= 0:
        raise ConfigError("the step must be positive")
    first = math.ceil(start_ms / step_ms) * step_ms
    last = (end_ms // step_ms) * step_ms
    if last < first:
        return []
    span = max_points * step_ms
    out = []
    chunk_start = (first // span) * span
    while chunk_start <= last:
        a = max(first, chunk_start)
        b = min(last, chunk_start + span - step_ms)
        if a <= b:
            out.append((a, b))
        chunk_start += span
    return out


def _sec(ms: int) -> str:
    return f"{ms / 1000:.3f}"
