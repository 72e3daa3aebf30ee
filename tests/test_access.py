"""Sign-in, roles, outbound rules and the record of changes, in the library (analytics.access,
analytics.writes, analytics.audit): who a request is, what each role may write (checked here,
whatever a page drew), where a pull from the app may go, and what the record keeps.
The deployed set-up (nginx in front of Streamlit, Chromium) is tests/test_access_deployed.py."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from analytics.access import (ENABLE_EDITING, LOCAL_OPERATOR, NO_OPERATOR_LINK, NOT_AS_WRITTEN, UNVERIFIED,
                              AccessSettings, Identity, OperatorSecret, Request, access_settings, check_pull,
                              identify)
from analytics.errors import AccessDenied, ConfigError
from analytics.store import Store

ROOT = Path(__file__).resolve().parent.parent
SCRAPE = b'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-1",Hostname="n1"} 42 1764322200000\n'
HEADER = AccessSettings(sign_in="header", header="X-Forwarded-User", trusted_proxies=("127.0.0.2", "10.1.0.0/16"),
                        admins=("root",), editors=("*@example.com", "ed"), viewers=("*",))
VIEWER = Identity("vic", "viewer", "header")
EDITOR = Identity("ed", "editor", "header")
ADMIN = Identity("root", "admin", "header")


def test_without_access_only_the_holder_of_the_secret_is_the_operator() -> None:
    secret = OperatorSecret.new()
    proof = {"tidelens_operator_8501": secret.cookie_value}
    assert identify(None, Request("192.0.2.7", cookies=proof), secret) == LOCAL_OPERATOR  # from anywhere
    # From the server's own machine, header or not (a plain proxy_pass adds none), without the
    # cookie: a viewer, told how to enable editing.
    for request in (Request(None), Request(None, {"X-Forwarded-For": "192.0.2.7"}), Request("192.0.2.7")):
        who = identify(None, request, secret)
        assert (who.role, who.note) == ("viewer", ENABLE_EDITING)
    # Another server's cookie, a forged one, the token itself as the cookie: a viewer.
    for cookies in ({"tidelens_operator_8501": OperatorSecret.new().cookie_value},
                    {"tidelens_operator": secret.cookie_value[:-1] + ("1" if secret.cookie_value[-1] == "0" else "0")},
                    {"tidelens_operator": secret.token},
                    {"other": secret.cookie_value}):
        assert identify(None, Request(None, cookies=cookies), secret).role == "viewer"
    # A server that printed no token (streamlit run app.py): nobody is the operator, and it says why.
    assert identify(None, Request(None, cookies=proof)).note == NO_OPERATOR_LINK
    # A run no web server asked for (AppTest) is its runner's, as a command is.
    assert identify(None, Request(None, served=False)) == LOCAL_OPERATOR
    # With [access], roles come from the sign-in alone.
    assert identify(HEADER, Request(None, cookies=proof, served=False), secret).role is None


def test_the_operator_secret_is_never_shown_and_a_weak_one_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = OperatorSecret("t" * 32)
    assert secret.admits_token("t" * 32) and not secret.admits_token("t" * 31) and not secret.admits_token("")
    assert "t" * 32 not in repr(secret) and secret.token not in secret.cookie_value
    for weak in ("short", "t" * 31 + "!", "t" * 32 + "\u212a"):
        with pytest.raises(ConfigError, match="TIDELENS_TOKEN: the operator's token must be at least 32"):
            OperatorSecret(weak)


@pytest.mark.parametrize("name", ["\u212aate@example.com", "\u212aATE@EXAMPLE.COM", "\uff4bate@example.com",
                                  "\ufb01@example.com"])
def test_a_name_is_matched_as_the_provider_wrote_it(name: str) -> None:
    """Kelvin sign, full-width k, a ligature: names that a Unicode fold turns into another person's."""
    settings = AccessSettings(sign_in="header", trusted_proxies=("127.0.0.2",), admins=("kate@example.com", "fi@example.com"),
                              editors=("*@example.com",))
    who = identify(settings, Request("127.0.0.2", {"X-Forwarded-Email": name}))
    assert (who.who, who.role, who.note) == (name, None, NOT_AS_WRITTEN)
    # ASCII case is still folded: e-mail addresses are matched case-insensitively.
    assert identify(settings, Request("127.0.0.2", {"X-Forwarded-Email": "KATE@Example.com"})).role == "admin"
    # A Turkish dotted capital I is not an i.
    assert identify(settings, Request("127.0.0.2", {"X-Forwarded-Email": "f\u0130@example.com"})).role == "editor"


def test_an_unverified_oidc_email_gets_no_role() -> None:
    oidc = AccessSettings(sign_in="oidc", admins=("ops@example.com",))
    for claim in (False, "false", "False", 0, "no"):
        who = identify(oidc, Request(None, {}, "ops@example.com", claim))
        assert (who.who, who.role, who.note) == ("ops@example.com", None, UNVERIFIED), claim
    for claim in (True, "true", None):  # None: the provider says nothing (Microsoft Entra)
        assert identify(oidc, Request(None, {}, "ops@example.com", claim)).role == "admin", claim


def test_a_user_header_counts_only_from_a_trusted_proxy() -> None:
    assert identify(HEADER, Request("127.0.0.2", {"x-forwarded-user": "root"})).role == "admin"
    assert identify(HEADER, Request("10.1.4.4", {"X-Forwarded-User": "Ann@Example.com"})).role == "editor"
    assert identify(HEADER, Request("127.0.0.2", {"X-Forwarded-User": "vic"})).role == "viewer"
    # The same header straight from a visitor (or from loopback, not listed) is not believed.
    for peer in ("192.0.2.7", None, "::ffff:192.0.2.7"):
        who = identify(HEADER, Request(peer, {"X-Forwarded-User": "root"}))
        assert (who.who, who.role) == ("anonymous", None)
    # Lists decide; a signed-in user on none of them has no role.
    strict = AccessSettings(sign_in="header", trusted_proxies=("127.0.0.2",), viewers=("*@example.com",))
    assert identify(strict, Request("127.0.0.2", {"X-Forwarded-Email": "eve@evil.test"})).role is None
    assert identify(AccessSettings(sign_in="header", trusted_proxies=("127.0.0.2",), anonymous="viewer"),
                    Request("127.0.0.2")).role == "viewer"


def test_oidc_reads_the_email_streamlit_vouches_for() -> None:
    oidc = AccessSettings(sign_in="oidc", admins=("ops@example.com",))
    assert identify(oidc, Request("192.0.2.7", {}, "OPS@example.com")).role == "admin"
    assert identify(oidc, Request("192.0.2.7", {"X-Forwarded-Email": "ops@example.com"})).role is None


@pytest.mark.parametrize("toml, words", [
    ('[access]\nsign_in = "header"\n', "trusted_proxies"),
    ('[access]\nsign_in = "header"\ntrusted_proxies = "127.0.0.1"\n', "trusted_proxies: must be a list"),
    ('[access]\nsign_in = "oidc"\nadmin = ["x"]\n', "admin: not a setting"),
    ('[access]\nsign_in = "saml"\n', "sign_in: 'saml'"),
    ('[access]\nsign_in = "header"\ntrusted_proxies = ["proxy.local"]\n', "not an address"),
])
def test_access_settings_are_checked_key_by_key(tmp_path: Path, toml: str, words: str) -> None:
    path = tmp_path / "tidelens.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError, match="tidelens.toml") as info:
        access_settings(path)
    assert words in str(info.value) and "[access]" in str(info.value)


def _writer(db: Path):
    return lambda: Store(db)


def test_each_role_writes_only_what_it_may(tmp_path: Path) -> None:
    from analytics.audit import audit_dicts
    from analytics.workloads import load_map, map_digest
    from analytics.writes import load_upload, save_workload_map

    db = tmp_path / "s.duckdb"
    config = tmp_path / "tidelens.toml"
    config.write_text('[access]\nsign_in = "oidc"\nadmins = ["root"]\n\n[live]\nservers = ["http://prom:9090"]\n')
    with pytest.raises(AccessDenied, match="vic: loading data needs the editor role"):
        load_upload(VIEWER, _writer(db), "a.prom", SCRAPE)
    assert not db.exists()  # refused before anything was opened
    [res] = load_upload(EDITOR, _writer(db), "a.prom", SCRAPE)
    assert res.status == "loaded"
    assert load_upload(EDITOR, _writer(db), "a.prom", SCRAPE)[0].status == "skipped"  # no change, no row
    wmap = load_map(config)
    from analytics.view import apply_workload_edits
    changed = apply_workload_edits(wmap, [{"namespace": "ml", "workload": "trainer", "cls": "batch",
                                           "team": "research", "rule": ""}])
    for who in (VIEWER, EDITOR):
        with pytest.raises(AccessDenied, match="changing the workload map needs the admin role"):
            save_workload_map(who, _writer(db), changed, config)
    before, after = save_workload_map(ADMIN, _writer(db), changed, config)
    assert before == map_digest(wmap) and after == map_digest(load_map(config)) != before
    # The rest of the file survives a map change, and its previous version is kept beside it.
    assert access_settings(config).admins == ("root",)
    assert "[live]" in config.read_text() and "trainer" in config.read_text()
    assert (tmp_path / "tidelens.toml.prev").read_text().startswith("[access]")
    with Store(db, read_only=True) as st:
        rows = audit_dicts(st)
    assert [(r["who"], r["role"], r["action"], r["outcome"]) for r in rows] == [
        ("root", "admin", "map", "saved"), ("ed", "editor", "load", "loaded")]
    assert (rows[0]["map_before"], rows[0]["map_after"]) == (before, after)
    [src] = rows[1]["sources"]
    assert src["name"] == "a.prom" and src["status"] == "loaded" and len(src["hash"]) >= 16


def test_pulls_from_the_app_go_only_where_the_operator_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    allowed = ["http://prom:9090", "http://169.254.169.254"]
    listed = {"http://prom:9090": ["PROM_TOKEN", "/run/secrets/prom"]}
    check_pull(EDITOR, "http://prom:9090/", ["PROM_TOKEN"], allowed, listed)
    with pytest.raises(AccessDenied, match="pulling from a server needs the editor role"):
        check_pull(VIEWER, "http://prom:9090", [], allowed, listed)
    with pytest.raises(AccessDenied, match="not in \\[live\\] servers"):
        check_pull(EDITOR, "http://elsewhere:9090", [], allowed, listed)
    with pytest.raises(AccessDenied, match="not in \\[live\\] servers"):  # no list: nowhere
        check_pull(EDITOR, "http://prom:9090", [], None, None)
    monkeypatch.delenv("HOME_SECRET", raising=False)
    for name in ("HOME", "HOME_SECRET", "/etc/shadow"):  # set or not, the words are the same
        with pytest.raises(AccessDenied) as info:
            check_pull(EDITOR, "http://prom:9090", [name], allowed, listed)
        assert "is not" in str(info.value) and " set" not in str(info.value) and name not in str(info.value)
    # The local operator keeps a personal install's rules.
    check_pull(LOCAL_OPERATOR, "http://anywhere:9090", [], None, None)


def test_metadata_and_link_local_addresses_are_never_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    from analytics.live import PromClient

    for url in ("http://169.254.169.254", "http://[fd00:ec2::254]/", "http://metadata.google.internal",
                "http://[::ffff:169.254.169.254]:80", "http://[fe80::1]:9090"):
        with pytest.raises(ConfigError, match="link-local or cloud metadata"):
            PromClient(url, allowed=[url.rstrip("/")])
    # A name that resolves there (DNS cannot exist in a test: its answer is made up).
    real = socket.getaddrinfo

    def fake(host, *a, **kw):
        if host == "rebind.example":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", 0))]
        return real(host, *a, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    with pytest.raises(ConfigError, match="rebind.example resolves to 169.254.169.254"):
        PromClient("http://rebind.example:9090")


def test_a_connection_that_lands_on_a_metadata_address_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A name that resolved elsewhere when checked and to the metadata address when connected
    (DNS rebinding): the connection's own peer is checked, and nothing is sent."""
    import analytics.outbound as outbound
    from analytics.live import PromClient
    from test_live_client import FakeServer

    with FakeServer([(200, b'{"status": "success", "data": {"resultType": "vector", "result": []}}')]) as srv:
        client = PromClient(srv.url, allowed=None)  # 127.0.0.1 passes the check before connecting
        monkeypatch.setattr(outbound, "blocked_address", lambda a: a == "127.0.0.1")  # now it "is" metadata
        with pytest.raises(ConfigError, match="127.0.0.1 is a link-local or cloud metadata address"):
            client.query("up", 0)
        assert srv.seen == []


def test_tidelens_audit_prints_the_record(tmp_path: Path) -> None:
    from analytics.audit import record

    db = tmp_path / "s.duckdb"
    with Store(db) as st:
        record(st, EDITOR, "load", "loaded", "a.prom (sha256 0123)",
               sources=[{"name": "a.prom", "hash": "abcdef0123456789", "status": "loaded"}], at_ms=1764322200000)
        record(st, ADMIN, "map", "saved", "tidelens.toml", map_before="aaaa", map_after="bbbb",
               at_ms=1764322260000)
    run = [sys.executable, "-m", "analytics", "audit", "--db", str(db)]
    text = subprocess.run(run, capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert "a.prom (loaded, abcdef012345)" in text and "root" in text and "bbbb" in text
    rows = json.loads(subprocess.run([*run, "--json"], capture_output=True, text=True, check=True, cwd=ROOT).stdout)
    assert [(r["who"], r["action"], r["at"]) for r in rows] == [
        ("root", "map", "2025-11-28T09:31:00Z"), ("ed", "load", "2025-11-28T09:30:00Z")]
    assert rows[1]["sources"][0]["hash"] == "abcdef0123456789"


def test_commands_record_their_loads_too(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from analytics.audit import audit_dicts
    from analytics.cli import main

    (tmp_path / "a.prom").write_bytes(SCRAPE)
    db = tmp_path / "s.duckdb"
    for _ in range(2):  # the second load changes nothing and records nothing
        assert main(["ingest", "--db", str(db), str(tmp_path / "a.prom")]) == 0
    # A change of the pool's policy takes the app's one write path, and is in the record too.
    assert main(["change", "add", "--db", str(db), "--at", "2025-11-28T09:00Z", "--policy", "tidal"]) == 0
    with Store(db, read_only=True) as st:
        change, row = audit_dicts(st)
    assert row["who"].endswith("(command line)") and (row["action"], row["outcome"]) == ("load", "loaded")
    assert row["sources"][0]["name"].endswith("a.prom")
    assert (change["who"], change["action"], change["what"]) == (row["who"], "change", "tidal from 2025-11-28T09:00:00Z")


def test_a_store_with_a_foreign_audit_table_is_refused(tmp_path: Path) -> None:
    from analytics.errors import StoreFileError

    db = tmp_path / "forged.duckdb"
    with Store(db) as st:
        st.con.execute("CREATE TABLE audit (who VARCHAR)").fetchall()  # a record anyone could fill
    with pytest.raises(StoreFileError, match="a table named 'audit' unlike Tidelens' own"):
        Store(db, read_only=True)
