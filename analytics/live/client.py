"""HTTP client of a Prometheus-compatible query API: auth, TLS, timeouts, retries, range splitting.

Owns everything about talking to a server (Prometheus, Thanos, Mimir, VictoriaMetrics) and
nothing about what is asked: :mod:`analytics.live.queries` builds the PromQL and
:mod:`analytics.live.pull` decides what to fetch and where it lands.

Secrets (bearer tokens, basic-auth passwords, secret header values) are read from
environment variables or files at request time, and never appear in :meth:`PromClient.describe`,
source names, error messages or logs.
"""

from __future__ import annotations

import math
import os
import random
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
import base64
from urllib.parse import urljoin, urlsplit, urlunsplit

import orjson
import requests

from analytics.errors import ConfigError, TidelensError

# Prometheus refuses a range query whose result would exceed 11,000 points per series.
MAX_POINTS_PER_SERIES = 11_000
# One week of a 1,000-GPU fleet's holders in one request took Prometheus past 10 GB; a day-long
# chunk of the same stayed at 2 GB. Chunks are sized from the series count the guard saw.
MAX_SAMPLES_PER_REQUEST = 2_000_000
# Statuses worth retrying: the server or a proxy is overloaded or restarting.
RETRY_STATUSES = frozenset({429, 502, 503, 504})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# A reverse proxy adds a slash or a login hop; more than a few is a loop.
MAX_REDIRECTS = 5
# Shorter secrets would blank out ordinary words in a message; a secret that short is not one.
MIN_REDACTED_LEN = 3


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

    def secret_values(self) -> list[str]:
        """Every secret as it could come back in a server's answer: raw, and basic auth encoded."""
        headers = self.resolve_headers()
        out = [headers[h] for h in self.header_envs]
        token = headers.get("Authorization", "")
        if token.startswith("Bearer "):
            out += [token, token.removeprefix("Bearer ")]
        basic = self.resolve_basic()
        if basic:
            pair = base64.b64encode(f"{basic[0]}:{basic[1]}".encode()).decode()
            out += [basic[1], pair]
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
    value = os.environ.get(var)
    if not value:
        raise ConfigError(f"the {what} comes from environment variable {var}, which is not set")
    return value.strip()


def _secret_file(path: str, what: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError as exc:
        raise ConfigError(f"cannot read the {what} from {path}: {exc.strerror}") from exc


def safe_url(url: str) -> str:
    """The server's URL without credentials, query or fragment: what may be shown or stored.

    >>> safe_url("https://user@prom.example:9090/prometheus/?x=1")
    'https://prom.example:9090/prometheus'
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


def check_url(url: str) -> str:
    """Validate a server URL and return its safe form; passwords in URLs are refused."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"server URL {safe_url(url) or url!r} must look like "
                          "http(s)://host[:port][/path]")
    if parts.password is not None or parts.username is not None:
        raise ConfigError("credentials in the server URL are refused (they would end up in logs "
                          "and the page URL): use --user with --password-env/--password-file, "
                          "or --token-env/--token-file")
    return safe_url(url)


def allowed_servers(config_path: str | Path | None = None) -> list[str] | None:
    """Servers a shared deployment allows, from ``[live] servers`` in ``tidelens.toml``.

    ``None`` means no list is configured (a personal install: any server may be asked).
    The file is ``config_path``, else ``$TIDELENS_CONFIG``, else ``./tidelens.toml``.
    """
    path = Path(config_path or os.environ.get("TIDELENS_CONFIG") or "tidelens.toml")
    if not path.exists():
        return None
    try:
        doc = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}: fix the TOML syntax") from exc
    servers = doc.get("live", {}).get("servers")
    if servers is None:
        return None
    if not isinstance(servers, list) or not all(isinstance(s, str) for s in servers):
        raise ConfigError(f"{path}: [live] servers must be a list of URL strings")
    return [safe_url(s) for s in servers]


def check_allowed(url: str, allowed: list[str] | None, config_hint: str = "tidelens.toml") -> None:
    if allowed is None:
        return
    if safe_url(url) not in allowed:
        raise ConfigError(f"server {safe_url(url)} is not in [live] servers of {config_hint}; "
                          f"allowed: {', '.join(allowed) or '(none)'}. Ask the deployment's "
                          "owner to add it")


@dataclass
class ClientConfig:
    """Timeouts, retries and limits for one server."""

    timeout_s: float = field(default=60.0, metadata={"help": "per-request timeout in seconds"})
    retries: int = field(default=3, metadata={
        "help": "retries of a transient failure (connection reset, 429, 502-504)"})
    backoff_s: float = field(default=0.5, metadata={
        "help": "first retry wait in seconds; doubles each retry, with jitter"})
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


class PromClient:
    """A Prometheus HTTP API client.

    Parameters
    ----------
    url:
        Base URL, e.g. ``http://prometheus:9090`` or ``https://mimir/prometheus``.
    auth:
        Authentication and TLS settings.
    config:
        Timeouts, retries and limits.
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
        self._sleep = sleep
        self._session = requests.Session()
        self.bytes_received = 0
        self.requests_made = 0

    def describe(self) -> str:
        """The server as it may be shown: no credentials."""
        return self.base

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> "PromClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests -----------------------------------------------------------------------
    def get(self, path: str, params: dict[str, Any], *, what: str) -> Response:
        """GET ``path`` with retries; raise :class:`PullError` with the server's own message."""
        url = f"{self.base}/{path.lstrip('/')}"
        headers = self.auth.resolve_headers()
        basic = self.auth.resolve_basic()
        attempt = 0
        while True:
            attempt += 1
            try:
                # POST would hide long queries from proxy logs, but not every proxy allows it; the
                # query itself is not secret.
                resp = self._get_same_origin(url, params, headers, basic, what)
            except requests.exceptions.SSLError as exc:
                raise PullError(f"{self.base}: TLS verification failed ({_short(exc)}): pass "
                                "--ca-bundle PEM, or --insecure if you accept the risk") from exc
            except requests.exceptions.Timeout as exc:
                if attempt <= self.config.retries:
                    self._wait(attempt)
                    continue
                raise PullError(f"{self.base}: {what} timed out after {self.config.timeout_s:g} s "
                                f"({attempt} attempts): narrow the range or scope, use a coarser "
                                "--step, or raise --timeout") from exc
            except requests.exceptions.ConnectionError as exc:
                if attempt <= self.config.retries:
                    self._wait(attempt)
                    continue
                raise PullError(f"{self.base}: cannot connect ({_short(exc)}) after {attempt} "
                                "attempts: is the server running and the URL right?") from exc
            self.requests_made += 1
            self.bytes_received += len(resp.content)
            if resp.status_code in RETRY_STATUSES and attempt <= self.config.retries:
                self._wait(attempt, resp.headers.get("Retry-After"))
                continue
            return self._decode(resp, what)

    def _get_same_origin(self, url: str, params: dict[str, Any] | None, headers: dict[str, str],
                         basic: tuple[str, str] | None, what: str) -> requests.Response:
        """GET, following redirects only within the server's own origin.

        ``requests`` strips ``Authorization`` on a redirect to another host but keeps every
        other header, so a tenant key would leave with it: redirects are followed here, by
        hand, and one to another scheme, host or port is refused rather than followed.
        """
        for _hop in range(MAX_REDIRECTS + 1):
            resp = self._session.get(url, params=params, headers=headers, auth=basic,
                                     verify=self.auth.verify(), timeout=self.config.timeout_s,
                                     allow_redirects=False)
            if resp.status_code not in REDIRECT_STATUSES or "Location" not in resp.headers:
                return resp
            target = urljoin(resp.url, resp.headers["Location"])
            if _origin(target) != _origin(self.base):
                resp.close()
                raise PullError(f"{self.base}: {what}: HTTP {resp.status_code} redirects to "
                                f"{safe_url(target)}, another server; Tidelens does not follow it "
                                "with your credentials. If you trust that server, pull from it "
                                "directly with --url (and add it to [live] servers)")
            resp.close()
            url, params = target, None  # the Location carries its own query
        raise PullError(f"{self.base}: {what}: more than {MAX_REDIRECTS} redirects: check the URL "
                        "(a login page or a proxy loop?)")

    def _redact(self, text: str) -> str:
        """``text`` with every secret of this client replaced, as a server may echo one back."""
        for secret in self.auth.secret_values():
            text = text.replace(secret, "[redacted]")
        return text

    def _wait(self, attempt: int, retry_after: str | None = None) -> None:
        delay = self.config.backoff_s * 2 ** (attempt - 1) * (1 + 0.25 * random.random())
        if retry_after:
            try:
                delay = max(delay, float(retry_after))
            except ValueError:
                pass
        self._sleep(min(delay, 60.0))

    def _decode(self, resp: requests.Response, what: str) -> Response:
        if resp.status_code in (401, 403):
            raise PullError(f"{self.base}: {what}: HTTP {resp.status_code} (not authorised): "
                            "check the token or user and password")
        try:
            body = orjson.loads(resp.content)
        except orjson.JSONDecodeError as exc:
            snippet = self._redact(resp.content[:400].decode("utf-8", "replace"))[:120]
            raise PullError(f"{self.base}: {what}: HTTP {resp.status_code}, not a Prometheus API "
                            f"answer ({snippet!r}): is the URL the API's base "
                            "(e.g. http://host:9090 or .../prometheus)?") from exc
        if not isinstance(body, dict):
            raise PullError(f"{self.base}: {what}: HTTP {resp.status_code}, not a Prometheus API "
                            "answer (JSON, but not an object): is the URL the API's base?")
        if resp.status_code != 200 or body.get("status") != "success":
            kind = self._redact(str(body.get("errorType", f"HTTP {resp.status_code}")))
            error = self._redact(str(body.get("error", "")))[:2000]
            raise PullError(f"{self.base}: {what} failed: {kind}: {error}")
        warnings = [self._redact(str(w)) for w in body.get("warnings") or []]
        return Response(body.get("data"), resp.content, warnings)

    # -- API ----------------------------------------------------------------------------
    def query(self, promql: str, at_ms: int) -> Response:
        """An instant query at ``at_ms``."""
        return self.get("api/v1/query", {"query": promql, "time": _sec(at_ms)}, what="query")

    def query_range(self, promql: str, start_ms: int, end_ms: int, step_ms: int) -> Response:
        """One range query; callers split long ranges with :func:`split_range` first."""
        return self.get("api/v1/query_range", {"query": promql, "start": _sec(start_ms),
                                               "end": _sec(end_ms), "step": _sec(step_ms)},
                        what="range query")

    def series(self, selector: str, start_ms: int, end_ms: int) -> Response:
        """The label sets of the series matching ``selector`` in ``[start, end]``."""
        return self.get("api/v1/series", {"match[]": selector, "start": _sec(start_ms),
                                          "end": _sec(end_ms)}, what="series lookup")

    def ready(self) -> bool:
        try:
            return self._session.get(f"{self.base}/-/ready", timeout=2, allow_redirects=False,
                                     verify=self.auth.verify()).status_code == 200
        except requests.exceptions.RequestException:
            return False


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


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


def _sec(ms: int) -> str:
    return f"{ms / 1000:.3f}"


def _short(exc: BaseException) -> str:
    text = str(exc)
    for marker in ("Connection refused", "Name or service not known", "timed out",
                   "CERTIFICATE_VERIFY_FAILED", "Connection reset"):
        if marker in text:
            return marker
    return text[:160]
