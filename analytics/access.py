"""Who is at the app and what they may do: ``[access]`` in ``tidelens.toml``, the visitor's
identity, their role, and the one check every write makes.

Three roles, each allowing what the one before does and more:

- **viewer** reads every page, follows links and exports (CSV, SVG, reports, plans);
- **editor** also adds data: uploads, mapped tables, local GPU samples, pulls from the servers
  the operator listed (``[live] servers``);
- **admin** also changes what everyone's numbers are computed with: the workload map, and (in
  ``tidelens.toml``, by hand) SLOs, ``[live] servers`` and the data folder.

Who a visitor is comes from the web server (:class:`Request`, filled by ``pages/_access.py``):

- **No ``[access]`` section** (a personal install, ``make run``): a browser on the server's
  own machine (Streamlit reports the loopback address as ``None``) that no proxy forwarded is
  the local operator, an admin, as before roles existed. Anyone else (another machine, or a
  request a proxy forwarded) is a viewer, and the Data page says how to enable editing
  (:data:`ENABLE_EDITING`).
- **``sign_in = "oidc"``**: Streamlit's own OpenID Connect sign-in (``st.login``, ``[auth]``
  in ``.streamlit/secrets.toml``); the identity is the signed-in e-mail Streamlit vouches for.
- **``sign_in = "header"``**: an authenticating proxy (oauth2-proxy, nginx with basic auth)
  names the user in a header (``header``, e.g. ``X-Forwarded-Email``); trusted only on a
  request whose TCP peer is one of ``trusted_proxies``: a header sent by anyone else is ignored.

A visitor who has not signed in gets ``anonymous`` (no access by default: the app shows the
sign-in); a signed-in one the first list they match: ``admins``, ``editors``, ``viewers``
(shell-style patterns, case-insensitive: ``*@example.com``).

Every write is checked here (:func:`require`), in the library, whatever the page drew: a
hidden widget is not a check. This module never imports Streamlit.

>>> settings = AccessSettings(sign_in="header", header="X-User", trusted_proxies=("10.0.0.5",),
...                           admins=("ops",), editors=("*@example.com",))
>>> identify(settings, Request("10.0.0.5", {"x-user": "ann@example.com"})).role
'editor'
>>> identify(settings, Request("10.9.9.9", {"x-user": "ops"})).role is None  # not the proxy
True
"""

from __future__ import annotations

import fnmatch
import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from analytics.errors import AccessDenied

ROLES = ("viewer", "editor", "admin")
SIGN_IN = ("oidc", "header")
# The least role each action needs.
ACTIONS: dict[str, str] = {
    "read": "viewer", "export": "viewer",
    "load": "editor", "pull": "editor", "save_mapping": "editor",
    "change_map": "admin", "change_slo": "admin", "change_servers": "admin", "change_data_dir": "admin",
}
ACTION_WORDS = {
    "read": "reading", "export": "exporting", "load": "loading data", "pull": "pulling from a server",
    "save_mapping": "saving a column mapping", "change_map": "changing the workload map",
    "change_slo": "changing SLOs", "change_servers": "changing [live] servers",
    "change_data_dir": "changing the data folder",
}
# Headers a reverse proxy adds: a request carrying one was forwarded, so its loopback peer is the
# proxy and not a browser on the server's own machine.
FORWARDED_HEADERS = ("forwarded", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto",
                     "x-forwarded-user", "x-forwarded-email", "x-forwarded-preferred-username",
                     "x-real-ip", "x-auth-request-email", "x-auth-request-user")
LOOPBACK = ("127.0.0.1", "::1")
ENABLE_EDITING = ("This server is reached from other machines and its `tidelens.toml` has no "
                  "`[access]` section, so every visitor here may read and export but not change "
                  "anything. To let people load data or change the map, the operator adds "
                  "`[access]` with a sign-in (Streamlit's OIDC, or a header from an "
                  "authenticating proxy) and the `editors` and `admins` (docs/deployment.md, "
                  "\"Sign-in and roles\").")


@dataclass(frozen=True)
class AccessSettings:
    """``[access]`` in ``tidelens.toml``: how visitors sign in and which role each gets."""

    sign_in: str = field(default="header", metadata={
        "help": "how visitors sign in: \"oidc\" (Streamlit's st.login, [auth] in "
                ".streamlit/secrets.toml) or \"header\" (a user header set by an authenticating "
                "proxy)"})
    header: str = field(default="X-Forwarded-Email", metadata={
        "help": "the header the proxy names the signed-in user in (sign_in = \"header\")"})
    trusted_proxies: tuple[str, ...] = field(default=(), metadata={
        "help": "addresses or networks (10.0.0.0/8) of the proxies whose user header is "
                "believed; a header from any other peer is ignored"})
    admins: tuple[str, ...] = field(default=(), metadata={
        "help": "users (e-mail or name, * patterns) who may also change the workload map, SLOs, "
                "[live] servers and the data folder"})
    editors: tuple[str, ...] = field(default=(), metadata={
        "help": "users who may also upload data and pull from the listed servers"})
    viewers: tuple[str, ...] = field(default=("*",), metadata={
        "help": "users who may read pages, follow links and export (every signed-in user by "
                "default)"})
    anonymous: str = field(default="none", metadata={
        "help": "role of a visitor who has not signed in: \"none\" (the sign-in is shown) or "
                "\"viewer\""})

    def __post_init__(self) -> None:
        if self.sign_in not in SIGN_IN:
            raise ValueError(f"sign_in: {self.sign_in!r} is not one of {', '.join(SIGN_IN)}")
        if self.anonymous not in ("none", "viewer"):
            raise ValueError(f"anonymous: {self.anonymous!r} must be \"none\" or \"viewer\"")
        if self.sign_in == "header" and not self.trusted_proxies:
            raise ValueError("trusted_proxies: sign_in = \"header\" needs the proxy's address "
                             "(a header from anyone else must not be believed)")
        if not self.header.strip():
            raise ValueError("header: name the header the proxy sets")
        for net in self.trusted_proxies:
            try:
                ipaddress.ip_network(net, strict=False)
            except ValueError:
                raise ValueError(f"trusted_proxies: {net!r} is not an address or network") from None


def access_settings(config_path: str | Path | None) -> AccessSettings | None:
    """``[access]`` of the configuration file, or ``None`` when it has none (a personal install).

    Raises :class:`~analytics.errors.ConfigError` naming the file and key for an unknown key or a wrong value.
    """
    from analytics.config import typed_section

    return typed_section(config_path, "access", AccessSettings)


@dataclass(frozen=True)
class Request:
    """What the web server knows of one visitor."""

    peer: str | None
    """The TCP peer's address; ``None`` for loopback (as Streamlit reports it) or unknown."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """The request's headers (any case)."""
    oidc_email: str | None = None
    """The e-mail of a visitor signed in through Streamlit's OIDC (``st.user``), else ``None``."""

    def header(self, name: str) -> str | None:
        low = name.lower()
        for k, v in self.headers.items():
            if k.lower() == low:
                return v
        return None


@dataclass(frozen=True)
class Identity:
    """A visitor: who they are (as the audit record names them), their role, and how known."""

    who: str
    role: str | None
    """viewer, editor, admin; ``None``: not signed in (or not on any list), may read nothing."""
    how: str
    """"local" (the operator on the server's machine, or at the command line), "oidc", "header",
    "none" (not signed in), or "config" (``[access]`` could not be read: nobody is let in)."""
    note: str = ""
    """Why this role, for the page (e.g. :data:`ENABLE_EDITING`)."""

    @property
    def is_local(self) -> bool:
        return self.how == "local"


LOCAL_OPERATOR = Identity("local operator", "admin", "local")


def command_line_identity() -> Identity:
    """Whoever runs a command (``tidelens ingest``, ``pull``): the operator, by their login name,
    as the audit record names them."""
    import getpass

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's)
        user = "unknown user"
    return Identity(f"{user} (command line)", "admin", "local")


def _is_loopback(peer: str | None) -> bool:
    if peer is None:
        return True
    try:
        return ipaddress.ip_address(peer).is_loopback
    except ValueError:
        return False


def _peer_in(peer: str | None, nets: tuple[str, ...]) -> bool:
    try:
        addr = ipaddress.ip_address(peer if peer is not None else LOOPBACK[0])
    except ValueError:
        return False
    if addr.version == 6 and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    candidates = [addr] if peer is not None else [ipaddress.ip_address(a) for a in LOOPBACK]
    return any(a in ipaddress.ip_network(n, strict=False) for n in nets for a in candidates
               if a.version == ipaddress.ip_network(n, strict=False).version)


def forwarded(request: Request) -> bool:
    """Whether a proxy forwarded the request (it carries a header only a proxy adds)."""
    return any(request.header(h) is not None for h in FORWARDED_HEADERS)


def role_of(settings: AccessSettings, user: str) -> str | None:
    """The role of a signed-in ``user``: the first of admins, editors, viewers that matches."""
    name = user.strip().lower()
    for role, patterns in (("admin", settings.admins), ("editor", settings.editors),
                           ("viewer", settings.viewers)):
        if any(fnmatch.fnmatchcase(name, p.strip().lower()) for p in patterns):
            return role
    return None


def identify(settings: AccessSettings | None, request: Request) -> Identity:
    """Who ``request`` comes from and their role, by the rules of the module docstring."""
    if settings is None:
        if _is_loopback(request.peer) and not forwarded(request):
            return LOCAL_OPERATOR
        return Identity("visitor", "viewer", "none", ENABLE_EDITING)
    anonymous = None if settings.anonymous == "none" else settings.anonymous
    user: str | None = None
    if settings.sign_in == "oidc":
        user = request.oidc_email
    elif _peer_in(request.peer, settings.trusted_proxies):
        user = request.header(settings.header)
    user = (user or "").strip() or None
    if user is None:
        return Identity("anonymous", anonymous, "none", "not signed in")
    role = role_of(settings, user)
    if role is None:
        return Identity(user, None, settings.sign_in, "signed in, but on no list of [access]")
    return Identity(user, role, settings.sign_in)


def allows(identity: Identity, action: str) -> bool:
    """Whether ``identity``'s role allows ``action`` (a key of :data:`ACTIONS`)."""
    need = ACTIONS[action]
    return identity.role is not None and ROLES.index(identity.role) >= ROLES.index(need)


def require(identity: Identity, action: str) -> None:
    """Raise :class:`AccessDenied` unless ``identity`` may do ``action``; the library's check
    before any write, whatever the page showed."""
    if allows(identity, action):
        return
    need = ACTIONS[action]
    has = f"the {identity.role} role" if identity.role else "no role (not signed in, or on no list)"
    hint = identity.note if identity.note == ENABLE_EDITING else (
        f"ask the server's operator to add you to `{need}s` under [access] in tidelens.toml")
    raise AccessDenied(identity.who, f"{ACTION_WORDS[action]} needs the {need} role; you have "
                       f"{has}. {hint}")


# -- outbound: where a pull from the app may go, with which secrets -------------------------------
def check_pull(identity: Identity, url: str, secrets: list[str], allowed: list[str] | None,
               listed_secrets: dict[str, list[str]] | None) -> None:
    """Raise :class:`AccessDenied` unless ``identity`` may pull from ``url`` naming ``secrets``
    (environment variable names and file paths).

    The local operator keeps the rules of a personal install: any server when no list is
    configured, the list when there is one (``analytics.live.client.check_allowed``), secrets
    only towards a listed server. Anyone else pulls only from ``[live] servers`` and names only
    the secrets the operator listed for that server (``[live.secrets]``). Link-local and cloud
    metadata addresses are refused for everyone, listed or not
    (:func:`analytics.outbound.check_destination`, when the client is made).
    """
    from analytics.live.client import check_allowed
    from analytics.outbound import safe_url

    require(identity, "pull")
    server = safe_url(url)
    if identity.is_local:
        check_allowed(url, allowed)
        if allowed is None and secrets:
            raise AccessDenied(identity.who, "credentials are used only towards listed servers: "
                               "add this server under [live] servers in tidelens.toml first")
        return
    if not allowed or server not in allowed:
        raise AccessDenied(identity.who, f"server {server} is not in [live] servers of tidelens.toml "
                           f"(allowed: {', '.join(allowed or []) or 'none'}); from the app, pulls go "
                           "only to the servers the operator listed: ask them to add it")
    mine = set((listed_secrets or {}).get(server, []))
    for name in secrets:
        if name not in mine:
            # The message never says whether such a variable or file exists.
            raise AccessDenied(identity.who, f"a secret named on this page must be one the operator "
                               f"listed for {server} under [live.secrets] in tidelens.toml; this one "
                               "is not: pick a listed one, or ask the operator to list it")

