"""The live client without a Prometheus: auth, secrets, allow-list, retries, timeouts, splitting."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import orjson
import pytest

from analytics.errors import ConfigError
from analytics.live.client import AuthConfig, ClientConfig, PromClient, PullError, allowed_servers, split_range
from analytics.live.pull import missing_ranges, pull
from analytics.promql import PullQuery, Scope, describe, fleet_queries, timeline_queries

OK = orjson.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
    {"metric": {"pod": "p"}, "values": [[60, "1"], [120, "2"]]}]}})
COUNT = orjson.dumps({"status": "success", "data": {"resultType": "vector", "result": [
    {"metric": {}, "value": [120, "1"]}]}})


class FakeServer:
    """A local HTTP server answering from a script of (status, body) and recording requests."""

    def __init__(self, script: list[tuple[int, bytes]]) -> None:
        self.script = list(script)
        self.seen: list[tuple[str, dict[str, str]]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                outer.seen.append((self.path, dict(self.headers)))
                status, body = outer.script.pop(0) if len(outer.script) > 1 else outer.script[0]
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self) -> "FakeServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_transient_failures_are_retried_with_backoff():
    waits: list[float] = []
    with FakeServer([(503, b'{"status":"error","errorType":"unavailable","error":"busy"}'),
                     (429, b"{}"), (200, OK)]) as srv:
        client = PromClient(srv.url, config=ClientConfig(retries=3, backoff_s=0.5),
                            sleep=waits.append)
        resp = client.query_range("up", 60_000, 120_000, 60_000)
    assert resp.data["result"][0]["values"][1] == [120, "2"]
    assert len(waits) == 2 and waits[1] > waits[0] >= 0.5


def test_retries_give_up_with_the_servers_message():
    with FakeServer([(503, b'{"status":"error","errorType":"timeout","error":"query timed out"}')]) as srv:
        client = PromClient(srv.url, config=ClientConfig(retries=1), sleep=lambda s: None)
        with pytest.raises(PullError, match="timeout: query timed out"):
            client.query("up", 0)
    assert len(srv.seen) == 2


def test_a_server_that_never_answers_times_out():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)  # accepts connections, never answers
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        client = PromClient(url, config=ClientConfig(timeout_s=0.2, retries=1), sleep=lambda s: None)
        with pytest.raises(PullError, match="timed out after 0.2 s.*raise --timeout"):
            client.query("up", 0)


def test_secrets_come_from_env_and_file_and_never_reach_names(monkeypatch, tmp_path, store):
    monkeypatch.setenv("PROM_TOKEN", "s3cret-token")
    monkeypatch.setenv("TENANT_KEY", "tenant-secret")
    auth = AuthConfig(bearer_token_env="PROM_TOKEN", headers={"X-Scope-OrgID": "team-a"},
                      header_envs={"X-Api-Key": "TENANT_KEY"})
    with FakeServer([(200, COUNT), (200, OK)]) as srv:
        client = PromClient(srv.url + "/prometheus/", auth, sleep=lambda s: None)
        report = pull(store, client, 60_000, 120_000, step_ms=60_000,
                      queries=[PullQuery("k", "tidelens:test", "up", "gpu_holders")])
    headers = srv.seen[-1][1]
    assert headers["Authorization"] == "Bearer s3cret-token"
    assert headers["X-Scope-OrgID"] == "team-a" and headers["X-Api-Key"] == "tenant-secret"
    assert srv.seen[-1][0].startswith("/prometheus/api/v1/query_range?")
    dumped = orjson.dumps(report.as_dict()).decode() + str(store.sources().to_dicts())
    assert "s3cret" not in dumped and "tenant-secret" not in dumped
    assert report.samples == 2

    token_file = tmp_path / "token"
    token_file.write_text("file-token\n")
    basic_pw = tmp_path / "pw"
    basic_pw.write_text("pw\n")
    assert AuthConfig(bearer_token_file=str(token_file)).resolve_headers() == {
        "Authorization": "Bearer file-token"}
    assert AuthConfig(basic_user="u", basic_password_file=str(basic_pw)).resolve_basic() == ("u", "pw")


def test_missing_secret_and_credentials_in_url_are_refused(monkeypatch):
    monkeypatch.delenv("NOPE_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="NOPE_TOKEN, which is not set"):
        AuthConfig(bearer_token_env="NOPE_TOKEN").resolve_headers()
    with pytest.raises(ConfigError, match="credentials in the server URL are refused"):
        PromClient("https://me:pw@prom.example:9090")
    with pytest.raises(ConfigError, match="has no password"):
        AuthConfig(basic_user="me").resolve_basic()
    assert AuthConfig(insecure=True).verify() is False
    assert AuthConfig(ca_bundle="/etc/ca.pem").verify() == "/etc/ca.pem"


def test_shared_deployment_allows_only_listed_servers(tmp_path, monkeypatch):
    cfg = tmp_path / "tidelens.toml"
    cfg.write_text('[live]\nservers = ["http://prom.internal:9090/"]\n')
    allowed = allowed_servers(cfg)
    assert allowed == ["http://prom.internal:9090"]
    PromClient("http://prom.internal:9090", allowed=allowed)
    with pytest.raises(ConfigError, match="not in \\[live\\] servers.*prom.internal:9090"):
        PromClient("http://evil.example:9090", allowed=allowed)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TIDELENS_CONFIG", raising=False)
    assert allowed_servers() == allowed
    (tmp_path / "tidelens.toml").write_text("[pools]\n")
    assert allowed_servers() is None


def test_split_range_respects_the_point_limit_and_is_aligned():
    chunks = split_range(0, 30_000 * 60_000, 60_000)
    assert all((b - a) // 60_000 + 1 <= 11_000 for a, b in chunks)
    assert chunks[0][0] == 0 and chunks[-1][1] == 30_000 * 60_000
    assert all(b + 60_000 == a2 for (_, b), (a2, _) in zip(chunks, chunks[1:]))
    # The same period asked from a different start yields the same chunk boundaries.
    later = split_range(5_000 * 60_000, 30_000 * 60_000, 60_000)
    assert later[1:] == chunks[1:]
    assert missing_ranges(0, 600, 60, (0, 600)) == []


def test_catalogue_is_copyable_promql_scoped_everywhere():
    scope = Scope.parse('namespace=inference,Hostname=~node-0.*')
    qs = fleet_queries(60_000, scope)
    text = describe(qs)
    assert "# tidelens:gpu_holders" in text and "count by (UUID, GPU_I_ID)" in text
    assert "sum by (namespace, exported_namespace, service, model_name, workload, le)" in text
    for q in qs + timeline_queries(60_000, scope):
        # every selector sits in a range ([...ms]) and carries the scope's matchers
        assert q.promql.count("ms]") == q.promql.count('namespace="inference", Hostname=~"node-0.*"') > 0, q.key
    with pytest.raises(ConfigError):
        Scope.parse("namespace")


def test_unauthorised_and_non_api_answers_say_what_to_check():
    with FakeServer([(401, b"Unauthorized")]) as srv:
        with pytest.raises(PullError, match="HTTP 401 .*check the token"):
            PromClient(srv.url, sleep=lambda s: None).query("up", 0)
    with FakeServer([(404, b"<html>not found</html>")]) as srv:
        with pytest.raises(PullError, match="not a Prometheus API answer.*API's base"):
            PromClient(srv.url, sleep=lambda s: None).query("up", 0)


class RedirectServer:
    """A local server that answers every request with a redirect to ``target`` (and records it)."""

    def __init__(self, target: str, status: int = 302) -> None:
        self.seen: list[tuple[str, dict[str, str]]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                outer.seen.append((self.path, dict(self.headers)))
                self.send_response(status)
                self.send_header("Location", target + self.path)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self) -> "RedirectServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_to_another_server_is_refused_and_no_secret_reaches_it(monkeypatch, status):
    monkeypatch.setenv("SECRET_HDR", "hdr-secret-value")
    monkeypatch.setenv("PROM_TOKEN", "tok-secret-value")
    auth = AuthConfig(bearer_token_env="PROM_TOKEN", header_envs={"X-Api-Key": "SECRET_HDR"})
    with FakeServer([(200, OK)]) as other, RedirectServer(other.url, status) as first:
        client = PromClient(first.url, auth, config=ClientConfig(retries=2), sleep=lambda s: None,
                            allowed=[first.url])
        with pytest.raises(PullError, match=f"HTTP {status} redirects to {other.url}/api/v1/query_range, another "
                                            "server; not followed"):
            client.query_range("up", 60_000, 120_000, 60_000)
    assert len(first.seen) == 1 and first.seen[0][1]["X-Api-Key"] == "hdr-secret-value"
    assert other.seen == []


def test_a_redirect_within_the_same_server_is_followed_with_its_headers(monkeypatch):
    monkeypatch.setenv("SECRET_HDR", "hdr-secret-value")
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            seen.append(self.path)
            if self.path.startswith("/old/"):
                self.send_response(308)
                self.send_header("Location", self.path.replace("/old/", "/new/", 1))
                self.end_headers()
                return
            assert self.headers["X-Api-Key"] == "hdr-secret-value"
            self.send_response(200)
            self.end_headers()
            self.wfile.write(OK)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/old"
        client = PromClient(url, AuthConfig(header_envs={"X-Api-Key": "SECRET_HDR"}))
        resp = client.query_range("up", 60_000, 120_000, 60_000)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert resp.data["result"][0]["values"][0] == [60, "1"]
    assert seen[0].startswith("/old/api/v1/query_range?query=up")
    assert seen[1].startswith("/new/api/v1/query_range?query=up")


def test_a_redirect_loop_stops_with_a_message():
    with RedirectServer("") as loop:  # Location: the same path on the same server
        client = PromClient(loop.url, sleep=lambda s: None)
        with pytest.raises(PullError, match="more than 5 redirects"):
            client.query("up", 0)
    assert len(loop.seen) == 6


def test_server_error_bodies_are_redacted_of_every_secret(monkeypatch):
    monkeypatch.setenv("SECRET_HDR", "hdr-secret-value")
    monkeypatch.setenv("PW", "basic-pw-value")
    auth = AuthConfig(basic_user="me", basic_password_env="PW",
                      header_envs={"X-Api-Key": "SECRET_HDR"})
    import base64
    pair = base64.b64encode(b"me:basic-pw-value").decode()
    echo = orjson.dumps({"status": "error", "errorType": "bad_data",
                         "error": f"bad key hdr-secret-value (Authorization: Basic {pair})",
                         "warnings": ["hdr-secret-value"]})
    with FakeServer([(400, echo)]) as srv:
        with pytest.raises(PullError) as err:
            PromClient(srv.url, auth, sleep=lambda s: None).query("up", 0)
    text = str(err.value)
    assert "bad_data: bad key [redacted] (Authorization: Basic [redacted])" in text
    assert "hdr-secret-value" not in text and pair not in text and "basic-pw-value" not in text
    with FakeServer([(502, b"<html>upstream said hdr-secret-value</html>")]) as srv:
        with pytest.raises(PullError, match="not a Prometheus API answer") as err:
            PromClient(srv.url, auth, config=ClientConfig(retries=0)).query("up", 0)
    assert "hdr-secret-value" not in str(err.value) and "[redacted]" in str(err.value)
    with FakeServer([(200, orjson.dumps({"status": "success", "data": {"resultType": "vector",
                     "result": []}, "warnings": ["echo hdr-secret-value"]}))]) as srv:
        resp = PromClient(srv.url, auth).query("up", 0)
    assert resp.warnings == ["echo [redacted]"]
