"""The pages' cache of heavy analytics calls: one shared object in memory, missed when the library
code it names changes. Below it, on disk, is the library's one result cache, which a restarted
server reads (tests/test_result_cache.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

import streamlit as st  # noqa: E402
from streamlit.runtime.caching import cache_data_api  # noqa: E402

import pages._caches as caches  # noqa: E402


def _restart() -> None:
    """What a restarted server loses: every in-memory cache (the disk files stay)."""
    st.cache_resource.clear()
    cache_data_api._data_caches._function_caches.clear()


@pytest.fixture
def heavy():
    calls: list[int] = []

    @caches.persisted("Working...")
    def heavy_call(n: int) -> dict[str, int]:
        calls.append(n)
        return {"n": n}

    yield heavy_call, calls
    _restart()


def test_one_shared_object_per_arguments(heavy) -> None:
    call, calls = heavy
    first = call(1)
    assert call(1) is first  # no copy per rerun
    assert call(2) == {"n": 2} and calls == [1, 2]


def test_changed_library_code_misses(heavy, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An edit to any module of the library misses, found by content (no hand-kept list of the
    modules a call reaches): a copy of the package stands in for it, and one definition in
    measures.py, which no list named, is edited."""
    import shutil

    import analytics.codeversion as codeversion

    call, calls = heavy
    copy = tmp_path / "analytics"
    shutil.copytree(codeversion.PACKAGE_ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(codeversion, "PACKAGE_ROOT", copy)
    call(4)
    call(4)
    assert calls == [4]
    measures = copy / "measures.py"
    measures.write_text(measures.read_text().replace("> float(slo_ms)", ">= float(slo_ms)", 1))
    monkeypatch.setattr(codeversion, "_WALKS", {})  # no need to wait out the 2 s walk memo
    call(4)
    assert calls == [4, 4]
