"""The data folder: store paths from a link or the sidebar stay inside it (issue 16.7)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from analytics.data_dir import DATA_DIR_ENV, DEFAULT_DATA_DIR, confine_store_path, data_dir
from analytics.errors import ConfigError
from apptest_helpers import APP, isolate, outside_code, shown


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    d = tmp_path / "stores"
    d.mkdir()
    return d


def test_relative_and_absolute_paths_inside_are_accepted(folder: Path) -> None:
    (folder / "team").mkdir()
    assert confine_store_path("a.duckdb", folder) == (folder / "a.duckdb").resolve()
    assert confine_store_path("team/b.duckdb", folder) == (folder / "team" / "b.duckdb").resolve()
    assert confine_store_path(str(folder / "c.duckdb"), folder) == (folder / "c.duckdb").resolve()


@pytest.mark.parametrize("raw, words", [
    ("../x.duckdb", "outside the data folder"),
    ("team/../../x.duckdb", "outside the data folder"),
    ("/etc/tidelens.duckdb", "outside the data folder"),
    ("notes.txt", "does not end in .duckdb"),
    ("new/sub/x.duckdb", "does not exist"),
    ("a\x00.duckdb", "NUL byte"),
    ("a" * 5000 + ".duckdb", "'… (5,007 characters) is longer than the file system takes"),  # issue 50, 7
    ("/".join(["b" * 200] * 30) + ".duckdb", "is longer than the file system takes"),
    ("c" * 236 + ".duckdb", "leaving room for the files kept beside a store"),  # its .columns.toml: 256 bytes
])
def test_paths_outside_or_odd_are_refused_with_the_folder_named(folder: Path, raw: str,
                                                                words: str) -> None:
    with pytest.raises(ConfigError) as err:
        confine_store_path(raw, folder)
    assert words in str(err.value)
    assert str(folder.resolve()) in str(err.value) and "[app] data_dir" in str(err.value)
    assert not (folder / "new").exists()


def test_a_symlink_out_of_the_folder_is_refused(folder: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (folder / "link").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ConfigError, match="outside the data folder"):
        confine_store_path("link/x.duckdb", folder)


def test_data_dir_env_then_config_then_default(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    cfg = tmp_path / "tidelens.toml"
    assert data_dir(cfg) == DEFAULT_DATA_DIR.resolve()  # no file
    cfg.write_text('[app]\ndata_dir = "stores"\n')
    assert data_dir(cfg) == (tmp_path / "stores").resolve()  # relative to the config file
    cfg.write_text(f'[app]\ndata_dir = "{tmp_path / "abs"}"\n')
    assert data_dir(cfg) == (tmp_path / "abs").resolve()
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "env"))
    assert data_dir(cfg) == (tmp_path / "env").resolve()


def test_a_bad_data_dir_setting_names_the_file(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    cfg = tmp_path / "tidelens.toml"
    cfg.write_text("[app]\ndata_dir = 3\n")
    with pytest.raises(ConfigError, match=r"tidelens.toml: \[app\] data_dir must be"):
        data_dir(cfg)


def _page(monkeypatch, tmp_path: Path, page: str, db: str, **params: str) -> AppTest:
    isolate(monkeypatch, tmp_path)
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "stores"))
    (tmp_path / "stores").mkdir(exist_ok=True)
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.query_params.update({"source": "duckdb", "db": db, **params})
    at.run()
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_link_to_a_store_elsewhere_is_refused_and_creates_nothing(monkeypatch, tmp_path) -> None:
    target = tmp_path / "elsewhere" / "deep" / "x.duckdb"
    at = _page(monkeypatch, tmp_path, "pages/data.py", str(target))
    errors = " ".join(shown(e.value) for e in at.error)
    assert "outside the data folder" in errors and str((tmp_path / "stores").resolve()) in errors
    assert not (tmp_path / "elsewhere").exists()
    # No upload widget is offered for a refused target.
    assert not at.get("file_uploader")


def test_a_link_with_an_overlong_store_name_is_refused_in_words(monkeypatch, tmp_path) -> None:
    """Issue 50, 7: a 5,000-character ``?db=`` was ``[Errno 36] File name too long`` as an exception."""
    at = _page(monkeypatch, tmp_path, "pages/data.py", "x" * 5000 + ".duckdb")
    errors = " ".join(shown(e.value) for e in at.error)
    assert "is longer than the file system takes" in errors and "(5,007 characters)" in errors, errors
    assert len(errors) < 1000 and not at.get("file_uploader")


def test_overview_says_why_a_store_elsewhere_is_not_opened(monkeypatch, tmp_path) -> None:
    at = _page(monkeypatch, tmp_path, "pages/overview.py", "../../etc/x.duckdb")
    said = [shown(m.value) for m in (*at.info, *at.warning)]
    assert any("outside the data folder" in m for m in said), said


def test_a_hostile_link_setting_is_shown_as_text(monkeypatch, tmp_path) -> None:
    at = _page(monkeypatch, tmp_path, "pages/overview.py", "x.duckdb",
               step="![x](http://127.0.0.1:9/px.png)")
    raw = [w.value for w in at.warning]
    assert any("Link setting" in w for w in raw), raw
    assert not any("![x](" in outside_code(w) for w in raw), raw  # escaped, so never an image


def test_a_new_store_in_the_data_folder_takes_an_upload(monkeypatch, tmp_path, fixtures) -> None:
    from analytics.access import LOCAL_OPERATOR
    from pages._store import load_upload, upload_target
    from analytics.view import ViewSettings

    isolate(monkeypatch, tmp_path)
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "stores"))
    (tmp_path / "stores").mkdir()
    target = upload_target(ViewSettings(source="duckdb", db_path="team.duckdb"))
    assert target == (tmp_path / "stores" / "team.duckdb").resolve()
    sample = fixtures / "prom_query_range_up_201907281200.json"
    result = load_upload(target, sample.name, sample.read_bytes(), None, who=LOCAL_OPERATOR)
    assert result.status == "loaded", result
    assert target.exists()
