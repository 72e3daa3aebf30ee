"""The app server's TCP: Nagle's algorithm off on every connection (``serve.py`` applies it).

Streamlit's server binds its listening socket as ``socket.socket(family)``, without naming TCP,
and asyncio sets ``TCP_NODELAY`` only on sockets whose protocol says TCP: every connection then
holds a response's body until the client acknowledges its headers, and a client acknowledges
late (40 ms on Linux) on a connection kept alive. Measured on the sample (bench/app.py): 44 ms a
request after the first on a connection, under 1 ms with this. Imports nothing of Streamlit, so a
peer in bench/app.py can be served the same way.
"""

from __future__ import annotations

import socket
from typing import Any


def set_no_delay(transport: Any) -> None:
    """Turn Nagle's algorithm off on ``transport``'s TCP socket (anything else is left alone)."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass  # a socket closing meanwhile: nothing to speed up


def without_nagle() -> list[str]:
    """Make uvicorn's HTTP protocols (the websocket inherits their socket) open every connection
    with ``TCP_NODELAY``; the names of the protocols changed. Idempotent."""
    import importlib

    changed = []
    for module, name in (("uvicorn.protocols.http.h11_impl", "H11Protocol"),
                         ("uvicorn.protocols.http.httptools_impl", "HttpToolsProtocol")):
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue  # that HTTP implementation is not installed
        made = cls.connection_made
        if getattr(made, "without_nagle", False):
            continue

        def connection_made(self: Any, transport: Any, _made: Any = made) -> None:
            set_no_delay(transport)
            _made(self, transport)

        connection_made.without_nagle = True  # type: ignore[attr-defined]
        cls.connection_made = connection_made
        changed.append(name)
    return changed
