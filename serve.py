"""The web server: Streamlit's ASGI app for ``app.py``, with the local operator's link, and an
index page that lets a new tab start its work before the page has run.

``make run`` serves this (``streamlit run serve.py``).

- **The local operator's link.** Without ``[access]`` in ``tidelens.toml``, the admin is whoever
  holds the secret this server prints as it starts (an address with ``?token=``, as Jupyter
  prints its own), never whoever connects from 127.0.0.1: a proxy on the same machine makes
  every visitor do that. That address is answered with a redirect to the same address without
  the token (so no link the app makes, and no address bar, carries it) and a cookie, HttpOnly
  and SameSite=Strict, that each tab's session then shows (:class:`OperatorLink`,
  :class:`analytics.access.OperatorSecret`). ``TIDELENS_TOKEN`` sets the token instead of a
  fresh one each start (read, then removed from the environment the app's subprocesses get).

Two things a new tab on a page's own link (``/overview``, a shared link) otherwise waits for,
measured by ``bench/app.py``:

- **The server's address.** Streamlit's frontend takes a link's path for the server's, asks
  ``/overview/_stcore/health``, gets a 404, and asks the parent about 0.1 s later. The index
  tells it the address (``window.__streamlit.BACKEND_BASE_URL``, the frontend's setting for
  embedding) when the path ends in one of the app's pages; under a proxy's prefix too.
- **The page's element modules.** The frontend loads the code of each kind of element (the
  Plotly chart's is 4.7 MB) only when the first such element arrives, after the page's run
  has started; the index imports the modules the page's first render draws
  (``pages/_nav.FIRST_RENDER_ELEMENTS``) while the tab is still connecting.

- **The delayed ACK.** Streamlit's server creates its listening socket without naming TCP, so
  asyncio leaves Nagle's algorithm on for every connection: a response's body waits for the
  client's delayed acknowledgement of its headers, 40 ms a request on a kept-alive connection
  (the ~60 files of Streamlit's frontend, six at a time: ~0.4 s of a new tab; a burst of the
  page's elements on the websocket too). Connections are opened with ``TCP_NODELAY``, as asyncio
  does for the sockets it creates itself (``serve_tcp.without_nagle``).

Nothing else changes: every other response passes through untouched. ``streamlit run app.py``
serves the same app without these four: no token is printed, so nobody there is the local
operator, and its Data page says to start it with ``make run``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Awaitable, Callable
from urllib.parse import quote, unquote_plus

import streamlit as st
from starlette.middleware import Middleware
from streamlit import config as st_config
from streamlit import net_util
from streamlit.web.server import server_util

from analytics.access import OPERATOR_COOKIE, OperatorSecret, start_operator_secret
from analytics.config import TOKEN_ENV, take_env_setting
from analytics.errors import ConfigError
from pages._nav import FIRST_RENDER_ELEMENTS, PAGES
from serve_tcp import without_nagle

ROOT = Path(__file__).resolve().parent
STREAMLIT_JS = Path(st.__file__).resolve().parent / "static" / "static" / "js"
# Paths that never answer with the index page (Streamlit's own routes and its assets).
_NOT_INDEX = re.compile(r"(^|/)(_stcore|static|media|component|app/static)/")

Scope = dict[str, Any]
Message = dict[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]],
                   Awaitable[None]]


def element_modules(names: tuple[str, ...], folder: Path = STREAMLIT_JS) -> list[str]:
    """The installed frontend's file of each element module named (``PlotlyChart`` ->
    ``PlotlyChart.D9Z0_fxz.js``); a name this Streamlit does not have is left out.

    >>> element_modules(("NoSuchElement",))
    []
    """
    out = []
    for name in names:
        found = sorted(f.name for f in folder.glob(f"{name}.*.js")
                       if re.fullmatch(rf"{re.escape(name)}\.[\w-]+\.js", f.name))
        out.extend(found[:1])
    return out


def index_script(pages: tuple[str, ...] = tuple(p[3] for p in PAGES),
                 modules: dict[str, tuple[str, ...]] = FIRST_RENDER_ELEMENTS) -> str:
    """The ``<script>`` put first in the index page's head: the server's address, and the
    imports of the opened page's element modules (the first page's for the app's root)."""
    files = {page: element_modules(modules.get(page, ())) for page in pages}
    return ("<script>(() => {"
            f"const pages = {json.dumps(list(pages))}, files = {json.dumps(files)};"
            "const parts = location.pathname.replace(/\\/+$/, '').split('/');"
            "const page = parts[parts.length - 1];"
            "if (pages.includes(page)) {"
            "  parts.pop();"
            "  const given = window.__streamlit || {};"
            "  if (!given.BACKEND_BASE_URL) window.__streamlit = {...given,"
            "    BACKEND_BASE_URL: location.origin + parts.join('/') + '/'};"
            "}"
            "const base = location.origin + parts.join('/') + '/static/js/';"
            "for (const f of files[pages.includes(page) ? page : pages[0]] || [])"
            "  import(base + f).catch(() => {});"  # the page imports it again, and says why if it fails
            "})()</script>")


class FirstRenderIndex:
    """ASGI middleware: the index page (what a page's link answers) with :func:`index_script`
    first in its head; every other response untouched."""

    def __init__(self, app: ASGIApp, script: str | None = None) -> None:
        self.app = app
        self.script = (script if script is not None else index_script()).encode()

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Message]],
                       send: Callable[[Message], Awaitable[None]]) -> None:
        if scope["type"] != "http" or scope["method"] != "GET" or _NOT_INDEX.search(scope["path"]):
            await self.app(scope, receive, send)
            return
        # Uncompressed, so that it can be edited (the index is a few kB).
        scope = {**scope, "headers": [(k, v) for k, v in scope["headers"] if k.lower() != b"accept-encoding"]}
        start: Message = {}
        chunks: list[bytes] = []

        async def edit(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
                return
            if message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return
            body, headers = b"".join(chunks), list(start.get("headers", []))
            if dict(headers).get(b"content-type", b"").startswith(b"text/html") and b"<head>" in body:
                body = body.replace(b"<head>", b"<head>" + self.script, 1)
                # Its length changed; and not a validator of the file's, which no longer matches.
                headers = [(k, str(len(body)).encode() if k.lower() == b"content-length" else v)
                           for k, v in headers if k.lower() not in (b"etag", b"last-modified")]
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, edit)


class OperatorLink:
    """ASGI middleware: a GET carrying ``token`` in its query is answered with a redirect to the
    same address without it, and, when the token is ``secret``'s, the local operator's cookie;
    every other request untouched."""

    def __init__(self, app: ASGIApp, secret: OperatorSecret) -> None:
        self.app = app
        self.secret = secret

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Message]],
                       send: Callable[[Message], Awaitable[None]]) -> None:
        given, kept = _split_token(scope.get("query_string", b"")) if scope["type"] == "http" else ([], [])
        if not given or scope["method"] not in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        # Relative, so that it lands under a proxy's prefix too; "./" so that no segment reads
        # as a scheme.
        raw_path = scope.get("raw_path") or quote(scope["path"]).encode()
        location = b"./" + raw_path.split(b"?", 1)[0].rsplit(b"/", 1)[-1] + (b"?" + b"&".join(kept) if kept else b"")
        headers = [(b"location", location), (b"content-length", b"0"), (b"cache-control", b"no-store"),
                   (b"referrer-policy", b"no-referrer")]
        if len(given) == 1 and self.secret.admits_token(given[0]):
            headers.append((b"set-cookie", operator_cookie(self.secret, scope).encode()))
        await send({"type": "http.response.start", "status": 303, "headers": headers})
        await send({"type": "http.response.body", "body": b""})


def _split_token(query: bytes) -> tuple[list[str], list[bytes]]:
    """The ``token`` values of a raw query string, and its other parts as they came."""
    given, kept = [], []
    for part in query.split(b"&") if query else []:
        key, _, value = part.partition(b"=")
        if unquote_plus(key.decode("latin-1")) == "token":
            given.append(unquote_plus(value.decode("latin-1")))
        elif part:
            kept.append(part)
    return given, kept


def operator_cookie(secret: OperatorSecret, scope: Scope) -> str:
    """The ``Set-Cookie`` value that makes a browser the local operator of the server that
    ``scope`` reached: named for its port, for the whole site, never readable by scripts nor
    sent from another site's page, and for this browser session only."""
    server = scope.get("server") or ()
    name = f"{OPERATOR_COOKIE}_{server[1]}" if len(server) > 1 and server[1] else OPERATOR_COOKIE
    secure = "; Secure" if scope.get("scheme") == "https" else ""
    return f"{name}={secret.cookie_value}; Path=/; HttpOnly; SameSite=Strict{secure}"


def operator_urls(secret: OperatorSecret) -> list[str]:
    """The addresses to print: where Streamlit would say the app is, each with the token."""
    if st_config.is_manually_set("browser.serverAddress"):
        hosts = [st_config.get_option("browser.serverAddress")]
    elif st_config.get_option("server.address") not in (None, "", "0.0.0.0", "::"):  # noqa: S104
        hosts = [server_util.get_display_address(st_config.get_option("server.address"))]
    else:
        hosts = ["localhost", *([ip] if (ip := net_util.get_internal_ip()) else [])]
    return [f"{server_util.get_url(h)}/?token={secret.token}" for h in hosts]


def start_operator() -> OperatorSecret:
    """This server's operator secret (``TIDELENS_TOKEN``, taken out of the environment, or a
    fresh one), its addresses printed once, here, as the server starts."""
    try:
        secret = start_operator_secret(take_env_setting(TOKEN_ENV) or None)
    except ConfigError as exc:
        raise SystemExit(f"tidelens: {exc}") from None
    urls = operator_urls(secret)
    print("\n  Tidelens: open " + "\n  or ".join(urls)
          + "\n  Whoever opens this address is the local operator (an admin while tidelens.toml has no "
          "[access]);\n  the address without the token is read-only (docs/deployment.md, \"Sign-in and roles\").\n",
          flush=True)
    return secret


without_nagle()
app = st.App(str(ROOT / "app.py"), middleware=[Middleware(OperatorLink, secret=start_operator()),
                                               Middleware(FirstRenderIndex)])
