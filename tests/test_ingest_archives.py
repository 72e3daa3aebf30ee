"""Archives (issue 44, deliverable 2): ``.tar``, ``.tar.gz`` and ``.zip`` read member by member,
each member a source ``archive!member``, through the CLI and the Data page's upload; macOS
metadata skipped and counted; links and devices skipped with a note; a nested archive refused;
a zip or tar bomb refused under gzip's limits; nothing ever written to disk; a re-load a no-op."""

from __future__ import annotations

import gzip
import io
import json
import os
import stat
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from analytics.ingest import ingest_path
from analytics.ingest.archives import zip_entries
from analytics.store import TIME_WINDOW_ENV, Store
from analytics.access import LOCAL_OPERATOR
from pages._store import load_uploads

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def default_window(monkeypatch):
    monkeypatch.delenv(TIME_WINDOW_ENV, raising=False)


def _prom(job: str) -> bytes:
    return (f'# TYPE up gauge\nup{{job="{job}"}} 1 1780000000000\nup{{job="{job}"}} 1 1780000060000\n').encode()


def _tar(members: dict[str, bytes], gz: bool = True, extra: list[tarfile.TarInfo] = ()) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if gz else "w") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 1_780_000_000
            tf.addfile(info, io.BytesIO(data))
        for info in extra:
            tf.addfile(info)
    return buf.getvalue()


def _zip(members: dict[str, bytes], links: dict[str, str] = {}) -> bytes:  # noqa: B006 - never mutated
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        for name, target in links.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, target)
    return buf.getvalue()


def _cli(db: Path, *paths: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(TIME_WINDOW_ENV, None)
    out = subprocess.run([sys.executable, "-m", "analytics", "ingest", "--db", str(db), "--json", *map(str, paths)],
                         capture_output=True, text=True, env=env, cwd=db.parent)
    assert "Traceback" not in out.stderr, out.stderr
    return json.loads(out.stdout)


def _state(db: Path) -> tuple:
    with Store(db, read_only=True) as store:
        t = store.totals()
        return t["samples"], t["series"], store.sources().height


def test_tar_gz_through_the_cli_each_member_a_source_macos_and_links_skipped_reload_changes_nothing(tmp_path):
    link = tarfile.TarInfo("data/link.prom")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    dev = tarfile.TarInfo("data/null")
    dev.type = tarfile.CHRTYPE
    archive = tmp_path / "export.tar.gz"
    archive.write_bytes(_tar({"data/a.prom": _prom("a"), "data/b.prom": _prom("b"),
                              "data/._a.prom": b"\x00\x05\x16\x07 mac", "__MACOSX/data/._b.prom": b"mac",
                              "data/README.md": b"# notes"}, extra=[link, dev]))
    db = tmp_path / "t.duckdb"
    out = _cli(db, archive)
    by = {s["name"]: s for s in out["sources"]}
    assert by[f"{archive}!data/a.prom"]["status"] == "loaded" and by[f"{archive}!data/b.prom"]["status"] == "loaded"
    assert out["samples"] == 4 and out["series"] == 2
    assert "2 macOS metadata member(s) skipped" in by[str(archive)]["note"]
    assert "a symbolic link" in by[f"{archive}!data/link.prom"]["note"]
    assert "a device" in by[f"{archive}!data/null"]["note"]
    assert by[f"{archive}!data/README.md"]["status"] == "skipped"
    assert not any(s["status"] == "failed" for s in out["sources"]), out
    before = _state(db)
    again = _cli(db, archive)
    assert {s["status"] for s in again["sources"]} == {"skipped"} and _state(db) == before


def test_zip_through_the_upload_names_each_member_and_writes_nothing_to_disk(tmp_path):
    from pages._store import load_upload, load_uploads

    work = tmp_path / "work"
    work.mkdir()
    data = _zip({"m/a.prom": _prom("a"), "../../escape.prom": _prom("b"), "._a.prom": b"mac"},
                links={"m/passwd.prom": "/etc/passwd"})
    outs = load_uploads(work / "u.duckdb", "export.zip", data, None, who=LOCAL_OPERATOR)
    by = {o.file: o for o in outs}
    assert by["export.zip!m/a.prom"].status == "loaded" and by["export.zip!../../escape.prom"].status == "loaded"
    assert "1 macOS metadata member(s)" in by["export.zip"].message
    link = by["export.zip!m/passwd.prom"]
    assert link.status == "skipped" and "a symbolic link" in link.message
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file() and "duckdb" not in p.name) == []
    # the one-outcome form (the mapping form's) sums the members; a re-load is all skipped
    again = load_upload(work / "u.duckdb", "export.zip", data, None, who=LOCAL_OPERATOR)
    assert again.status == "skipped" and again.samples == 0, again


def test_a_member_that_fails_is_named_archive_bang_member_with_its_line_and_the_others_load(tmp_path):
    from pages._store import load_uploads

    bad = b'# TYPE up gauge\nup{job="x" 1 1780000000000\n'
    outs = load_uploads(tmp_path / "u.duckdb", "x.tar", _tar({"ok.prom": _prom("a"), "bad.prom": bad}, gz=False),
                        None, who=LOCAL_OPERATOR)
    by = {o.file: o for o in outs}
    assert by["x.tar!ok.prom"].status == "loaded"
    assert by["x.tar!bad.prom"].status == "failed" and by["x.tar!bad.prom"].message.startswith("x.tar!bad.prom:2")


def test_zip_bomb_is_refused_naming_the_member_and_the_store_is_unchanged(tmp_path):
    from pages._store import load_uploads

    db = tmp_path / "u.duckdb"
    load_uploads(db, "good.prom", _prom("good"), None, who=LOCAL_OPERATOR)
    before = _state(db)
    bomb = _zip({"zeros.prom": b"0" * (8 << 20)})  # ~8 KB of deflate for 8 MiB: ~1000x, over 200x
    [out] = load_uploads(db, "bomb.zip", bomb, None, who=LOCAL_OPERATOR)
    assert out.status == "failed" and out.file == "bomb.zip!zeros.prom", out
    assert "decompression bomb" in out.message and out.message.startswith("bomb.zip!zeros.prom:")
    assert _state(db)[:2] == before[:2]


def test_tar_gz_bomb_is_refused_by_the_whole_stream_ratio(tmp_path):
    archive = tmp_path / "bomb.tar.gz"
    archive.write_bytes(_tar({"ok.prom": _prom("a"), "zeros.prom": b"0" * (8 << 20)}))
    out = _cli(tmp_path / "t.duckdb", archive)
    failed = [s for s in out["sources"] if s["status"] == "failed"]
    assert len(failed) == 1 and "decompression bomb" in failed[0]["error"], out
    assert failed[0]["name"] == f"{archive}!zeros.prom"


def test_a_nested_archive_is_refused_one_level_only(tmp_path):
    from pages._store import load_uploads

    inner = _tar({"a.prom": _prom("a")})
    outs = load_uploads(tmp_path / "u.duckdb", "outer.zip", _zip({"inner.tar.gz": inner, "b.prom": _prom("b")}),
                        None, who=LOCAL_OPERATOR)
    by = {o.file: o for o in outs}
    assert by["outer.zip!inner.tar.gz"].status == "failed"
    assert "an archive inside an archive is not opened" in by["outer.zip!inner.tar.gz"].message
    assert by["outer.zip!b.prom"].status == "loaded"


def test_a_truncated_archive_fails_naming_it_keeping_what_it_read(tmp_path):
    archive = tmp_path / "cut.tar.gz"
    whole = _tar({"a.prom": _prom("a"), "b.prom": _prom("b") * 2000})
    archive.write_bytes(whole[: len(whole) - 200])
    out = _cli(tmp_path / "t.duckdb", archive)
    failed = [s for s in out["sources"] if s["status"] == "failed"]
    assert failed and "corrupt or truncated" in failed[-1]["error"] and str(archive) in failed[-1]["error"], out


def test_a_plain_gzip_csv_is_still_one_source(tmp_path):
    from pages._store import load_uploads

    [out] = load_uploads(tmp_path / "u.duckdb", "a.prom.gz", gzip.compress(_prom("a")), None, who=LOCAL_OPERATOR)
    assert out.file == "a.prom.gz" and out.status == "loaded"


# -- issue 50, deliverable 6: entries counted, names in any bytes (the 1 GiB sparse member: the big
# cases of tests/test_hostile_doors.py) --

def test_a_zip_past_the_entry_limit_is_refused_on_its_directory_before_any_member(tmp_path, monkeypatch):
    monkeypatch.setenv("TIDELENS_MAX_ARCHIVE_MEMBERS", "3")
    db = tmp_path / "u.duckdb"
    outs = load_uploads(db, "three.zip", _zip({f"m{i}.prom": _prom(f"m{i}") for i in range(3)}), None, who=LOCAL_OPERATOR)
    assert [o.status for o in outs] == ["loaded"] * 3, outs
    before = _state(db)
    [out] = load_uploads(db, "many.zip", _zip({f"n{i}.prom": _prom(f"n{i}") for i in range(4)}), None, who=LOCAL_OPERATOR)
    assert out.status == "failed" and out.file == "many.zip", out
    assert "more than 3 entries" in out.message and "TIDELENS_MAX_ARCHIVE_MEMBERS" in out.message, out
    assert "before any member is read" in out.message
    assert _state(db) == before  # no member loaded, not even the first


def test_a_tar_past_the_entry_limit_stops_at_the_entry_past_it(tmp_path, monkeypatch):
    monkeypatch.setenv("TIDELENS_MAX_ARCHIVE_MEMBERS", "3")
    outs = load_uploads(tmp_path / "u.duckdb", "many.tar",
                        _tar({f"m{i}.prom": _prom(f"m{i}") for i in range(5)}, gz=False), None, who=LOCAL_OPERATOR)
    assert [o.status for o in outs] == ["loaded"] * 3 + ["failed"], outs
    assert "more than 3 entries" in outs[-1].message and "the members before it stay loaded" in outs[-1].message


def _zip64_lying_and_prefixed(monkeypatch) -> dict[str, bytes]:
    """Zips whose directory a naive reader would miscount: a comment after the end record, bytes
    before the archive (a self-extractor), a zip64 end record, an end record claiming 1 entry."""
    members = {f"d/m{i}.prom": _prom(f"m{i}") for i in range(9)}
    plain = _zip(members)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.comment = b"a comment after the end record"
        for k, v in members.items():
            zf.writestr(k, v)
    commented = buf.getvalue()
    with monkeypatch.context() as m:
        m.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 4)  # past it, zipfile writes the zip64 end records
        zip64 = _zip(members)
    assert b"PK\x06\x06" in zip64 and b"PK\x06\x06" not in plain
    at = plain.rfind(b"PK\x05\x06")
    lying = plain[:at + 8] + (1).to_bytes(2, "little") * 2 + plain[at + 12:]  # entries: 1 (this disk, total)
    return {"plain": plain, "commented": commented, "zip64": zip64, "prefixed": b"#!/bin/sh\nexit 0\n" + plain,
            "lying": lying, "empty": _zip({})}


def test_the_zip_entry_count_walks_the_directory_as_zipfile_does(monkeypatch):
    for kind, data in _zip64_lying_and_prefixed(monkeypatch).items():
        raw = io.BytesIO(data)
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            expected = len(zf.infolist())
        assert zip_entries(raw, 10**6) == expected, kind
        assert raw.tell() == 0
        assert zip_entries(raw, 3) == min(expected, 4), kind  # stops one past the most asked for


def test_member_and_file_names_in_any_bytes_load_or_are_refused_in_words(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT, encoding="latin-1") as tf:
        info = tarfile.TarInfo("caf\xe9.prom")  # written as the byte 0xe9: not UTF-8
        info.size = len(_prom("tar"))
        tf.addfile(info, io.BytesIO(_prom("tar")))
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "latin.tar").write_bytes(buf.getvalue())
    with open(os.path.join(os.fsencode(folder), b"na\xefve.prom"), "wb") as fh:  # a file name not UTF-8
        fh.write(_prom("file"))
    with Store(tmp_path / "t.duckdb") as st:
        by = {r.name: r for r in ingest_path(st, folder)}
        assert by[f"{folder}/latin.tar!caf\\xe9.prom"].status == "loaded", by
        assert by[f"{folder}/na\\xefve.prom"].status == "loaded", by
        names = set(st.sources()["name"])
    assert {f"{folder}/latin.tar!caf\\xe9.prom", f"{folder}/na\\xefve.prom"} <= names
    # a zip that flags a name as UTF-8 when it is not: zipfile cannot read its directory
    data = bytearray(_zip({"cafX.prom": _prom("zip")}).replace(b"cafX", b"caf\xe9"))
    for sig, flags_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        i = data.find(sig) + flags_at
        data[i:i + 2] = (int.from_bytes(data[i:i + 2], "little") | 0x800).to_bytes(2, "little")
    [out] = load_uploads(tmp_path / "u.duckdb", "names.zip", bytes(data), None, who=LOCAL_OPERATOR)
    assert out.status == "failed" and "a member's name is flagged UTF-8 but is not" in out.message, out
