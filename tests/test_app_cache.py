"""The pages' cache of heavy analytics calls: one shared object in memory, kept on disk over a
server restart, and missed when the library code it names changes."""

from __future__ import annotations

from pathlib import Path

import pytest

import streamlit as st  # noqa: E402
from streamlit.runtime.caching import cache_data_api  # noqa: E402
from streamlit.runtime.caching.storage.local_disk_cache_storage import (  # noqa: E402
    LocalDiskCacheStorageManager)

import pages._caches as caches  # noqa: E402


def _restart() -> None:
    """What a restarted server loses: every in-memory cache (the disk files stay)."""
    st.cache_resource.clear()
    cache_data_api._data_caches._function_caches.clear()


@pytest.fixture
def heavy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("HOME", str(tmp_path))  # Streamlit's disk cache lives in ~/.streamlit
    # Outside `streamlit run` there is no runtime, and Streamlit would keep st.cache_data in
    # memory only; a server's runtime uses the local disk storage, as here.
    monkeypatch.setattr(cache_data_api._data_caches, "get_storage_manager",
                        LocalDiskCacheStorageManager)
    calls: list[int] = []

    @caches.persisted("Working...")
    def heavy_call(n: int) -> dict[str, int]:
        calls.append(n)
        return {"n": n}

    yield heavy_call, calls, tmp_path
    _restart()


def test_one_shared_object_per_arguments(heavy) -> None:
    call, calls, _ = heavy
    first = call(1)
    assert call(1) is first  # no copy per rerun
    assert call(2) == {"n": 2} and calls == [1, 2]


def test_a_restarted_server_reads_it_from_disk(heavy) -> None:
    call, calls, home = heavy
    first = call(3)
    assert list((home / ".streamlit" / "cache").glob("*.memo"))
    _restart()
    again = call(3)
    assert again == first and again is not first
    assert calls == [3]


def test_changed_library_code_misses(heavy, monkeypatch: pytest.MonkeyPatch) -> None:
    """An edit to any module of the library misses, found by content (no hand-kept list of the
    modules a call reaches): a copy of the package stands in for it, and one definition in
    measures.py, which no list named, is edited."""
    import shutil

    import analytics.codeversion as codeversion

    call, calls, home = heavy
    copy = home / "analytics"
    shutil.copytree(codeversion.PACKAGE_ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(codeversion, "PACKAGE_ROOT", copy)
    call(4)
    call(4)
    assert calls == [4]
    measures = copy / "measures.py"
    measures.write_text(measures.read_text().replace("> float(slo_ms)", ">= float(slo_ms)", 1))
    _restart()  # a restarted server: only the disk layer is left, keyed by the code
    monkeypatch.setattr(codeversion, "_WALKS", {})  # no need to wait out the 2 s walk memo
    call(4)
    assert calls == [4, 4]


def test_disk_files_are_bounded_per_function(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(cache_data_api._data_caches, "get_storage_manager",
                        LocalDiskCacheStorageManager)

    @caches.persisted("Working...", max_entries=3)
    def small(n: int) -> int:
        return n

    try:
        for n in range(8):
            assert small(n) == n
        files = list((tmp_path / ".streamlit" / "cache").glob("*.memo"))
        assert 1 <= len(files) <= 3, files
        assert small(7) == 7  # the newest still answers
    finally:
        _restart()
