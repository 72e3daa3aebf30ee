"""Addresses Tidelens never sends a request to, whatever is listed: link-local addresses and
cloud instance metadata endpoints, which answer with the machine's own credentials.

:mod:`analytics.outbound` checks every server before a request (:func:`check_destination`: the
name, and each address it resolves to) and every connection's peer once connected (a name that
resolved elsewhere on the first look).
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit, urlunsplit

from analytics.errors import ConfigError

# Cloud instance metadata (AWS, GCP, Azure, OpenStack: 169.254.169.254; AWS over IPv6:
# fd00:ec2::254; Alibaba: 100.100.100.200) answers with the instance's credentials.
BLOCKED_NETWORKS = tuple(ipaddress.ip_network(n) for n in (
    "169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128", "100.100.100.200/32"))
BLOCKED_NAMES = frozenset({"metadata", "metadata.google.internal", "metadata.goog",
                           "metadata.azure.com", "instance-data", "instance-data.ec2.internal"})


def safe_url(url: str) -> str:
    """The server's URL without credentials, query or fragment: what may be shown or stored.

    >>> safe_url("https://user@prom.example:9090/prometheus/?x=1")
    'https://prom.example:9090/prometheus'
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal keeps its brackets, or the URL would read as host:port
        host = f"[{host}]"
    try:
        if parts.port:
            host += f":{parts.port}"
    except ValueError:
        pass
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


def blocked_address(address: str) -> bool:
    """Whether ``address`` is link-local or a metadata endpoint (an IPv4-mapped one too).

    >>> blocked_address("169.254.169.254"), blocked_address("::ffff:169.254.169.254"), blocked_address("10.0.0.1")
    (True, True, False)
    """
    try:
        addr = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if addr.version == 6 and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return any(addr in net for net in BLOCKED_NETWORKS if net.version == addr.version)


def check_destination(url: str, *, resolve: bool = True) -> None:
    """Raise :class:`ConfigError` when ``url``'s host is a metadata name or (resolved, when
    ``resolve``) a link-local or metadata address; a name that does not resolve is left to the
    request to report (and the connection's own check in :mod:`analytics.outbound` still applies).

    >>> check_destination("http://metadata.google.internal/x")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    analytics.errors.ConfigError: server 'http://metadata.google.internal/x': metadata.google.internal is a link-local ...
    """

    host = (urlsplit(url).hostname or "").rstrip(".").lower()

    def refused(what: str) -> ConfigError:
        return ConfigError(f"server {safe_url(url)!r}: {what} is a link-local or cloud metadata address, "
                           "never asked (it answers with the machine's own credentials), listed or not")

    if host in BLOCKED_NAMES or blocked_address(host):
        raise refused(host)
    if not resolve:
        return
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return
    for info in infos:
        if blocked_address(str(info[4][0])):
            raise refused(f"{host} resolves to {info[4][0]}, which")
