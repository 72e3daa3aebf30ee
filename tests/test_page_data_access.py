"""The Data page by role, in AppTest: Streamlit's OIDC sign-in (``st.user``, seeded as AppTest
allows) decides what a visitor is shown, and a visitor with no role is told why (a name a Unicode
fold would change, an e-mail the provider did not verify); the library's checks behind it are
tests/test_access.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from apptest_helpers import APP, isolate

ACCESS = '[access]\nsign_in = "oidc"\nadmins = ["root@example.com"]\neditors = ["ed@example.com"]\n'


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("TIDELENS_DATA_DIR", str(tmp_path))
    (tmp_path / "tidelens.toml").write_text(ACCESS)


def _data_page(tmp_path: Path, user: dict) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.user = user
    at.query_params.update({"source": "duckdb", "db": str(tmp_path / "none.duckdb")})
    at.run()
    at.switch_page("pages/data.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_each_role_sees_its_own_data_page(tmp_path: Path) -> None:
    # Not signed in: the sign-in, and nothing of the page.
    at = _data_page(tmp_path, {"is_logged_in": False})
    assert [t.value for t in at.title] == ["Sign in"] and at.button(key="access_sign_in")
    assert not at.tabs
    # A signed-in viewer reads, with no form to add data.
    at = _data_page(tmp_path, {"is_logged_in": True, "email": "vic@example.com"})
    assert [t.value for t in at.title] == ["Data"]
    assert not at.tabs and not [w for w in at.text_input if w.key == "pull_url"]
    assert any("with the viewer role" in i.value for i in at.info)
    assert any("Signed in as" in c.value and "vic@example.com" in c.value and "(viewer)" in c.value
               for c in at.sidebar.caption)
    # An editor gets the forms (the upload, the pull).
    at = _data_page(tmp_path, {"is_logged_in": True, "email": "ed@example.com"})
    assert at.tabs and not any("viewer role" in i.value for i in at.info)


def test_a_visitor_is_told_only_of_the_secrets_the_operator_listed(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    monkeypatch.setenv("PROM_TOKEN", "s3cret-token")
    monkeypatch.setenv("OTHER_TOKEN", "other-s3cret")
    (tmp_path / "tidelens.toml").write_text(ACCESS + '[live]\nservers = ["http://127.0.0.1:9"]\n'
                                            '[live.secrets]\n"http://127.0.0.1:9" = ["PROM_TOKEN"]\n')
    at = _data_page(tmp_path, {"is_logged_in": True, "email": "ed@example.com"})
    at.session_state["data_add"] = "Prometheus / Thanos / Mimir / VictoriaMetrics"
    at.run()
    at.text_input(key="pull_url").set_value("http://127.0.0.1:9").run()
    at.radio(key="pull_auth").set_value("bearer").run()
    at.text_input(key="pull_token_env").set_value("PROM_TOKEN").run()
    assert any("`PROM_TOKEN` is set" in c.value for c in at.caption)
    for name in ("OTHER_TOKEN", "NO_SUCH_VARIABLE"):  # set or not: the page says the same
        at.text_input(key="pull_token_env").set_value(name).run()
        assert not any(name in c.value for c in at.caption)
        at.button(key="pull_go").click().run()
        assert not at.exception
        [error] = [e.value for e in at.error]
        assert "listed for http://127.0.0.1:9" in error and name not in error and " set" not in error


def test_an_unreadable_access_section_lets_nobody_in(tmp_path: Path) -> None:
    (tmp_path / "tidelens.toml").write_text('[access]\nsign_in = "oidc"\nadmins = "root@example.com"\n')
    at = _data_page(tmp_path, {"is_logged_in": True, "email": "root@example.com"})
    assert [t.value for t in at.title] == ["Sign in"]
    assert any("admins" in e.value and "must be a list" in e.value for e in at.error)


@pytest.mark.parametrize("user, said", [
    ({"is_logged_in": True, "email": "\u212aate@example.com"}, "Unicode NFKC normalisation changes"),  # Kelvin sign
    ({"is_logged_in": True, "email": "root@example.com", "email_verified": False}, "is not verified"),
])
def test_a_name_a_fold_would_change_or_an_unverified_email_is_told_why_it_has_no_role(
        tmp_path: Path, user: dict, said: str) -> None:
    (tmp_path / "tidelens.toml").write_text(ACCESS.replace("admins = [", 'admins = ["kate@example.com", '))
    at = _data_page(tmp_path, user)
    assert [t.value for t in at.title] == ["Sign in"] and not at.tabs
    [warning] = [w.value for w in at.warning]
    assert said in warning and user["email"] in warning
