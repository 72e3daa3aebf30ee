"""serve.py: the address it prints makes the local operator, and the index page a link answers
starts a new tab's work sooner; nothing else changes.

The browser side (no 404 on a page's own path, no element module loaded late) is asserted in
tests/test_browser.py, on the real server.
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from analytics.access import OperatorSecret
from pages._nav import FIRST_RENDER_ELEMENTS, PAGES
from serve import STREAMLIT_JS, FirstRenderIndex, OperatorLink, _split_token, element_modules, index_script

INDEX = b"<!DOCTYPE html><html><head><title>Streamlit</title></head><body></body></html>"


def test_every_element_module_a_page_lists_is_in_the_installed_streamlit() -> None:
    # A Streamlit upgrade that renames a module fails here, not silently in the browser.
    for page, names in FIRST_RENDER_ELEMENTS.items():
        files = element_modules(names)
        assert len(files) == len(names), (page, names, files)
        assert all((STREAMLIT_JS / f).is_file() for f in files)
    assert set(FIRST_RENDER_ELEMENTS) == {url for *_, url in PAGES}


def test_the_script_names_the_pages_and_their_modules() -> None:
    script = index_script()
    pages = json.loads(re.search(r"const pages = (\[.*?\])", script).group(1))
    assert pages == [url for *_, url in PAGES]
    files = json.loads(re.search(r"files = (\{.*?\});", script).group(1))
    assert files["overview"][0].startswith("PlotlyChart.") and files["overview"][0].endswith(".js")
    # the server's address only where the path ends in a page, and never over one already given
    assert "if (pages.includes(page))" in script and "if (!given.BACKEND_BASE_URL)" in script
    assert "</script" not in script[len("<script>"):-len("</script>")]


def _serve(app, method: str = "GET", path: str = "/overview",
           headers: list[tuple[bytes, bytes]] | None = None) -> tuple[dict, bytes, list]:
    """One request through ``app``; the response's start message, its body and the request seen."""
    seen: list = []
    sent: list = []

    async def inner(scope, receive, send):
        seen.append(scope)
        await app(scope, receive, send)

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path,
             "headers": headers or [(b"accept-encoding", b"gzip"), (b"host", b"x")]}
    asyncio.run(FirstRenderIndex(inner, script="<script>HELLO</script>")(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start, body, seen


def _static(content_type: bytes, body: bytes, chunks: int = 1):
    """A stand-in for Streamlit's static files: ``body`` in ``chunks`` parts, with a validator."""
    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", content_type), (b"content-length", str(len(body)).encode()),
            (b"etag", b'"abc"'), (b"last-modified", b"Thu, 03 Dec 2026 13:30:04 GMT")]})
        step = max(1, len(body) // chunks)
        parts = [body[i:i + step] for i in range(0, len(body), step)]
        for i, part in enumerate(parts):
            await send({"type": "http.response.body", "body": part, "more_body": i < len(parts) - 1})
    return app


@pytest.mark.parametrize("chunks", [1, 3])
def test_the_index_gets_the_script_first_in_its_head(chunks: int) -> None:
    start, body, seen = _serve(_static(b"text/html; charset=utf-8", INDEX, chunks))
    assert body.startswith(b"<!DOCTYPE html><html><head><script>HELLO</script><title>")
    headers = dict(start["headers"])
    assert int(headers[b"content-length"]) == len(body)
    assert b"etag" not in headers and b"last-modified" not in headers  # they described the file
    assert b"accept-encoding" not in dict(seen[0]["headers"])  # asked uncompressed, to be edited


@pytest.mark.parametrize("method, path, content_type", [
    ("GET", "/static/js/index.js", b"text/javascript"),  # Streamlit's assets
    ("GET", "/overview/_stcore/health", b"text/html"),  # its routes, under a page's path too
    ("GET", "/favicon.png", b"image/png"),  # a file: not HTML
    ("HEAD", "/overview", b"text/html; charset=utf-8"),
    ("POST", "/overview", b"text/html; charset=utf-8"),
])
def test_everything_else_passes_untouched(method: str, path: str, content_type: bytes) -> None:
    start, body, _ = _serve(_static(content_type, INDEX), method=method, path=path)
    assert body == INDEX
    assert dict(start["headers"])[b"etag"] == b'"abc"'


def test_connections_open_without_nagle() -> None:
    """A socket bound as Streamlit binds its own (no protocol named) gets TCP_NODELAY once
    uvicorn's protocol takes a connection from it; asyncio alone leaves it off."""
    import socket

    from uvicorn.protocols.http.h11_impl import H11Protocol

    from serve_tcp import set_no_delay, without_nagle

    without_nagle()
    assert without_nagle() == []  # applied once
    assert getattr(H11Protocol.connection_made, "without_nagle", False)
    listener = socket.socket(family=socket.AF_INET)  # as streamlit/web/server/starlette binds
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    client = socket.create_connection(listener.getsockname())
    conn, _ = listener.accept()
    try:
        assert conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0  # what asyncio would keep

        class Transport:
            def get_extra_info(self, name: str):
                return conn if name == "socket" else None

        set_no_delay(Transport())
        assert conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
    finally:
        for s in (conn, client, listener):
            s.close()


def _through_operator_link(secret: OperatorSecret, method: str, path: str, query: bytes,
                           scheme: str = "http", kind: str = "http") -> tuple[dict | None, bool]:
    """One request through :class:`serve.OperatorLink`: its answer's start (None when it passed
    the request on) and whether the app behind it was asked."""
    asked, sent = [], []

    async def app(scope, receive, send):
        asked.append(scope)

    async def send(message):
        sent.append(message)

    scope = {"type": kind, "method": method, "path": path, "raw_path": path.encode(), "query_string": query,
             "headers": [(b"host", b"x")], "server": ("127.0.0.1", 8501), "scheme": scheme}
    asyncio.run(OperatorLink(app, secret)(scope, None, send))
    return (sent[0] if sent else None), bool(asked)


def test_the_printed_address_sets_the_operators_cookie_and_drops_the_token() -> None:
    secret = OperatorSecret.new()
    token = secret.token.encode()
    start, asked = _through_operator_link(secret, "GET", "/data", b"source=uploads&token=" + token + b"&w=%C3%A9+1")
    headers = dict(start["headers"])
    assert start["status"] == 303 and not asked
    assert headers[b"location"] == b"./data?source=uploads&w=%C3%A9+1"  # the rest as it came, relative
    assert headers[b"set-cookie"].decode() == (f"tidelens_operator_8501={secret.cookie_value}; Path=/; HttpOnly; "
                                               "SameSite=Strict")
    assert headers[b"cache-control"] == b"no-store" and headers[b"referrer-policy"] == b"no-referrer"
    start, _ = _through_operator_link(secret, "GET", "/", b"token=" + token, scheme="https")
    assert dict(start["headers"])[b"location"] == b"./" and b"; Secure" in dict(start["headers"])[b"set-cookie"]
    # A wrong token (its last character changed: a fixed one was the token itself 1 time in 16, the
    # last of token_urlsafe(32)'s 43 characters carrying 4 bits), or
    # the token twice: the address is cleaned, no cookie.
    wrong = token[:-1] + (b"B" if token.endswith(b"A") else b"A")
    for query in (b"token=" + wrong, b"token=" + token + b"&token=" + token, b"token="):
        start, asked = _through_operator_link(secret, "GET", "/_stcore/health", query)
        assert (start["status"], asked) == (303, False) and b"set-cookie" not in dict(start["headers"])
        assert dict(start["headers"])[b"location"] == b"./health"
    # Anything else passes on untouched: no token, another method, a websocket.
    for method, query in (("GET", b"source=uploads&tokens=1"), ("POST", b"token=" + token)):
        assert _through_operator_link(secret, method, "/data", query) == (None, True)
    assert _through_operator_link(secret, "GET", "/_stcore/stream", b"token=" + token, kind="websocket") == (None, True)


@pytest.mark.parametrize("query", [b"", b"token", b"token=a+b%2Bc&x=1", b"a=1&&b=2&%74oken=t", b"w=%C3%A9&token=&token=z",
                                   b"tokens=1&token%3D=2", b"db=data%2Fmine.duckdb&source=duckdb"])
def test_the_token_is_read_from_a_query_as_the_standard_library_reads_it(query: bytes) -> None:
    """serve.py splits the query itself (the other parts go back byte for byte); what it finds is
    what urllib.parse.parse_qsl finds."""
    from urllib.parse import parse_qsl

    given, kept = _split_token(query)
    pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    assert given == [v for k, v in pairs if k == "token"]
    assert parse_qsl(b"&".join(kept).decode("latin-1"), keep_blank_values=True) == [(k, v) for k, v in pairs
                                                                                    if k != "token"]
