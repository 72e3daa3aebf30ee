"""Every request Tidelens sends to another server, live pulls and Grafana alike.

One place owns the rules both follow, so they cannot drift apart:

- **Secrets** (read by :mod:`analytics.secrets`) go to the server named and nowhere else, and
  every message passes through the caller's :class:`~analytics.secrets.Redactor`.
- **One redirect rule**: a redirect is followed within the server's own origin (GET only) and
  refused to any other, so no header leaves for a host the user did not name.
- **A deadline per attempt**: connecting, the answer and its whole body end within
  ``timeout_s`` even against a server that drips a byte at a time (a socket timeout alone
  restarts with every byte); an answer past ``max_bytes`` is refused.
- **Retries** of transient failures by urllib3's ``Retry``: connection errors, 429 and 502-504,
  read timeouts of idempotent methods (never a POST the server may have acted on), with
  jittered exponential backoff and ``Retry-After`` (capped at a minute).
- **Never a metadata endpoint**: link-local addresses (169.254.0.0/16, fe80::/10, where cloud
  instance metadata and its credentials live), ``fd00:ec2::254`` and the metadata host names are
  refused before a request (:func:`analytics.destinations.check_destination`, the name's
  resolved addresses too) and
  again on every connection's peer address (a name that resolves elsewhere on the second look).
- **Messages**: what a server said is cut to a few hundred characters, control characters
  dropped and secrets redacted before it reaches an exception; no exception of ``requests``
  or ``urllib3`` (whose texts can hold header values) escapes.
"""

from __future__ import annotations

import logging
import random
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping
from urllib.parse import urljoin, urlsplit

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.util.retry import Retry

from analytics.destinations import blocked_address, check_destination, safe_url  # noqa: F401 - outbound's rule
from analytics.errors import ConfigError, TidelensError
from analytics.secrets import Redactor, printable

# Statuses worth retrying: the server or a proxy is overloaded or restarting.
RETRY_STATUSES = frozenset({429, 502, 503, 504})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# A reverse proxy adds a slash or a login hop; more than a few is a loop.
MAX_REDIRECTS = 5
# A server's Retry-After beyond this is not honoured: the command would look hung.
MAX_WAIT_S = 60.0


@dataclass
class HttpConfig:
    """Deadline, retries and size limit of every request to one server."""

    timeout_s: float = field(default=60.0, metadata={
        "help": "seconds one request may take in all: connecting, the answer and its whole body "
                "(a server sending slowly is cut off there)"})
    retries: int = field(default=3, metadata={
        "help": "retries of a transient failure (connection reset, 429, 502-504)"})
    backoff_s: float = field(default=0.5, metadata={
        "help": "first retry wait in seconds; doubles each retry, with jitter"})
    max_bytes: int = field(default=256 << 20, metadata={
        "help": "largest answer accepted, in bytes; a bigger one is refused before it fills memory"})


# -- URLs ---------------------------------------------------------------------------------------
def check_url(url: str) -> str:
    """Validate a server URL and return its safe form; passwords in URLs are refused."""
    parts = urlsplit(url)
    try:
        parts.port
    except ValueError:
        raise ConfigError(f"server URL {printable(url)[:200]!r}: the port is not a number") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"server URL {safe_url(url) or printable(url)[:200]!r} must look like "
                          "http(s)://host[:port][/path]")
    if parts.password is not None or parts.username is not None:
        raise ConfigError("credentials in the server URL are refused (they would end up in logs "
                          "and the page URL): use --user with --password-env/--password-file, "
                          "or --token-env/--token-file")
    if any(not (" " < c <= "~") for c in url):
        raise ConfigError(f"server URL {safe_url(url)!r} holds spaces, control or non-ASCII "
                          "characters: percent-encode them")
    return safe_url(url)


def origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    return parts.scheme, (parts.hostname or "").lower(), port or {"http": 80, "https": 443}.get(parts.scheme)


# -- the deadline -------------------------------------------------------------------------------
_local = threading.local()


class _Deadline:
    """Ends an attempt when its time is up by shutting its sockets down, which wakes a read
    blocked on a server that sends a byte now and then (each byte restarts a socket timeout)."""

    def __init__(self, seconds: float, redactor: Redactor | None = None) -> None:
        self.seconds = seconds
        self.redactor = redactor
        self.expired = False
        self.retries = 0
        self._socks: list[socket.socket] = []
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()

    def arm(self) -> None:
        """Start an attempt's clock: on entering, and again after each retry's wait."""
        self.disarm()
        with self._lock:
            self.expired = False
            self._timer = threading.Timer(self.seconds, self._expire)
            self._timer.daemon = True
            self._timer.start()

    @property
    def attempts(self) -> int:
        return 1 + self.retries

    def disarm(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def watch(self, sock: socket.socket | None) -> None:
        if sock is None:
            return
        with self._lock:
            if sock not in self._socks:
                self._socks.append(sock)
            if self.expired:
                _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._socks:
                _shut(sock)

    def __enter__(self) -> "_Deadline":
        _local.deadline = self
        self.arm()
        return self

    def __exit__(self, *exc: object) -> None:
        self.disarm()
        _local.deadline = None
        self._socks.clear()


def _shut(sock: socket.socket) -> None:
    try:
        # The plain socket's shutdown, also for a TLS one: it wakes a blocked read at once.
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass


def _deadline() -> _Deadline | None:
    return getattr(_local, "deadline", None)


class _RedactLogs(logging.Filter):
    """urllib3 logs a retry with the error it met, which can quote what a server sent (a status
    line made of the token it was given): a record logged by the thread of a request under way
    is redacted of that request's secrets before any handler sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        dl = _deadline()
        if dl is not None and dl.redactor is not None:
            record.msg, record.args = dl.redactor(printable(record.getMessage())), ()
        return True


_LOG_FILTER = _RedactLogs()
# A logger's filters see only its own records, not its children's: each logger urllib3 uses.
for _name in ("urllib3.connectionpool", "urllib3.connection", "urllib3.util.retry", "urllib3.response",
              "urllib3.poolmanager"):
    logging.getLogger(_name).addFilter(_LOG_FILTER)


class _Watched:
    """Connection mix-in: every socket and every request of an attempt is under its deadline."""

    sock: socket.socket | None

    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()  # type: ignore[misc]
        try:
            peer = sock.getpeername()[0]
        except OSError:
            peer = ""
        if blocked_address(str(peer)):  # resolved once more by the connection: checked again
            sock.close()
            raise ConfigError(f"{peer} is a link-local or cloud metadata address, never asked")
        if (dl := _deadline()) is not None:
            dl.watch(sock)
        return sock

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        if (dl := _deadline()) is not None:
            dl.watch(self.sock)  # a TLS socket replaces the plain one it wrapped

    def request(self, *args: Any, **kwargs: Any) -> Any:
        if (dl := _deadline()) is not None:
            dl.watch(self.sock)  # a kept-alive connection's socket
        return super().request(*args, **kwargs)  # type: ignore[misc]


class _Conn(_Watched, urllib3.connection.HTTPConnection):
    pass


class _TLSConn(_Watched, urllib3.connection.HTTPSConnection):
    pass


class _Pool(HTTPConnectionPool):
    ConnectionCls = _Conn


class _TLSPool(HTTPSConnectionPool):
    ConnectionCls = _TLSConn


_POOLS = {"http": _Pool, "https": _TLSPool}


class _Adapter(HTTPAdapter):
    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _POOLS

    def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **kwargs)
        if not proxy.lower().startswith("socks"):  # SOCKS has its own connection classes
            manager.pool_classes_by_scheme = _POOLS
        return manager


class _Retry(Retry):
    """urllib3's Retry, waiting through an injectable ``sleeper`` (tests pass a recorder) with
    the backoff Tidelens has always used, and pausing the deadline while it waits."""

    sleeper: Callable[[float], None] = staticmethod(time.sleep)

    def new(self, **kw: Any) -> "_Retry":
        out = super().new(**kw)
        out.sleeper = self.sleeper
        return out

    def sleep(self, response: Any = None) -> None:
        dl = _deadline()
        if dl is not None:
            dl.disarm()  # the wait is not the server's time
            dl.retries += 1
        delay = self.backoff_factor * 2 ** (max(len(self.history), 1) - 1) * (1 + 0.25 * random.random())
        if response is not None and self.respect_retry_after_header:
            try:
                delay = max(delay, self.get_retry_after(response) or 0.0)
            except (urllib3.exceptions.InvalidHeader, ValueError, OverflowError):
                pass
        self.sleeper(min(delay, MAX_WAIT_S))
        if dl is not None:
            dl.arm()  # the next attempt has the whole deadline, connecting included


# -- the helper -----------------------------------------------------------------------------------
@dataclass
class Reply:
    """One answer: its status, headers and whole body (at most ``max_bytes``)."""

    status: int
    headers: Mapping[str, str]
    content: bytes
    url: str


@dataclass
class Hints:
    """What a message tells the user to do, in the words of the command that called."""

    timeout: str = "raise the timeout"
    connect: str = "is the server running and the URL right?"
    tls: str = "check the server's certificate"
    redirect: str = "if you trust that server, give its URL instead"


class Outbound:
    """Requests to one server (``base``) under the rules of this module.

    Parameters
    ----------
    base:
        The server's safe URL (see :func:`check_url`): its origin is the only one redirects
        may lead to, and it starts every message.
    config:
        Deadline, retries and size limit.
    error:
        The exception every failure is raised as (its message redacted).
    verify:
        TLS verification: ``True``, a CA bundle path, or ``False``.
    sleep:
        Wait function used between retries (tests pass a recorder).
    """

    def __init__(self, base: str, config: HttpConfig, *, error: type[TidelensError],
                 verify: bool | str = True, sleep: Callable[[float], None] = time.sleep,
                 hints: Hints | None = None) -> None:
        if not config.timeout_s > 0 or config.timeout_s == float("inf"):
            raise ConfigError(f"timeout {config.timeout_s!r}: give a positive number of seconds (--timeout)")
        if config.max_bytes <= 0:
            raise ConfigError(f"max_bytes {config.max_bytes!r}: give a positive number of bytes")
        check_destination(base)
        self.base = base
        self.config = config
        self.error = error
        self.verify = verify
        self.hints = hints or Hints()
        self.requests_made = 0
        self.bytes_received = 0
        retry = _Retry(total=max(0, config.retries), status_forcelist=RETRY_STATUSES,
                       allowed_methods=frozenset({"GET", "HEAD", "PUT", "DELETE"}),
                       backoff_factor=config.backoff_s, raise_on_status=False, raise_on_redirect=False,
                       respect_retry_after_header=True)
        retry.sleeper = sleep
        self._session = requests.Session()
        adapter = _Adapter(max_retries=retry)
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> "Outbound":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def fail(self, message: str, redactor: Redactor) -> TidelensError:
        """The error to raise, its message redacted as a whole."""
        return self.error(redactor(message))

    def request(self, method: str, url: str, *, what: str, redactor: Redactor,
                params: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None,
                auth: tuple[str, str] | None = None, body: bytes | None = None) -> Reply:
        """Send one request (retried when transient) and return its answer, whatever its status.

        Redirects are followed by hand within the server's origin, GET only: ``requests``
        strips ``Authorization`` on a redirect to another host but keeps every other header,
        so a tenant key would leave with it.
        """
        for _hop in range(MAX_REDIRECTS + 1):
            reply = self._once(method, url, params, headers, auth, body, what, redactor)
            location = reply.headers.get("Location")
            if reply.status not in REDIRECT_STATUSES or location is None:
                return reply
            target = urljoin(reply.url, printable(location))
            if origin(target) != origin(self.base):
                raise self.fail(f"{self.base}: {what}: HTTP {reply.status} redirects to "
                                f"{redactor.snippet(safe_url(target))}, another server; not followed "
                                f"(Tidelens sends your credentials to the server you named only). "
                                f"{self.hints.redirect}", redactor)
            if method != "GET":
                raise self.fail(f"{self.base}: {what}: HTTP {reply.status} redirects to "
                                f"{redactor.snippet(safe_url(target))}; a {method} is not followed "
                                "there: give that URL instead", redactor)
            url, params = target, None  # the Location carries its own query
        raise self.fail(f"{self.base}: {what}: more than {MAX_REDIRECTS} redirects: check the URL "
                        "(a login page or a proxy loop?)", redactor)

    def _once(self, method: str, url: str, params: Mapping[str, Any] | None,
              headers: Mapping[str, str] | None, auth: tuple[str, str] | None, body: bytes | None,
              what: str, redactor: Redactor) -> Reply:
        t = self.config.timeout_s
        with _Deadline(t, redactor) as dl:
            try:
                resp = self._session.request(method, url, params=params, headers=dict(headers or {}),
                                             auth=auth, data=body, verify=self.verify, timeout=(t, t),
                                             allow_redirects=False, stream=True)
                try:
                    content = self._read(resp, what, redactor)
                finally:
                    resp.close()
            except TidelensError:
                raise
            except requests.exceptions.SSLError as exc:
                raise self.fail(f"{self.base}: TLS verification failed ({_short(exc, redactor)}): "
                                f"{self.hints.tls}", redactor) from None
            except (requests.exceptions.RequestException, urllib3.exceptions.HTTPError, OSError,
                    ValueError) as exc:
                self.requests_made += dl.attempts
                if dl.expired or _timed_out(exc):
                    raise self._timeout(what, dl, redactor) from None
                broke = ("cannot connect" if isinstance(exc, requests.exceptions.ConnectionError)
                         else f"{what}: the answer broke off")
                raise self.fail(f"{self.base}: {broke} ({_short(exc, redactor)}) after {dl.attempts} "
                                f"attempt(s): {self.hints.connect}", redactor) from None
            self.requests_made += dl.attempts
            if dl.expired:  # the body seemed to end only because the deadline closed it
                raise self._timeout(what, dl, redactor)
        self.bytes_received += len(content)
        return Reply(resp.status_code, resp.headers, content, resp.url)

    def _timeout(self, what: str, dl: _Deadline, redactor: Redactor) -> TidelensError:
        return self.fail(f"{self.base}: {what} timed out after {self.config.timeout_s:g} s "
                         f"({dl.attempts} attempt(s)): {self.hints.timeout}", redactor)

    def _read(self, resp: requests.Response, what: str, redactor: Redactor) -> bytes:
        limit = self.config.max_bytes
        declared = resp.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > limit:
            raise self._too_big(what, redactor)
        buf = bytearray()
        for chunk in resp.iter_content(64 << 10):
            buf += chunk
            if len(buf) > limit:
                raise self._too_big(what, redactor)
        return bytes(buf)

    def _too_big(self, what: str, redactor: Redactor) -> TidelensError:
        return self.fail(f"{self.base}: {what}: the answer is over {self.config.max_bytes:,} bytes "
                         "(the limit): ask for less (a shorter range, a narrower scope)", redactor)


def _timed_out(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps) is a timeout."""
    seen: set[int] = set()
    todo: list[Any] = [exc]
    while todo:
        e = todo.pop()
        if not isinstance(e, BaseException) or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, urllib3.exceptions.NewConnectionError):  # a ConnectTimeoutError too
            return False
        if isinstance(e, (requests.exceptions.Timeout, urllib3.exceptions.TimeoutError, TimeoutError)):
            return True
        todo += [*e.args, e.__cause__, e.__context__, getattr(e, "reason", None)]
    return False


def _short(exc: BaseException, redactor: Redactor) -> str:
    text = str(exc)
    for marker in ("Connection refused", "Name or service not known", "timed out",
                   "CERTIFICATE_VERIFY_FAILED", "Connection reset", "Connection aborted",
                   "Remote end closed connection"):
        if marker in text:
            return marker
    return redactor.snippet(text, 160)
