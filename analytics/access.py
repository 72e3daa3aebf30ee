"""Who is at the app and what they may do: ``[access]`` in ``tidelens.toml``, the visitor's
identity, their role, and the one check every write makes.

Three roles, each allowing what the one before does and more:

- **viewer** reads every page, follows links and exports (CSV, SVG, reports, plans);
- **editor** also adds data: uploads, mapped tables, local GPU samples, pulls from the servers
  the operator listed (``[live] servers``), recorded changes of the pool's policy;
- **admin** also changes what everyone's numbers are computed with: the workload map, and (in
  ``tidelens.toml``, by hand) SLOs, ``[live] servers`` and the data folder.

Who a visitor is comes from the web server (:class:`Request`, filled by ``pages/_access.py``):

- **No ``[access]`` section** (a personal install, ``make run``): the **local operator**, an
  admin, is whoever holds the secret the server printed at start (:class:`OperatorSecret`:
  ``serve.py`` prints an address with a token, as Jupyter does, and answers it with a cookie),
  never whoever connects from an address: a proxy on the same machine makes every visitor
  arrive from 127.0.0.1. Everyone else is a viewer, and the Data page says how to enable
  editing (:data:`ENABLE_EDITING`; :data:`NO_OPERATOR_LINK` when the server printed no token,
  ``streamlit run app.py``). A script run no web server asked for (AppTest, a bare
  ``python app.py``) is its runner's, as a command is.
- **``sign_in = "oidc"``**: Streamlit's own OpenID Connect sign-in (``st.login``, ``[auth]``
  in ``.streamlit/secrets.toml``); the identity is the signed-in e-mail Streamlit vouches for,
  none when the provider says that e-mail is not verified (``email_verified``).
- **``sign_in = "header"``**: an authenticating proxy (oauth2-proxy, nginx with basic auth)
  names the user in a header (``header``, e.g. ``X-Forwarded-Email``); trusted only on a
  request whose TCP peer is one of ``trusted_proxies``: a header sent by anyone else is ignored.

A visitor who has not signed in gets ``anonymous`` (no access by default: the app shows the
sign-in); a signed-in one the first list they match: ``admins``, ``editors``, ``viewers``
(shell-style patterns: ``*@example.com``). A name is matched as the identity provider wrote it:
only A-Z are folded to a-z, and a name that Unicode NFKC normalisation would change (a Kelvin
sign for K, a full-width letter) gets no role, so no fold turns one person into another.

Every write is checked here (:func:`require`), in the library, whatever the page drew: a
hidden widget is not a check. This module never imports Streamlit.

>>> settings = AccessSettings(sign_in="header", header="X-User", trusted_proxies=("10.0.0.5",),
...                           admins=("ops",), editors=("*@example.com",))
>>> identify(settings, Request("10.0.0.5", {"x-user": "ann@example.com"})).role
'editor'
>>> identify(settings, Request("10.9.9.9", {"x-user": "ops"})).role is None  # not the proxy
True
>>> identify(settings, Request("10.0.0.5", {"x-user": "\u212aate@example.com"})).role is None  # Kelvin sign
True
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import ipaddress
import re
import secrets
import string
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from analytics.config import TOKEN_ENV, typed_section
from analytics.destinations import safe_url
from analytics.errors import AccessDenied, ConfigError
from analytics.live.client import check_allowed

ROLES = ("viewer", "editor", "admin")
SIGN_IN = ("oidc", "header")
# The least role each action needs.
ACTIONS: dict[str, str] = {
    "read": "viewer", "export": "viewer",
    "load": "editor", "pull": "editor", "save_mapping": "editor", "record_change": "editor",
    "change_map": "admin", "change_slo": "admin", "change_servers": "admin", "change_data_dir": "admin",
}
ACTION_WORDS = {
    "read": "reading", "export": "exporting", "load": "loading data", "pull": "pulling from a server",
    "save_mapping": "saving a column mapping", "record_change": "recording a change of the pool's policy",
    "change_map": "changing the workload map",
    "change_slo": "changing SLOs", "change_servers": "changing [live] servers",
    "change_data_dir": "changing the data folder",
}
ENABLE_EDITING = ("This server's `tidelens.toml` has no `[access]` section, so only its local "
                  "operator (whoever opened the address with the token the server printed when it "
                  "started, as `make run` prints it) may change anything; every other visitor may "
                  "read and export. To let people load data or change the map, the operator adds "
                  "`[access]` with a sign-in (Streamlit's OIDC, or a header from an "
                  "authenticating proxy) and the `editors` and `admins` (docs/deployment.md, "
                  "\"Sign-in and roles\").")
NO_OPERATOR_LINK = ("This server's `tidelens.toml` has no `[access]` section and the server printed "
                    "no operator's token (it was started as `streamlit run app.py`), so every "
                    "visitor may read and export only. To change things on your own machine, start "
                    "it with `make run` (or `streamlit run serve.py`) and open the address it "
                    "prints; to share it, add `[access]` (docs/deployment.md, \"Sign-in and roles\").")
NOT_LISTED = "is signed in, but on no list of this server's `[access]`: ask its operator to add you."
UNVERIFIED = ("is signed in, but the identity provider says this e-mail address is not verified "
              "(`email_verified` is false): verify it with the provider, then sign in again.")
NOT_AS_WRITTEN = ("is signed in under a name that Unicode NFKC normalisation changes (a Kelvin sign for "
                  "K, a full-width letter): such a name could pose as another person's and gets no "
                  "role; sign in under the name as the provider normally writes it.")
# The cookie that carries the operator's proof, one per port (two servers on one machine share
# its cookies: cookies do not tell ports apart).
OPERATOR_COOKIE = "tidelens_operator"
MIN_TOKEN_CHARS = 32
_TOKEN = re.compile(r"[A-Za-z0-9_-]+")
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
LOOPBACK = ("127.0.0.1", "::1")


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

    return typed_section(config_path, "access", AccessSettings)


@dataclass(frozen=True)
class OperatorSecret:
    """The secret a server prints at start: whoever holds it is the local operator.

    The address ``serve.py`` prints carries :attr:`token`; its answer sets a cookie holding
    :attr:`cookie_value` (derived from the token, so the cookie is no token), which each session
    presents. Both are compared in constant time; neither is ever shown (``repr`` hides them).
    """

    token: str = field(repr=False)

    def __post_init__(self) -> None:
        if len(self.token) < MIN_TOKEN_CHARS or not _TOKEN.fullmatch(self.token):
            raise ConfigError(f"{TOKEN_ENV}: the operator's token must be at least {MIN_TOKEN_CHARS} "
                              "characters of A-Z, a-z, 0-9, '-' and '_' (unset it and the server makes "
                              "one: python -c 'import secrets; print(secrets.token_urlsafe(32))')")

    @classmethod
    def new(cls) -> "OperatorSecret":
        """A fresh secret (256 random bits)."""
        return cls(secrets.token_urlsafe(32))

    @property
    def cookie_value(self) -> str:
        return hmac.new(self.token.encode(), b"Tidelens: the local operator's cookie", hashlib.sha256).hexdigest()

    def admits_token(self, given: str) -> bool:
        """Whether ``given`` is the token (constant time)."""
        return hmac.compare_digest(given.encode("utf-8", "replace"), self.token.encode())

    def admits_cookies(self, cookies: Mapping[str, str]) -> bool:
        """Whether ``cookies`` hold the operator's cookie (:data:`OPERATOR_COOKIE`, with or without
        a port), each compared in constant time."""
        want = self.cookie_value.encode()
        found = False
        for name, value in cookies.items():
            if name == OPERATOR_COOKIE or name.startswith(OPERATOR_COOKIE + "_"):
                found |= hmac.compare_digest(str(value).encode("utf-8", "replace"), want)
        return found


_OPERATOR_SECRET: list[OperatorSecret] = []  # this server process's, once serve.py started it


def start_operator_secret(token: str | None = None) -> OperatorSecret:
    """This server process's operator secret: ``token`` (from :data:`TOKEN_ENV`) or a fresh one.
    Called once, by ``serve.py`` as the server starts; later calls return the first secret."""
    if not _OPERATOR_SECRET:
        _OPERATOR_SECRET.append(OperatorSecret(token) if token else OperatorSecret.new())
    return _OPERATOR_SECRET[0]


def operator_secret() -> OperatorSecret | None:
    """The secret :func:`start_operator_secret` made, or ``None`` (the server printed none:
    ``streamlit run app.py``, or no server at all)."""
    return _OPERATOR_SECRET[0] if _OPERATOR_SECRET else None


@dataclass(frozen=True)
class Request:
    """What the web server knows of one visitor."""

    peer: str | None
    """The TCP peer's address; ``None`` for loopback (as Streamlit reports it) or unknown."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """The request's headers (any case)."""
    oidc_email: str | None = None
    """The e-mail of a visitor signed in through Streamlit's OIDC (``st.user``), else ``None``."""
    oidc_email_verified: object = None
    """The provider's ``email_verified`` claim as it came (``True``, ``"false"``...); ``None``
    when the provider sent none."""
    cookies: Mapping[str, str] = field(default_factory=dict, repr=False)
    """The request's cookies (the operator's proof among them)."""
    served: bool = True
    """``False`` only for a script run that no web server asked for (AppTest, a bare script run):
    its runner is the operator, as a command's is."""

    def header(self, name: str) -> str | None:
        low = ascii_lower(name)
        for k, v in self.headers.items():
            if ascii_lower(k) == low:
                return v
        return None


@dataclass(frozen=True)
class Identity:
    """A visitor: who they are (as the audit record names them), their role, and how known."""

    who: str
    role: str | None
    """viewer, editor, admin; ``None``: not signed in (or not on any list), may read nothing."""
    how: str
    """"local" (the operator who holds the server's secret, or who runs a command), "oidc", "header",
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


def ascii_lower(text: str) -> str:
    r"""``text`` with A-Z lowered and nothing else: Python's ``lower`` turns the Kelvin sign
    (U+212A) into k, and would make ``\u212aate`` the admin ``kate``.

    >>> ascii_lower("Kate@Example.COM")
    'kate@example.com'
    >>> ascii_lower("\u212aATE") == "\u212aate", "\u212aATE".lower() == "kate"
    (True, True)
    """
    return text.translate(_ASCII_LOWER)


def as_written(name: str) -> bool:
    """Whether ``name`` is unchanged by Unicode NFKC normalisation: a name that changes (a Kelvin
    sign, a full-width or ligature letter) reads as another name to people and to systems that
    normalise, so it is matched against nobody's."""
    return unicodedata.normalize("NFKC", name) == name


def email_verified(claim: object) -> bool | None:
    """The provider's ``email_verified`` claim: ``True`` for true (or ``"true"``, as some
    providers send it), ``None`` when absent, ``False`` for anything else."""
    if claim is None:
        return None
    if claim is True or (isinstance(claim, str) and ascii_lower(claim.strip()) == "true"):
        return True
    return False


def role_of(settings: AccessSettings, user: str) -> str | None:
    """The role of a signed-in ``user``: the first of admins, editors, viewers that matches,
    A-Z matched case-insensitively and nothing else folded; ``None`` for a name not
    :func:`as_written`."""
    if not as_written(user):
        return None
    name = ascii_lower(user.strip())
    for role, patterns in (("admin", settings.admins), ("editor", settings.editors),
                           ("viewer", settings.viewers)):
        if any(fnmatch.fnmatchcase(name, ascii_lower(p.strip())) for p in patterns):
            return role
    return None


def identify(settings: AccessSettings | None, request: Request,
             secret: OperatorSecret | None = None) -> Identity:
    """Who ``request`` comes from and their role, by the rules of the module docstring;
    ``secret`` is the server's operator secret (:func:`operator_secret`), if it printed one."""
    if settings is None:
        if not request.served or (secret is not None and secret.admits_cookies(request.cookies)):
            return LOCAL_OPERATOR
        return Identity("visitor", "viewer", "none", ENABLE_EDITING if secret is not None else NO_OPERATOR_LINK)
    anonymous = None if settings.anonymous == "none" else settings.anonymous
    user: str | None = None
    if settings.sign_in == "oidc":
        user = request.oidc_email
    elif _peer_in(request.peer, settings.trusted_proxies):
        user = request.header(settings.header)
    user = (user or "").strip() or None
    if user is None:
        return Identity("anonymous", anonymous, "none", "not signed in")
    if settings.sign_in == "oidc" and email_verified(request.oidc_email_verified) is False:
        return Identity(user, None, settings.sign_in, UNVERIFIED)
    if not as_written(user):
        return Identity(user, None, settings.sign_in, NOT_AS_WRITTEN)
    role = role_of(settings, user)
    if role is None:
        return Identity(user, None, settings.sign_in, NOT_LISTED)
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
    hint = identity.note if identity.note in (ENABLE_EDITING, NO_OPERATOR_LINK) else (
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

