"""The app's store lock: sessions (and the prefetch) read one DuckDB file at the same time; an
upload writes alone, after the readers have closed, and loses nothing."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import pages._store as store_mod  # noqa: E402
from analytics.access import LOCAL_OPERATOR  # noqa: E402
from pages._store import StoreLock, open_store  # noqa: E402
from test_app_pages import build_store  # noqa: E402


def _in_thread(fn) -> threading.Thread:
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    return t


def test_readers_share_and_a_writer_waits_for_them() -> None:
    lock = StoreLock()
    release = threading.Event()
    held = [threading.Event(), threading.Event()]
    wrote = threading.Event()

    def reader(i: int) -> None:
        with lock.reading():
            held[i].set()
            release.wait(30)

    first = _in_thread(lambda: reader(0))
    assert held[0].wait(30)
    second = _in_thread(lambda: reader(1))  # another session, while the first still reads
    assert held[1].wait(10), "a second reader waited for the first"

    def writer() -> None:
        with lock.writing():
            wrote.set()

    w = _in_thread(writer)
    w.join(0.3)
    assert not wrote.is_set(), "a writer got in while readers held the store"
    release.set()
    for t in (first, second, w):
        t.join(10)
    assert wrote.is_set()


def test_a_writer_nests_reads_and_writes_then_lets_readers_in() -> None:
    lock = StoreLock()
    with lock.writing():
        with lock.reading(), lock.writing():
            pass
        blocked = threading.Event()
        r = _in_thread(lambda: (lock.reading().__enter__(), blocked.set()))
        r.join(0.3)
        assert not blocked.is_set(), "a reader got in during a write"
    r.join(10)
    assert blocked.is_set()


def test_a_waiting_writer_goes_before_new_readers() -> None:
    lock = StoreLock()
    events = {k: threading.Event() for k in ("a_in", "a_again", "a_go", "w_in", "b_in")}
    order: list[str] = []

    def reader_a() -> None:
        with lock.reading():
            events["a_in"].set()
            events["a_go"].wait(30)
            with lock.reading():  # its own read again, while the writer waits: no deadlock
                events["a_again"].set()

    def writer() -> None:
        with lock.writing():
            order.append("writer")
            events["w_in"].set()

    def reader_b() -> None:
        with lock.reading():
            order.append("reader b")
            events["b_in"].set()

    a = _in_thread(reader_a)
    assert events["a_in"].wait(30)
    w = _in_thread(writer)
    w.join(0.3)
    b = _in_thread(reader_b)  # a new session arrives while the upload waits
    b.join(0.3)
    assert not events["b_in"].is_set(), "a new reader overtook the waiting writer"
    events["a_go"].set()
    for t in (a, w, b):
        t.join(10)
    assert events["a_again"].is_set() and order == ["writer", "reader b"]


def test_a_write_inside_a_read_is_refused() -> None:
    lock = StoreLock()
    with lock.reading():
        with pytest.raises(RuntimeError, match="close it before writing"):
            with lock.writing():
                pass
    with lock.writing():  # and the lock is still usable
        pass


def test_two_sessions_read_one_file_at_once_then_an_upload_writes(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_mod, "_STORE_LOCK", StoreLock())
    db = build_store(tmp_path / "hour.duckdb")
    inside, done = threading.Event(), threading.Event()
    counts: list[tuple[str, int]] = []

    def session_a() -> None:
        with open_store(db) as store:
            inside.set()
            done.wait(10)  # a lock that serialised sessions would hold B out until this ends
            counts.append(("A", store.totals()["series"]))

    a = _in_thread(session_a)
    assert inside.wait(30)
    with open_store(db) as store:  # session B, while A still has the file open
        counts.append(("B", store.totals()["series"]))
    done.set()
    a.join(30)
    assert [who for who, _ in counts] == ["B", "A"]
    before = counts[0][1]
    assert before > 0 and counts[1][1] == before
    outcome = store_mod.load_upload(db, "malformed.prom", b'DCGM_FI_DEV_GPU_UTIL{gpu="0" 1\n', None,
                                    who=LOCAL_OPERATOR)
    assert outcome.status == "failed" and "malformed.prom" in outcome.message
    with open_store(db) as store:
        assert store.totals()["series"] == before
