"""Who is at this browser tab, as :mod:`analytics.access` decides from what Streamlit knows:
the connection's peer address, the request's headers and cookies (the local operator's among
them, set by ``serve.py``), Streamlit's OIDC sign-in (``st.user``), and whether a web server
runs at all (an AppTest run has none).

Pages pass the :func:`identity` into :mod:`analytics.writes`, which checks the role; hiding a
widget from a viewer here is a courtesy, not the check. :func:`gate` shows the sign-in to a
visitor with no role and stops the page.
"""

from __future__ import annotations

import streamlit as st
from streamlit import config as st_config

from analytics.access import Identity, Request, access_settings, identify, operator_secret
from analytics.errors import ConfigError
from analytics.text import md
from pages._store import config_file


def identity() -> Identity:
    """This session's visitor (read afresh each run: a sign-in or a changed [access] counts at once).

    A ``tidelens.toml`` whose ``[access]`` cannot be read makes everyone anonymous with no role
    (the gate shows why): a typo must not open a shared server to everyone.
    """
    try:
        settings = access_settings(config_file())
    except ConfigError as exc:
        return Identity("anonymous", None, "config", str(exc))
    ctx = st.context
    headers = {}
    for name in ctx.headers.keys():
        values = ctx.headers.get_all(name)
        if len(values) == 1 and isinstance(values[0], str):  # one given twice is believed for neither
            headers[name] = values[0]
    cookies = {k: v for k, v in ctx.cookies.items() if isinstance(k, str) and isinstance(v, str)}
    peer = ctx.ip_address  # a string, or None for loopback and for a run without a browser
    user = st.user
    signed_in = user.get("is_logged_in") is True
    email = user.get("email") if signed_in else None
    # Streamlit names its server mode once a server starts in this process, whichever way it was
    # started; with none (AppTest) no browser can be connected. Not the headers: a session whose
    # tab just closed has none either. A Streamlit without the attribute counts as served.
    served = getattr(st_config, "_server_mode", "unknown") is not None
    return identify(settings, Request(peer if isinstance(peer, str) else None, headers,
                                      email if isinstance(email, str) else None,
                                      user.get("email_verified") if signed_in else None,
                                      cookies, served), operator_secret())


def gate() -> Identity:
    """The visitor; one with no role sees how to sign in, and the page stops there."""
    who = identity()
    if who.role is not None:
        if not who.is_local:
            st.sidebar.caption(f"Signed in as {md(who.who)} ({who.role})" if who.how != "none"
                               else f"Visiting as a {who.role}")
            if who.how == "oidc":
                st.sidebar.button("Sign out", key="access_sign_out", on_click=st.logout)
        return who
    st.title("Sign in")
    if who.how == "config":  # [access] cannot be read: nobody is let in until it is fixed
        st.error(md(who.note), icon=":material/lock:")
    elif who.how == "oidc" or _oidc():
        st.info("This Tidelens server is shared: sign in to read it.", icon=":material/lock:")
        if who.who != "anonymous":
            st.warning(f"{md(who.who)} {who.note}", icon=":material/person_off:")
        st.button("Sign in", key="access_sign_in", type="primary", on_click=st.login)
    else:
        st.info("This Tidelens server is shared: open it through its sign-in address (the "
                "authenticating proxy) to read it.", icon=":material/lock:")
        if who.who != "anonymous":
            st.warning(f"{md(who.who)} {who.note}", icon=":material/person_off:")
    st.stop()
    raise AssertionError("unreachable")  # st.stop raises


def _oidc() -> bool:
    try:
        settings = access_settings(config_file())
    except ConfigError:
        return False
    return settings is not None and settings.sign_in == "oidc"
