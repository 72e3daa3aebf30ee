"""The local operator proves it, not its address (issue 50): a server with no ``[access]``, behind
Debian's nginx with a plain ``proxy_pass`` (no X-Forwarded-* header: every visitor reaches
Streamlit from 127.0.0.1), driven by Chromium.

Shown: through the proxy and straight to Streamlit from the server's own machine, a browser
without the token is a viewer (no upload form, the Data page says how to enable editing); the
address the server printed at start (read from its own output) makes the browser the operator,
through the proxy too, by a cookie (HttpOnly, SameSite=Strict) that the page's session presents,
after a redirect that drops the token from the address; the token is in the server's output once, on
its start line, and in no link the page draws. The token's middleware itself is tests/test_serve.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from test_access_deployed import NGINX_HEAD, _need_tools, _open, _text, _wait_proxy, start_nginx, stop_nginx
from test_browser import CHROMIUM, CHROMIUM_ARGS, free_port, start_app, stop_app, wait_healthy

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]
# A team's first proxy: the websocket's headers (Streamlit needs them) and nothing that says
# who the visitor is or that the request was forwarded.
NGINX_CONF = NGINX_HEAD + """  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://127.0.0.1:{app_port};
      proxy_http_version 1.1;
      proxy_set_header Host $http_host;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      proxy_read_timeout 300s;
    }}
  }}
}}
"""
DATA = "/data?source=uploads"
UPLOADER = '[data-testid="stFileUploader"]'
TOKEN_LINE = re.compile(r"Tidelens: open http://\S+/\?token=([A-Za-z0-9_-]+)")


@pytest.fixture(scope="module")
def behind_nginx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    _need_tools()
    tmp = tmp_path_factory.mktemp("operator")
    (tmp / "tidelens.toml").write_text("# no [access]: a personal install\n")
    app_port, port = free_port(), free_port()
    (tmp / "nginx.conf").write_text(NGINX_CONF.format(tmp=tmp, port=port, app_port=app_port))
    log = tmp / "server.log"
    # TIDELENS_TOKEN empty: the server makes its own token, as `make run` does.
    app = start_app({"TIDELENS_UPLOADS_DB": str(tmp / "uploads.duckdb"), "TIDELENS_CONFIG": str(tmp / "tidelens.toml"),
                     "TIDELENS_DATA_DIR": str(tmp), "TIDELENS_PREFETCH": "0", "TIDELENS_TOKEN": ""}, app_port, log=log)
    proxy = start_nginx(tmp)
    try:
        wait_healthy(f"http://127.0.0.1:{app_port}", app)
        _wait_proxy(f"http://127.0.0.1:{port}", proxy)
        [token] = TOKEN_LINE.findall(log.read_text())  # printed once, as the server started
        yield {"proxy": f"http://127.0.0.1:{port}", "direct": f"http://127.0.0.1:{app_port}", "token": token,
               "log": log}
    finally:
        stop_nginx(proxy)
        stop_app(app)


def test_only_the_token_makes_the_operator_behind_a_plain_proxy(behind_nginx: dict) -> None:
    from playwright.sync_api import sync_playwright

    proxy, direct, token = behind_nginx["proxy"], behind_nginx["direct"], behind_nginx["token"]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            def visit(url: str):
                page = browser.new_context(viewport={"width": 1400, "height": 1400}).new_page()
                _open(page, url)
                return page

            # Without the token: a viewer, through the proxy (which the old rule made the local
            # operator: the peer is 127.0.0.1 and no header says "forwarded"), or straight from
            # this machine (a wrong token is tests/test_serve.py's).
            for url in (proxy + DATA, direct + DATA):
                page = visit(url)
                assert "has no [access] section, so only its local operator" in _text(page), url
                assert page.locator(UPLOADER).count() == 0, url
                assert not [c for c in page.context.cookies() if c["name"].startswith("tidelens_operator")]
                page.context.close()

            # With it, through the proxy: the operator, by a cookie; the address no longer holds it.
            page = visit(proxy + DATA + "&token=" + token)
            assert page.locator(UPLOADER).count() == 1
            assert "only its local operator" not in _text(page)
            assert token not in page.url and "source=uploads" in page.url
            links = page.evaluate("() => Array.from(document.querySelectorAll('a[href]')).map(a => a.href)")
            assert links and not [h for h in links if token in h]
            [cookie] = [c for c in page.context.cookies() if c["name"].startswith("tidelens_operator")]
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and token not in cookie["value"]
            assert page.evaluate("() => document.cookie").find("tidelens_operator") < 0  # no script reads it
        finally:
            browser.close()
    assert behind_nginx["log"].read_text().count(token) == 1  # the start line, nothing after
