"""``tidelens export grafana``: tail events as annotations and the pool story as a dashboard.

The dashboard loads through grafana-foundation-sdk's types; every PromQL expression in it parses
and returns data from the real Prometheus the live tests start (the store it is built from was
pulled from that server); the annotations' times and tags are ``tidelens events --json``'s; and
posting against a local HTTP server creates once, updates after, and sends the token in the
Authorization header only, to the given origin only.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import live_data as d
from analytics.cli import main
from analytics.grafana import GrafanaError, post_annotations
from analytics.outbound import HttpConfig
from analytics.times import iso_utc
from apptest_helpers import isolated_cli
from plugins.prometheus import prometheus  # noqa: F401  (the session fixture)

TOKEN = "glsa_s3cr3t-token-value"


def _exprs(model: dict) -> list[str]:
    """Every PromQL expression of a dashboard model (its panels' targets)."""
    return [t["expr"] for p in model.get("panels", []) for t in p.get("targets", []) if t.get("expr")]


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolated_cli(monkeypatch, tmp_path)


@pytest.fixture(scope="module")
def db(morning_db: Path) -> Path:
    return morning_db  # the session's one build of this store (tests/conftest.py), read only


def _export(capsys, db: Path, out: Path, *extra: str) -> dict:
    assert main(["export", "grafana", "--db", str(db), "--out", str(out), "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_annotations_are_the_events_and_the_dashboard_loads_through_the_sdk(db, tmp_path, capsys) -> None:
    from grafana_foundation_sdk.models import dashboard as dm

    report = _export(capsys, db, tmp_path / "g")
    annotations = json.loads((tmp_path / "g" / "annotations.json").read_text())
    assert main(["events", "--db", str(db), "--json"]) == 0
    events = json.loads(capsys.readouterr().out)
    assert report["annotations"] == len(events) == len(annotations) > 0
    for ann, ev in zip(annotations, events):
        assert iso_utc(ann["time"]) == ev["start"] and iso_utc(ann["timeEnd"]) == ev["end"]
        assert ann["tags"] == ["tidelens", f"tidelens-event:{ev['id']}", f"service:{ev['service']}",
                               f"cause:{ev['cause']}", "misattributed" if ev["misattributed"] else "attributed"]
        assert ev["service"] in ann["text"]
    model = json.loads((tmp_path / "g" / "dashboard.json").read_text())
    board = dm.Dashboard.from_json(model)  # the SDK's own types read it back
    assert board.uid == "tidelens-pool-story" and len(board.panels or []) == report["panels"] >= 4
    titles = [p["title"] for p in model["panels"]]
    assert titles[0].startswith("GPUs held by class") and "Batch holders" in titles
    assert any(t.startswith("p99 against the SLO") for t in titles) and "Desired vs ready replicas" in titles
    # the annotation query shows exactly Tidelens's events
    query = model["annotations"]["list"][0]
    assert query["target"]["tags"] == ["tidelens"] and query["target"]["type"] == "tags"


SCHEMAS = Path(__file__).parent / "fixtures" / "grafana"
SDK_VERSION = "1769699998!10.1.0"  # the SDK release the schemas were vendored from (tests/fixtures/SOURCES.md)


def test_the_dashboard_validates_against_the_sdks_own_json_schema(db, tmp_path, capsys) -> None:
    import importlib.metadata

    import jsonschema

    assert importlib.metadata.version("grafana_foundation_sdk") == SDK_VERSION, \
        "the SDK was upgraded: vendor its jsonschema/{dashboard,timeseries}.jsonschema.json again"
    _export(capsys, db, tmp_path / "g")
    model = json.loads((tmp_path / "g" / "dashboard.json").read_text())
    board = json.loads((SCHEMAS / "dashboard.jsonschema.json").read_text())
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:120]}"
              for e in jsonschema.Draft7Validator(board).iter_errors(model)]
    assert errors == []
    # each panel's options as the timeseries panel's own schema has them
    ts = json.loads((SCHEMAS / "timeseries.jsonschema.json").read_text())
    options = jsonschema.Draft7Validator({"$ref": "#/definitions/Options", "definitions": ts["definitions"]})
    assert model["panels"] and all(p["type"] == "timeseries" for p in model["panels"])
    assert [list(options.iter_errors(p["options"])) for p in model["panels"]] == [[]] * len(model["panels"])


@pytest.mark.prometheus
@pytest.mark.xdist_group("prometheus")
def test_every_promql_expression_returns_data_from_the_users_prometheus(prometheus, tmp_path, capsys) -> None:  # noqa: F811
    url, _ = prometheus
    db = tmp_path / "pulled.duckdb"
    assert main(["pull", "--url", url, "--from", iso_utc(d.T0_MS), "--to", iso_utc(d.END_MS), "--step", "1m",
                 "--db", str(db), "--json"]) == 0
    capsys.readouterr()
    _export(capsys, db, tmp_path / "g")
    exprs = _exprs(json.loads((tmp_path / "g" / "dashboard.json").read_text()))
    assert len(exprs) >= 4
    for expr in exprs:
        q = urllib.parse.urlencode({"query": expr, "start": (d.T0_MS + 10 * 60_000) / 1000,
                                    "end": d.END_MS / 1000, "step": "60"})
        with urllib.request.urlopen(f"{url}/api/v1/query_range?{q}", timeout=30) as r:
            got = json.load(r)
        assert got["status"] == "success", (expr, got)  # parsed by Prometheus itself
        assert got["data"]["result"], f"no data for: {expr[:200]}"


class FakeGrafana:
    """A local Grafana annotations API that records every request."""

    def __init__(self, redirect_to: str | None = None) -> None:
        self.requests: list[dict] = []
        self.store: dict[int, dict] = {}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, code: int, body: object) -> None:
                raw = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _record(self) -> dict:
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n)) if n else None
                rec = {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
                outer.requests.append(rec)
                return rec

            def do_GET(self) -> None:  # noqa: N802
                self._record()
                if redirect_to:
                    self.send_response(302)
                    self.send_header("Location", redirect_to)
                    self.end_headers()
                    return
                tag = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)["tags"][0]
                self._answer(200, [{"id": i, **a} for i, a in outer.store.items() if tag in a["tags"]])

            def do_POST(self) -> None:  # noqa: N802
                rec = self._record()
                new_id = len(outer.store) + 1
                outer.store[new_id] = rec["body"]
                self._answer(200, {"id": new_id, "message": "Annotation added"})

            def do_PUT(self) -> None:  # noqa: N802
                rec = self._record()
                outer.store[int(self.path.rsplit("/", 1)[1])] = rec["body"]
                self._answer(200, {"message": "Annotation updated"})

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_posting_is_idempotent_and_the_token_goes_nowhere_else(db, tmp_path, capsys, monkeypatch) -> None:
    grafana = FakeGrafana()
    try:
        monkeypatch.setenv("TIDELENS_GRAFANA_TOKEN", TOKEN)
        first = _export(capsys, db, tmp_path / "g", "--url", grafana.url, "--dashboard-uid", "tidelens-pool-story")
        assert {p["action"] for p in first["posted"]} == {"created"} and len(grafana.store) == first["annotations"]
        again = _export(capsys, db, tmp_path / "g", "--url", grafana.url, "--dashboard-uid", "tidelens-pool-story")
        assert {p["action"] for p in again["posted"]} == {"updated"}
        assert len(grafana.store) == first["annotations"]  # re-posting never duplicates
        assert all(a["dashboardUID"] == "tidelens-pool-story" for a in grafana.store.values())
        methods = [r["method"] for r in grafana.requests]
        assert methods.count("POST") == first["annotations"] and methods.count("PUT") == first["annotations"]
        for r in grafana.requests:
            assert r["headers"]["Authorization"] == f"Bearer {TOKEN}"
            others = json.dumps({k: v for k, v in r["headers"].items() if k != "Authorization"})
            assert TOKEN not in r["path"] and TOKEN not in others and TOKEN not in json.dumps(r["body"])
        for f in (tmp_path / "g").iterdir():  # never stored either
            assert TOKEN not in f.read_text()
    finally:
        grafana.close()


def test_a_redirect_is_not_followed_and_errors_never_show_the_token(tmp_path) -> None:
    elsewhere = FakeGrafana()
    bouncer = FakeGrafana(redirect_to=elsewhere.url + "/api/annotations")
    try:
        ann = [{"time": 0, "timeEnd": 60_000, "tags": ["tidelens", "tidelens-event:ev-1"], "text": "x"}]
        with pytest.raises(GrafanaError, match="not followed") as err:
            post_annotations(bouncer.url, TOKEN, ann)
        assert TOKEN not in str(err.value)
        assert elsewhere.requests == []  # the token never reached the other origin
    finally:
        bouncer.close()
        elsewhere.close()
    with pytest.raises(GrafanaError) as err:
        post_annotations("http://127.0.0.1:9", TOKEN, ann, config=HttpConfig(timeout_s=2, retries=0))  # nothing listens
    assert TOKEN not in str(err.value) and "reachable" in str(err.value)


def test_without_a_token_or_with_a_bad_url_it_says_what_to_do(db, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("TIDELENS_GRAFANA_TOKEN", raising=False)
    assert main(["export", "grafana", "--db", str(db), "--out", str(tmp_path / "g"),
                 "--url", "http://127.0.0.1:9"]) == 2
    assert "TIDELENS_GRAFANA_TOKEN" in capsys.readouterr().err
    monkeypatch.setenv("TIDELENS_GRAFANA_TOKEN", TOKEN)
    assert main(["export", "grafana", "--db", str(db), "--out", str(tmp_path / "g"), "--url", "grafana"]) == 2
    err = capsys.readouterr().err
    assert "give Grafana's base URL" in err and TOKEN not in err
