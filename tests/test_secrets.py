"""Secrets never leave: Grafana export and live pulls against a real local server that misbehaves.

The server (``http.server`` on 127.0.0.1, an ephemeral port) echoes the Authorization header it
got back raw, base64-encoded, reversed, upper-cased, URL-encoded and as hex, in its body and its
headers; answers text that is not JSON, a list where an object belongs, an annotation id
``1; DROP``; drips its answer a byte at a time; redirects to another port with the token in the
URL. Through the CLI run as a subprocess and through the library calls, the token shows in no
form, every run ends with one clean line (no traceback) within its deadline, and no request
reaches the other port. Token files are read as one line.
"""

from __future__ import annotations

import base64
import os
import select
import socket
import subprocess
import sys
import threading
import time
import unicodedata
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, quote_plus

import orjson
import pytest

from analytics.errors import ConfigError, TidelensError
from analytics.grafana import post_annotations
from analytics.live.client import AuthConfig, ClientConfig, PromClient
from analytics.outbound import HttpConfig
from analytics.secrets import Redactor, secret_from_file

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "glsa_Tok3n/Secret+Value-42"
USER = "tidelens"
ANN = [{"time": 0, "timeEnd": 60_000, "tags": ["tidelens", "tidelens-event:ev-1"], "text": "x"}]
# The longest a message may be: a server's text is cut to a few hundred characters.
MAX_MESSAGE = 1500


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def leaks(text: str, secret: str = TOKEN) -> list[str]:
    """The forms of ``secret`` found in ``text``: base64 forms by the characters the secret
    alone decides (a prefix such as ``Bearer `` or ``user:`` shifts the rest)."""
    low = text.lower()
    forms = {"raw": secret, "reversed": secret[::-1], "url": quote(secret, safe=""),
             "url+": quote_plus(secret), "hex": secret.encode().hex(),
             "b64": _b64(secret)[:-4], "b64 bearer": _b64("Bearer " + secret)[12:-4],
             "b64 basic": _b64(f"{USER}:{secret}")[16:-4], "b64 reversed": _b64(secret)[:-4][::-1]}
    found = [k for k, f in forms.items() if f in text]
    found += [f"{k} (any case)" for k, f in forms.items() if not k.startswith("b64") and f.lower() in low]
    # spaced out: the letters and digits of a form, in order, whatever stands between them
    bare = _bare(text)
    found += [f"{k} (spaced out)" for k in ("raw", "reversed", "hex") if _bare(forms[k]) in bare]
    return found


def _bare(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKC", text).lower() if c.isascii() and c.isalnum())


def _spaced(tok: str) -> str:
    """The token spaced out as a server may echo it: spaces, dots, one character a line, full-width
    letters, reversed with dashes, its hex with spaces (issue 50, 7)."""
    wide = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in tok)
    return (f"sp={' '.join(tok)} dots={'.'.join(tok)} lines={chr(10).join(tok)} wide={wide} "
            f"rev={'-'.join(tok[::-1])} hexsp={' '.join(tok.encode().hex())}")


class Hostile:
    """A local server misbehaving as ``mode`` says, recording what it was sent.

    A dripping answer waits on an Event between bytes (the test's teardown sets it), and stops
    by itself after ``DRIP_BYTES`` bytes either way.
    """

    DRIP_BYTES = 60
    DRIP_EVERY_S = 0.25

    def __init__(self, mode: str, redirect_to: str = "") -> None:
        self.mode = mode
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        self.stop = threading.Event()
        self.cut_off = False
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _hung_up(self) -> bool:
                try:
                    ready, _, _ = select.select([self.connection], [], [], 0)
                    return bool(ready) and self.connection.recv(1, socket.MSG_PEEK) == b""
                except OSError:
                    return True

            def _drip(self, data: bytes) -> None:
                try:
                    for i in range(min(len(data), outer.DRIP_BYTES)):
                        self.wfile.write(data[i:i + 1])
                        self.wfile.flush()
                        stopped = outer.stop.wait(outer.DRIP_EVERY_S)
                        if self._hung_up():
                            outer.cut_off = True
                            return
                        if stopped:
                            return
                except OSError:  # the client hung up
                    outer.cut_off = True

            def _handle(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                outer.seen.append((self.command, self.path, dict(self.headers)))
                auth = self.headers.get("Authorization", "")
                tok = auth.split(" ", 1)[-1]
                echo = (f"\x1b[31mdenied\x1b[0m {_spaced(tok)} auth={auth} b64={_b64(auth)} b64tok={_b64(tok)} "
                        f"rev={auth[::-1]} up={auth.upper()} low={auth.lower()} url={quote(auth, safe='')} "
                        f"hex={auth.encode().hex()} spaced={tok[:5]}\x00{tok[5:]} " + "A" * 5000)
                mode = outer.mode
                grafana_get = self.command == "GET" and self.path.startswith("/api/annotations")
                if mode == "echo":
                    self._answer(400, echo.encode(), {"X-Echo": auth, "WWW-Authenticate": f"Bearer {_b64(tok)}"})
                elif mode == "echo_json":
                    self._answer(400, orjson.dumps({"status": "error", "errorType": f"bad {tok}",
                                                    "error": echo, "warnings": [auth]}))
                elif mode == "not_json":
                    self._answer(200, b"<html><body>Welcome to nginx!</body></html>")
                elif mode == "object_for_list":  # Grafana: an object where the search answers a list
                    self._answer(200, b'{"id": 1}' if grafana_get else b"{}")
                elif mode == "list_for_object":  # Grafana: a list where POST answers an object
                    self._answer(200, b"[]" if grafana_get else b'[{"id": 1}]')
                elif mode == "data_is_list":  # Prometheus: data a list where an object belongs
                    self._answer(200, b'{"status": "success", "data": [1, 2]}')
                elif mode == "bad_id":
                    if grafana_get:
                        self._answer(200, b'[{"id": "1; DROP"}]')
                    else:  # Prometheus: a count that is not a number
                        self._answer(200, orjson.dumps({"status": "success", "data": {
                            "resultType": "vector", "result": [{"metric": {}, "value": [1, "1; DROP"]}]}}))
                elif mode == "redirect":
                    self.send_response(302)
                    self.send_header("Location", f"{redirect_to}/{tok}/api/annotations?auth={quote(auth)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif mode == "drip_head":
                    self._drip(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n[]")
                elif mode == "drip_body":
                    body = b'{"status": "success", "data": {"resultType": "vector", "result": []}}' + b" " * 200
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self._drip(body)
                elif mode == "status_echo":  # a status line made of the header it was sent
                    self.wfile.write(f"{auth}\r\n\r\n".encode())
                elif mode == "grafana":  # a well-behaved annotations API
                    self._answer(200, b"[]" if grafana_get else b'{"id": 7}')
                else:
                    raise AssertionError(mode)

            do_GET = do_POST = do_PUT = _handle  # noqa: N815

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # server_close then joins the handlers, so what a dripping handler saw (the client
        # hanging up) is recorded before the test reads it
        self.httpd.daemon_threads = False
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self) -> "Hostile":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from analytics.sample import load_into, simulate
    from analytics.store import Store

    path = tmp_path_factory.mktemp("secrets") / "small.duckdb"
    with Store(path) as st:  # the smallest sample with tail events: something to post
        load_into(st, simulate("morning", days=1, gpus=16, seed=7))
    return path


def _token_file(tmp_path: Path, text: str = TOKEN + "\n") -> Path:
    path = tmp_path / "token"
    path.write_text(text)
    return path


def tidelens(tmp_path: Path, *args: str) -> tuple[int, str, float]:
    """Run the CLI as a subprocess from an empty folder; ``(exit code, stdout + stderr, seconds)``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDELENS_")}
    env["PYTHONPATH"] = str(ROOT)
    env["TIDELENS_CONFIG"] = str(tmp_path / "none.toml")
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "analytics", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - t0


def assert_clean(out: str, code: int) -> None:
    assert code == 2, out
    assert "Traceback" not in out and "\x1b" not in out and "\x00" not in out, out
    assert not leaks(out), (leaks(out), out)
    assert len(out) < MAX_MESSAGE, len(out)


# Grafana's answers are described, never quoted (issue 50, 7: one echoing the token spaced out showed it)
GRAFANA_CASES = {
    "echo": "Grafana answered HTTP 400 (text of ",
    "not_json": "but not JSON (an HTML page of 43 bytes; not shown: an answer to a request carrying the token "
                "is never quoted): is --url Grafana's base URL?",
    "object_for_list": "answered an object where a list of annotations was expected",
    "list_for_object": "POST /api/annotations answered list where an object was expected",
    "bad_id": "GET /api/annotations: [0].id is a JSON string (not shown: an answer to a request carrying the "
              "token is never quoted), not an annotation id",
    "redirect": "HTTP 302 redirects to http://127.0.0.1:",
    "drip_head": "timed out after 1 s (1 attempt(s))",
}


@pytest.mark.parametrize("mode", sorted(GRAFANA_CASES))
def test_grafana_errors_never_show_the_token(mode: str, tmp_path: Path) -> None:
    with Hostile("grafana") as other, Hostile(mode, redirect_to=other.url) as srv:
        with pytest.raises(TidelensError) as err:
            post_annotations(srv.url, TOKEN, ANN, config=HttpConfig(timeout_s=1, retries=0))
        assert other.seen == []  # the token never reached another server
    message = str(err.value)
    assert GRAFANA_CASES[mode] in message and not leaks(message), message
    assert len(message) < MAX_MESSAGE and "\x1b" not in message


@pytest.mark.parametrize("mode", ["echo", "redirect", "drip_head"])
def test_grafana_export_cli_ends_cleanly_within_its_deadline(mode: str, db: Path, tmp_path: Path) -> None:
    # (each run analyses a store first: the other answers are run through the library above)
    token_file = _token_file(tmp_path, TOKEN + "\r\n")
    with Hostile("grafana") as other, Hostile(mode, redirect_to=other.url) as srv:
        code, out, _ = tidelens(tmp_path, "export", "grafana", "--db", str(db), "--out", "g", "--url", srv.url,
                                "--token-file", str(token_file), "--timeout", "1", "--retries", "0")
        assert other.seen == [] and srv.seen
        assert srv.seen[0][2]["Authorization"] == f"Bearer {TOKEN}"  # the file's line, stripped
    assert_clean(out, code)
    assert GRAFANA_CASES[mode] in out, out
    assert srv.cut_off == mode.startswith("drip")  # the client hung up before the drip ran out


def test_a_dripping_server_is_cut_off_at_the_deadline(tmp_path: Path) -> None:
    """Each byte arrives well within a socket timeout; only the total deadline ends it."""
    # A head cut off is retried (the server never answered); a body cut off is not (it did).
    for mode, attempts in (("drip_head", 2), ("drip_body", 1)):
        with Hostile(mode) as srv:
            client = PromClient(srv.url, config=ClientConfig(timeout_s=1, retries=1), sleep=lambda s: None)
            t0 = time.monotonic()
            with pytest.raises(TidelensError, match=rf"timed out after 1 s \({attempts} attempt\(s\)\)"):
                client.query("up", 0)
            took = time.monotonic() - t0
        # attempts of 1 s each; the server would drip for 15 s each
        assert took < attempts + Hostile.DRIP_BYTES * Hostile.DRIP_EVERY_S / 4, (mode, took)
        assert len(srv.seen) == attempts and srv.cut_off


LIVE_CASES = {  # (an answer that is not JSON: "echo"); each spaced-out form redacted
    "echo": "HTTP 400, not a Prometheus API answer ('denied sp=[redacted]",
    "echo_json": "range query failed: bad [redacted]: denied sp=[redacted]",
    "data_is_list": "the answer at data.result is not a query result",
    "bad_id": "the series count came back as data.result[0].value = [1, '1; DROP'], not a number",
    "redirect": "another server; not followed",
    "drip_head": "timed out after 1 s (1 attempt(s))",
    "drip_body": "timed out after 1 s (1 attempt(s))",
}


@pytest.mark.parametrize("mode", sorted(LIVE_CASES))
def test_live_pull_errors_never_show_the_token(mode: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("T_PW", TOKEN)
    auth = AuthConfig(basic_user=USER, basic_password_env="T_PW")
    with Hostile("grafana") as other, Hostile(mode, redirect_to=other.url) as srv:
        client = PromClient(srv.url, auth, ClientConfig(timeout_s=1, retries=0))
        with pytest.raises(TidelensError) as err:
            if mode == "echo_json":
                client.query_range("up", 60_000, 120_000, 60_000)
            else:
                from analytics.live.pull import pull
                from analytics.promql import PullQuery
                from analytics.store import Store

                with Store(tmp_path / "p.duckdb") as st:
                    pull(st, client, 60_000, 120_000, step_ms=60_000,
                         queries=[PullQuery("k", "tidelens:test", "up", "gpu_holders")])
        assert other.seen == []
    message = str(err.value)
    assert LIVE_CASES[mode] in message and not leaks(message), message
    assert len(message) < MAX_MESSAGE and "\x1b" not in message


@pytest.mark.parametrize("mode", sorted(LIVE_CASES))
def test_live_pull_cli_ends_cleanly_within_its_deadline(mode: str, tmp_path: Path) -> None:
    with Hostile("grafana") as other, Hostile(mode, redirect_to=other.url) as srv:
        code, out, _ = tidelens(tmp_path, "pull", "--url", srv.url, "--db", "p.duckdb", "--from", "now-1h",
                                   "--token-file", str(_token_file(tmp_path, f"\n  {TOKEN}  \n\n")),
                                   "--timeout", "1", "--retries", "0")
        assert other.seen == [] and srv.seen[0][2]["Authorization"] == f"Bearer {TOKEN}"
    assert_clean(out, code)
    assert LIVE_CASES[mode].replace("range query", "query") in out, out
    assert srv.cut_off == mode.startswith("drip")


def test_a_token_file_is_one_line(tmp_path: Path, db: Path) -> None:
    # (a file ending in a line break, or padded with blank lines, is read by the CLI runs above)
    two = _token_file(tmp_path, "first-line-secret\nsecond-line-secret\n")
    for args in (["export", "grafana", "--db", str(db), "--out", "g", "--url", "http://127.0.0.1:9"],
                 ["pull", "--url", "http://127.0.0.1:9", "--db", "p.duckdb"]):
        code, out, _ = tidelens(tmp_path, *args, "--token-file", str(two))
        assert code == 2 and str(two) in out and "more than one line" in out, out
        assert "line-secret" not in out and "Traceback" not in out, out
    with pytest.raises(ConfigError, match="is empty"):
        secret_from_file(_token_file(tmp_path, " \n\n"), "token")
    with pytest.raises(ConfigError, match="control or non-ASCII") as err:
        secret_from_file(_token_file(tmp_path, "abc\x1bdef"), "token")
    assert "abc" not in str(err.value)


def test_a_bad_dashboard_uid_is_refused_before_any_request(tmp_path: Path, db: Path) -> None:
    with Hostile("grafana") as srv:
        code, out, _ = tidelens(tmp_path, "export", "grafana", "--db", str(db), "--out", "g", "--url", srv.url,
                                "--token-file", str(_token_file(tmp_path)), "--dashboard-uid", "1; DROP")
        assert srv.seen == []
    assert code == 2 and "--dashboard-uid '1; DROP': a Grafana uid is 1-40 letters" in out, out


def test_the_redactor_finds_every_encoding() -> None:
    r = Redactor([TOKEN + "\n"])
    auth = f"Bearer {TOKEN}"
    for prefix in ("", "x", "xy", "Authorization: "):  # every base64 alignment
        text = " ".join([prefix + TOKEN, _b64(prefix + auth), _b64(prefix + f"{USER}:{TOKEN}"), auth[::-1],
                         auth.upper(), auth.lower(), quote(auth, safe=""), quote_plus(auth),
                         auth.encode().hex(), auth.encode().hex().upper(), _b64(TOKEN)[::-1],
                         base64.urlsafe_b64encode(auth.encode()).decode()])
        assert not leaks(r(text)), r(text)
    # spaced out (issue 50, 7): letters and digits in order, anything else between; ordinary text
    # stays, and a secret too short to be told from words is matched only as written
    assert not leaks(r(_spaced(TOKEN) + " " + _spaced(f"Bearer {TOKEN}"))), r(_spaced(TOKEN))
    words = "a bad cat, Value 42 and a glsa Tok"
    assert r(words) == words and Redactor(["abc"])("a bad cat") == "a bad cat"
    # a server's text: control characters out (a secret split by one is found again), bounded,
    # and a secret cut by the window it is read from does not show in part
    said = r.snippet("\x1b[2J" + TOKEN[:4] + "\x00" + TOKEN[4:] + "B" * 10_000 + TOKEN)
    assert said.startswith("[redacted]BBB") and said.endswith("...") and len(said) <= 303
    cut = r.snippet("C" * (16 * 300 + r.longest - 5) + TOKEN, limit=10_000)
    assert TOKEN[:5] not in cut


def test_the_http_librarys_own_logs_are_redacted(caplog: pytest.LogCaptureFixture) -> None:
    """urllib3 logs each retry with the error it met, here a status line made of the token."""
    import logging

    caplog.set_level(logging.DEBUG, logger="urllib3")
    with Hostile("status_echo") as srv:
        with pytest.raises(TidelensError) as err:
            post_annotations(srv.url, TOKEN, ANN, config=HttpConfig(timeout_s=1, retries=1, backoff_s=0))
    assert len(srv.seen) == 2  # the request and its retry
    assert "Retrying" in caplog.text
    assert not leaks(caplog.text) and not leaks(str(err.value)), caplog.text
    assert "[redacted]" in caplog.text
