"""The Data page's live sources in AppTest: a pull from a real Prometheus lands series and shows
its PromQL; a server that is down, a server outside the allowlist and a pasted secret are
messages; the NVML panel says plainly when there is no driver and collects through a fake
``pynvml`` when there is one."""

from __future__ import annotations

from pathlib import Path

import pynvml
import pytest

from streamlit.testing.v1 import AppTest  # noqa: E402

import live_data as d  # noqa: E402
from analytics import nvml  # noqa: E402
from analytics import signals as s  # noqa: E402
from analytics.store import Store  # noqa: E402
from analytics.text import md  # noqa: E402
from analytics.times import iso_utc  # noqa: E402
from plugins.prometheus import prometheus  # noqa: E402,F401  (the session fixture)
from test_live_client import FakeServer  # noqa: E402
from test_nvml import fake_pynvml  # noqa: E402
from apptest_helpers import tables  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EMPTY = b'{"status": "success", "data": {"resultType": "matrix", "result": []}}'
APP = ROOT / "app.py"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    # Never touch the repository's own store or tidelens.toml.
    uploads = tmp_path / "uploads.duckdb"
    monkeypatch.setenv("TIDELENS_UPLOADS_DB", str(uploads))
    monkeypatch.setenv("TIDELENS_CONFIG", str(tmp_path / "tidelens.toml"))
    return uploads


TABS = {"files": "Files", "pull": "Prometheus / Thanos / Mimir / VictoriaMetrics",
        "nvml": "Local GPUs (NVML)"}


def _data_page(tab: str = "pull") -> AppTest:
    """The Data page with one of its "add data" tabs picked (only the picked one runs), and the
    pull form's PromQL panel opened."""
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params.update(source="uploads")
    at.run()
    at.switch_page("pages/data.py")
    at.session_state["data_add"] = TABS[tab]
    at.session_state["pull_promql"] = True
    at.run()
    _no_exception(at)
    return at


def _no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def _table_with(at: AppTest, *columns: str):
    """The first table showing all these columns (static tables have no key in AppTest): its
    values under its headers (what is drawn is their formatted text)."""
    for df in tables(at):
        if set(columns) <= set(df.value.columns):
            return df.value
    raise AssertionError(f"no table with columns {columns}")


def _fill_pull(at: AppTest, url: str, **extra: object) -> None:
    at.text_input(key="pull_url").set_value(url)
    at.text_input(key="pull_from").set_value(iso_utc(d.T0_MS - d.STEP_MS))
    at.text_input(key="pull_to").set_value(iso_utc(d.END_MS))
    for key, value in extra.items():
        widget = at.number_input(key=key) if key in ("pull_retries", "pull_timeout") \
            else at.text_input(key=key)
        widget.set_value(value)
    at.run()
    _no_exception(at)


@pytest.mark.prometheus
@pytest.mark.xdist_group("prometheus")
def test_pull_lands_series_and_shows_its_promql(prometheus, _isolated: Path) -> None:
    url, _ = prometheus
    at = _data_page()
    _fill_pull(at, url)
    promql = "\n".join(c.value for c in at.code)
    assert "last_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE[59999ms])" in promql
    at.button(key="pull_go").click().run()
    _no_exception(at)
    assert not at.error, [e.value for e in at.error]
    table = _table_with(at, "source", "status", "series", "samples", "from", "to")
    assert len(table) > 0 and (table["status"] == "loaded").all()
    assert all(name.startswith("prom://127.0.0.1:") for name in table["source"])
    with Store(_isolated, read_only=True) as store:
        metrics = set(store.metrics()["metric"].to_list())
    assert {s.DCGM_GPU_UTIL, s.DCGM_FB_USED, s.VLLM_TTFT + "_bucket"} <= metrics
    series = {m.label: m.value for m in at.metric}
    assert int(series["Series"].replace(",", "")) > 0
    # The store's inventory below the form already lists what was pulled.
    assert md(s.DCGM_GPU_UTIL) in at.radio(key="inv_metric").options
    # A second pull asks for nothing new.
    at.button(key="pull_go").click().run()
    _no_exception(at)
    assert any("nothing new" in c.value for c in at.caption)


@pytest.mark.prometheus
@pytest.mark.xdist_group("prometheus")
def test_query_errors_and_the_series_guard_are_messages(prometheus, _isolated: Path) -> None:
    url, _ = prometheus
    at = _data_page()
    # An invalid regex in the scope: the server's own error comes back.
    _fill_pull(at, url, pull_scope="namespace=~(")
    at.button(key="pull_go").click().run()
    _no_exception(at)
    errors = [e.value for e in at.error]
    assert any("bad_data" in e and "missing closing )" in e for e in errors), errors
    # More series than allowed: stopped, with how to narrow it on this page.
    at.text_input(key="pull_scope").set_value("pool")
    at.number_input(key="pull_max_series").set_value(1).run()
    at.button(key="pull_go").click().run()
    _no_exception(at)
    errors = [e.value for e in at.error]
    assert any("limit 1)" in e for e in errors), errors
    assert not any("--scope" in e or "--max-series" in e for e in errors), errors  # page words
    assert any("Scope" in i.value for i in at.info)
    assert not _isolated.exists() or Store(_isolated, read_only=True).totals()["samples"] == 0


def test_server_down_is_a_message(_isolated: Path) -> None:
    at = _data_page()
    _fill_pull(at, "http://127.0.0.1:9", pull_retries=0)
    at.button(key="pull_go").click().run()
    _no_exception(at)
    errors = [e.value for e in at.error]
    assert any("cannot connect" in e and "is the server running" in e for e in errors), errors
    assert not _isolated.exists() or Store(_isolated, read_only=True).totals()["samples"] == 0


def test_servers_outside_the_allowlist_are_refused(tmp_path: Path) -> None:
    (tmp_path / "tidelens.toml").write_text('[live]\nservers = ["http://prometheus.internal:9090"]\n')
    at = _data_page()
    assert any("prometheus.internal:9090" in c.value for c in at.caption)
    _fill_pull(at, "http://127.0.0.1:9", pull_retries=0)
    at.button(key="pull_go").click().run()
    errors = [e.value for e in at.error]
    assert any("not in [live] servers" in e for e in errors), errors


def test_credentials_in_the_url_are_refused_and_never_shown() -> None:
    at = _data_page()
    _fill_pull(at, "http://scraper:hunter2@127.0.0.1:9", pull_retries=0)
    at.button(key="pull_go").click().run()
    _no_exception(at)
    assert any("credentials in the server URL are refused" in e.value and "bearer token" in e.value
               for e in at.error)
    shown = [x.value for x in (*at.error, *at.caption, *at.info, *at.warning)]
    assert shown and not any("hunter2" in x for x in shown)


def test_named_secrets_reach_the_server_and_never_the_page(monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    monkeypatch.setenv("PROM_TOKEN", "s3cret-token")
    at = _data_page()
    with FakeServer([(200, EMPTY)]) as srv:
        (tmp_path / "tidelens.toml").write_text(f'[live]\nservers = ["{srv.url}"]\n')
        _fill_pull(at, srv.url, pull_tenant="team-a")
        at.radio(key="pull_auth").set_value("bearer").run()
        at.text_input(key="pull_token_env").set_value("PROM_TOKEN").run()
        assert any("`PROM_TOKEN` is set" in c.value for c in at.caption)
        at.button(key="pull_go").click().run()
        _no_exception(at)
        bearer = srv.seen[-1][1]
        # Basic auth with the password in a file.
        (tmp_path / "pw").write_text("file-pw\n")
        at.radio(key="pull_auth").set_value("basic").run()
        at.text_input(key="pull_user").set_value("reader")
        at.radio(key="pull_password_from").set_value("file").run()
        at.text_input(key="pull_password_file").set_value(str(tmp_path / "pw")).run()
        at.checkbox(key="pull_full").check().run()
        at.button(key="pull_go").click().run()
        _no_exception(at)
        basic = srv.seen[-1][1]
    assert bearer["Authorization"] == "Bearer s3cret-token" and bearer["X-Scope-OrgID"] == "team-a"
    assert basic["Authorization"] == "Basic cmVhZGVyOmZpbGUtcHc="  # reader:file-pw
    assert any("returned no series" in i.value for i in at.info)
    page = [x.value for x in (*at.caption, *at.info, *at.warning, *at.error, *at.code)]
    assert not any("s3cret" in x or "file-pw" in x for x in page)
    assert all("PROM_TOKEN" not in str(v) for v in at.query_params.values())


def test_credentials_need_a_listed_server(monkeypatch: pytest.MonkeyPatch) -> None:
    # Without [live] servers a visitor could send any of the app's variables to any server.
    monkeypatch.setenv("PROM_TOKEN", "s3cret-token")
    at = _data_page()
    _fill_pull(at, "http://127.0.0.1:9")
    at.radio(key="pull_auth").set_value("bearer").run()
    at.text_input(key="pull_token_env").set_value("PROM_TOKEN").run()
    assert any("only towards listed servers" in w.value for w in at.warning)
    assert at.button(key="pull_go").disabled


def test_a_secret_typed_as_a_variable_name_is_refused(tmp_path: Path) -> None:
    (tmp_path / "tidelens.toml").write_text('[live]\nservers = ["http://127.0.0.1:9"]\n')
    at = _data_page()
    _fill_pull(at, "http://127.0.0.1:9")
    at.radio(key="pull_auth").set_value("bearer").run()
    at.text_input(key="pull_token_env").set_value("eyJhbGciOiJIUzI1NiJ9.e30.abc").run()
    _no_exception(at)
    assert any("never the secret itself" in w.value for w in at.warning)
    assert at.button(key="pull_go").disabled
    at.text_input(key="pull_token_env").set_value("PROM_TOKEN").run()
    assert at.button(key="pull_go").disabled is False
    # The secret's name is never written to the page URL.
    assert all("PROM_TOKEN" not in str(v) for v in at.query_params.values())


def test_nvml_without_a_driver_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_pynvml(init_error=pynvml.NVMLError_LibraryNotFound)
    monkeypatch.setattr(nvml, "_nvml_module", lambda: fake)
    at = _data_page("nvml")
    infos = [i.value for i in at.info]
    assert any("no NVIDIA driver here" in i for i in infos), infos
    with pytest.raises(KeyError):
        at.button(key="nvml_go")


def test_nvml_on_this_machine_never_shows_a_traceback() -> None:
    ok, message = nvml.available()
    at = _data_page("nvml")
    if ok:
        assert any(message in x.value for x in at.success)
    else:
        assert any(message in i.value for i in at.info)


def test_nvml_collects_into_the_store(monkeypatch: pytest.MonkeyPatch, _isolated: Path) -> None:
    fake = fake_pynvml(gpus=2)
    monkeypatch.setattr(nvml, "_nvml_module", lambda: fake)
    at = _data_page("nvml")
    assert any("2 GPU(s), driver 575.57.08" in x.value for x in at.success)
    at.text_input(key="nvml_interval").set_value("100ms")
    at.text_input(key="nvml_duration").set_value("300ms").run()
    at.button(key="nvml_go").click().run()
    _no_exception(at)
    table = _table_with(at, "source", "status", "series", "samples")
    assert list(table["status"]) == ["loaded"]
    with Store(_isolated, read_only=True) as store:
        util = store.series(s.DCGM_GPU_UTIL)
        totals = store.totals()
    assert util.height == 2 and totals["samples"] > 0
    assert fake.state["init"] == 0  # NVML shut down again after sampling


def test_an_interrupted_pull_or_collection_says_what_was_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    # A click while a pull or a collection runs stops the script between two requests or
    # samples; the flag set before it started is still set on the next run.
    monkeypatch.setattr(nvml, "_nvml_module", lambda: fake_pynvml(gpus=1))
    at = _data_page()
    assert not any("stopped early" in w.value for w in at.warning)
    at.session_state["pull_running"] = True
    at.session_state["nvml_running"] = True
    at.run()
    stopped = [w.value for w in at.warning if "stopped early" in w.value]
    assert len(stopped) == 2 and any("pull again" in w for w in stopped)
    at.run()  # said once
    assert not any("stopped early" in w.value for w in at.warning)


def test_only_the_picked_tab_runs_and_typed_fields_survive_a_switch() -> None:
    at = _data_page("files")
    assert at.file_uploader(key="upload_files")
    with pytest.raises(KeyError):
        at.text_input(key="pull_url")
    at.session_state["data_add"] = TABS["pull"]
    at.run()
    at.text_input(key="pull_url").set_value("http://prometheus.internal:9090").run()
    with pytest.raises(KeyError):
        at.file_uploader(key="upload_files")
    for tab in ("nvml", "pull"):
        at.session_state["data_add"] = TABS[tab]
        at.run()
        _no_exception(at)
    assert at.text_input(key="pull_url").value == "http://prometheus.internal:9090"


def test_typed_fields_survive_a_visit_to_another_page() -> None:
    at = _data_page("pull")
    at.text_input(key="pull_url").set_value("http://prometheus.internal:9090").run()
    at.switch_page("pages/overview.py").run()
    at.switch_page("pages/data.py").run()
    _no_exception(at)
    assert at.session_state["data_add"] == TABS["pull"]  # the tab it had open
    assert at.text_input(key="pull_url").value == "http://prometheus.internal:9090"
