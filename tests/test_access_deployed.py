"""Sign-in and roles as deployed: Debian's nginx with basic auth (a stand-in for oauth2-proxy)
names the user in ``X-Forwarded-User`` in front of a real Streamlit server, driven by Chromium.

One server for the module. nginx runs as this user (no master process, its files in the test's
folder) and connects to Streamlit from 127.0.0.2, the one proxy address ``[access]`` trusts, so
a request straight to Streamlit from 127.0.0.1 with the same header is a stranger's.

Shown: a viewer gets no upload, pull or map editor, and a forged user header (through the proxy,
or straight to Streamlit) makes nobody an admin (the library refuses a viewer's write whatever
the page drew: tests/test_access.py); an editor loads a file, and the pulls to the
metadata address (listed!) and to an unlisted host are refused; an admin changes the map (the
previous ``tidelens.toml`` kept); the record on the Data page and ``tidelens audit`` shows each.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from base64 import b64encode
from collections.abc import Iterator
from pathlib import Path

import pytest

from test_browser import (CHROMIUM, CHROMIUM_ARGS, _need_browser, free_port, start_app, stop_app, wait_healthy,
                          wait_settled)

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]
ROOT = Path(__file__).resolve().parent.parent
NGINX = "/usr/sbin/nginx"
HTPASSWD = "/usr/bin/htpasswd"
PASSWORD = "correct-horse"
PROXY_FROM = "127.0.0.2"
PULL_TAB = "Prometheus / Thanos / Mimir / VictoriaMetrics"
CONFIG = f"""[access]
sign_in = "header"
header = "X-Forwarded-User"
trusted_proxies = ["{PROXY_FROM}"]
admins = ["root"]
editors = ["ed"]

[live]
servers = ["http://169.254.169.254", "http://prom.internal:9090"]
"""
# What every test's nginx runs with: as this user, no master process, its files in the test's
# folder, Streamlit's websocket upgrade mapped; the server block is the test's.
NGINX_HEAD = """daemon off;
master_process off;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {tmp}/nginx-body;
  proxy_temp_path {tmp}/nginx-proxy;
  fastcgi_temp_path {tmp}/nginx-fcgi;
  uwsgi_temp_path {tmp}/nginx-uwsgi;
  scgi_temp_path {tmp}/nginx-scgi;
  map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}
"""
NGINX_CONF = NGINX_HEAD + """  client_max_body_size 64m;
  server {{
    listen 127.0.0.1:{port};
    auth_basic "Tidelens";
    auth_basic_user_file {tmp}/htpasswd;
    location / {{
      proxy_pass http://127.0.0.1:{app_port};
      proxy_bind {proxy_from};
      proxy_http_version 1.1;
      proxy_set_header Host $http_host;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      # The signed-in user, replacing whatever the browser sent under that name.
      proxy_set_header X-Forwarded-User $remote_user;
      proxy_read_timeout 300s;
      proxy_buffering off;
    }}
  }}
}}
"""


def _need_tools() -> None:
    _need_browser()
    missing = [t for t in (NGINX, HTPASSWD) if not Path(t).exists()]
    if missing:
        message = f"{', '.join(missing)} missing: install Debian's nginx and apache2-utils"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)


def start_nginx(tmp: Path) -> subprocess.Popen:
    """nginx on ``tmp/nginx.conf``, its files in ``tmp``."""
    return subprocess.Popen([NGINX, "-p", str(tmp), "-c", str(tmp / "nginx.conf"), "-e", str(tmp / "nginx-error.log")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def stop_nginx(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def _wait_proxy(url: str, proc: subprocess.Popen, timeout_s: float = 30.0) -> None:
    """Poll the proxy's health path with a user's password (blocking reads, no sleeps)."""
    import time

    auth = "Basic " + b64encode(f"vic:{PASSWORD}".encode()).decode()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"nginx exited with {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
        try:
            req = urllib.request.Request(url + "/_stcore/health", headers={"Authorization": auth})
            with urllib.request.urlopen(req, timeout=2) as r:
                if r.status == 200:
                    return
        except (OSError, urllib.error.HTTPError):
            try:
                proc.wait(timeout=0.25)
            except subprocess.TimeoutExpired:
                pass
    raise RuntimeError(f"nginx at {url} did not answer in {timeout_s:g} s")


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    _need_tools()
    tmp = tmp_path_factory.mktemp("deployed")
    (tmp / "tidelens.toml").write_text(CONFIG)
    for i, user in enumerate(("vic", "ed", "root")):
        subprocess.run([HTPASSWD, "-b", *(["-c"] if i == 0 else []), str(tmp / "htpasswd"), user, PASSWORD],
                       check=True, capture_output=True)
    app_port, port = free_port(), free_port()
    (tmp / "nginx.conf").write_text(NGINX_CONF.format(tmp=tmp, port=port, app_port=app_port, proxy_from=PROXY_FROM))
    uploads = tmp / "uploads.duckdb"
    app = start_app({"TIDELENS_UPLOADS_DB": str(uploads), "TIDELENS_CONFIG": str(tmp / "tidelens.toml"),
                     "TIDELENS_DATA_DIR": str(tmp), "TIDELENS_PREFETCH": "0"}, app_port, log=tmp / "server.log")
    proxy = start_nginx(tmp)
    try:
        wait_healthy(f"http://127.0.0.1:{app_port}", app)
        _wait_proxy(f"http://127.0.0.1:{port}", proxy)
        yield {"proxy": f"http://127.0.0.1:{port}", "direct": f"http://127.0.0.1:{app_port}", "tmp": tmp,
               "uploads": uploads}
    finally:
        stop_nginx(proxy)
        stop_app(app)


def _open(page, url: str) -> None:
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector('[data-testid="stMainBlockContainer"] h1', timeout=60_000)
    wait_settled(page)


def _text(page) -> str:
    return page.evaluate("() => document.body.innerText")


# The grid's own first cell, found by where it is drawn (the grid is a canvas): a click taken while
# the opening panel still moved it landed elsewhere once in CI (stop 61: no save in 60 s).
_STILL_JS = """el => new Promise(done => {
    let last = '', still = 0;
    const look = () => {
        const r = el.getBoundingClientRect(), now = [r.x, r.y, r.width, r.height].join();
        still = now === last ? still + 1 : 0; last = now;
        if (still >= 10) done(true); else requestAnimationFrame(look);
    };
    requestAnimationFrame(look);
})"""
_SAVED_JS = "() => /root\\s+admin\\s+map\\s+saved/.test(document.body.innerText)"


def _edit_first_team(page, team: str) -> None:
    """Type ``team`` into the map editor's first row and wait for the record of its save.

    The gesture (click the first cell, three cells right, Enter, type, Enter) is tried twice: the
    second try is for a click the browser placed before the grid was drawn, not for a save that
    failed (a refused or lost save shows no record either time and fails with the page's text)."""
    from playwright.sync_api import TimeoutError as NoSave

    for attempt in (1, 2):
        grid = page.locator('[data-testid="stDataFrame"]').last
        grid.scroll_into_view_if_needed()
        grid.evaluate(_STILL_JS)
        box = grid.bounding_box()
        page.mouse.click(box["x"] + 40, box["y"] + 35 + 17)  # the first row's first cell
        for _ in range(3):
            page.keyboard.press("ArrowRight")  # to its team
        page.keyboard.press("Enter")  # opens the cell's editor on its value
        editor = page.locator("#portal textarea, #portal input").first
        editor.wait_for(timeout=30_000)
        editor.fill(team)
        editor.press("Enter")
        try:  # saved and rerun: the record below the editor has the change (the toast may be gone)
            page.wait_for_function(_SAVED_JS, timeout=45_000 if attempt == 1 else 60_000)
            return
        except NoSave:
            if attempt == 2:
                raise AssertionError("no save recorded after two edits; the page ends:\n"
                                     + _text(page)[-1500:]) from None
            page.keyboard.press("Escape")
            wait_settled(page)


def test_each_role_through_the_proxy(deployed: dict) -> None:
    from playwright.sync_api import expect, sync_playwright

    from test_app_pages import scrape_text

    proxy, direct, tmp = deployed["proxy"], deployed["direct"], deployed["tmp"]
    data = "/data?source=uploads"
    (tmp / "node-hour.prom").write_bytes(scrape_text())
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            def visit(user: str | None, base: str = proxy, **extra):
                ctx = browser.new_context(viewport={"width": 1400, "height": 1600},
                                          http_credentials={"username": user, "password": PASSWORD} if user else None,
                                          **extra)
                page = ctx.new_page()
                _open(page, base + data)
                return page

            # The editor loads a file: the Files tab, Chromium's own file chooser.
            ed = visit("ed")
            assert "Signed in as ed (editor)" in _text(ed)
            ed.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(tmp / "node-hour.prom"))
            ed.wait_for_function("() => document.body.innerText.includes('node-hour.prom')", timeout=60_000)
            wait_settled(ed)
            # Pulls: the metadata address although listed, then a host nobody listed, each from a
            # fresh tab (its empty URL keeps Pull disabled until the run that took the URL is done).
            for url, said in (("http://169.254.169.254", "link-local or cloud metadata"),
                              ("http://unlisted.example:9090", "not in [live] servers")):
                tab = ed.context.new_page()
                _open(tab, proxy + data)
                tab.get_by_role("tab", name=PULL_TAB).click()
                wait_settled(tab)
                field = tab.get_by_role("textbox", name="Server URL")
                field.fill(url)
                field.press("Enter")
                button = tab.get_by_role("button", name="Pull", exact=True)
                expect(button).to_be_enabled(timeout=30_000)
                button.click()
                tab.wait_for_function(f"() => document.body.innerText.includes({json.dumps(said)})", timeout=60_000)
                wait_settled(tab)
                tab.close()

            # The viewer reads the store the editor filled, with no way to change it; the user
            # header the browser forges is replaced by the proxy's.
            vic = visit("vic", extra_http_headers={"X-Forwarded-User": "root"})
            text = _text(vic)
            assert "Signed in as vic (viewer)" in text and "node-hour.prom" in text
            assert "with the viewer role" in text
            assert vic.locator('[data-testid="stFileUploader"]').count() == 0
            assert vic.get_by_role("tab", name=PULL_TAB).count() == 0
            assert vic.get_by_role("button", name="Pull", exact=True).count() == 0
            assert "Change a class or team" not in text
            # The same header straight to Streamlit, not from the proxy, is not believed.
            stranger = visit(None, base=direct, extra_http_headers={"X-Forwarded-User": "root"})
            assert stranger.locator("h1").first.inner_text() == "Sign in"
            assert "Change a class or team" not in _text(stranger)

            # The admin changes a workload's team in the map's editor.
            root = visit("root")
            root.get_by_text("Change a class or team").click()
            wait_settled(root)
            _edit_first_team(root, "research")
            wait_settled(root)

            # The record, on the Data page.
            root.get_by_text("Record of changes").scroll_into_view_if_needed()
            record = _text(root)
        finally:
            browser.close()
    config = (tmp / "tidelens.toml").read_text()
    assert "research" in config and "[access]" in config  # the map saved, the rest kept
    assert "research" not in (tmp / "tidelens.toml.prev").read_text()
    out = subprocess.run([sys.executable, "-m", "analytics", "audit", "--db", str(deployed["uploads"]), "--json"],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout
    rows = [(r["who"], r["role"], r["action"], r["outcome"]) for r in json.loads(out)][::-1]
    assert rows == [("ed", "editor", "load", "loaded"), ("ed", "editor", "pull", "refused"),
                    ("ed", "editor", "pull", "refused"), ("root", "admin", "map", "saved")], rows
    assert all(name in record for name in ("root", "ed", "node-hour.prom", "refused"))
    assert "vic" not in out  # nothing of the viewer's reached the record
