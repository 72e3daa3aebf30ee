"""The web server: Streamlit's ASGI app for ``app.py``, with an index page that lets a new tab
start its work before the page has run.

``make run`` serves this (``streamlit run serve.py``). Two things a new tab on a page's own link
(``/overview``, a shared link) otherwise waits for, measured by ``bench/app.py``:

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

Nothing else changes: every other response passes through untouched, and ``streamlit run
app.py`` serves the same app without these three.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Awaitable, Callable

import streamlit as st
from starlette.middleware import Middleware

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


without_nagle()
app = st.App(str(ROOT / "app.py"), middleware=[Middleware(FirstRenderIndex)])
