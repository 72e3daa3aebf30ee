"""Archives: ``.tar``, ``.tar.gz``/``.tgz`` and ``.zip`` read member by member, in memory.

Each regular member becomes its own source, named ``archive!member``, so that its errors, its
``sources`` row and its content hash are its own (re-loading the archive skips every member
already loaded). Nothing is ever extracted to disk: a member named ``../../etc/x`` is only a name.

What is not loaded, and why:

- macOS metadata (``._*`` members and anything under ``__MACOSX/``): skipped and counted;
- links, devices and FIFOs in a tar, links in a zip: skipped, each with a note;
- an archive inside an archive: refused (one level only; unpack it and load the inner one);
- an encrypted zip member: refused.

The limits are gzip's (:mod:`analytics.limits`): a tar's whole decompressed stream at most
``max_gzip_ratio`` times the compressed archive and at most ``max_decompressed_bytes``; a zip's
members each at most that ratio of their compressed size, and all together at most that ratio of
the archive's size, so a zip bomb is refused after a bounded read, naming the member.
"""

from __future__ import annotations

import calendar
import gzip
import io
import stat
import tarfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

from analytics.errors import IngestError
from analytics.ingest.sources import BoundedReader, is_gzip, open_fileobj
from analytics.limits import IngestLimits

ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
TAR_SUFFIXES = (".tar", ".tgz", ".tar.gz")
MACOS = "macOS metadata"
NESTED = ("an archive inside an archive is not opened (Tidelens reads one level): unpack the outer "
          "archive and load this one")


@dataclass(frozen=True)
class Member:
    """One member of an archive: its source name, its bytes, or why it is not loaded."""

    name: str  # archive!member
    data: bytes | None = None
    mtime_ms: int | None = None
    skip: str | None = None


def archive_kind(head: bytes, name: str | Path = "") -> str | None:
    """``"zip"``, ``"tar"`` or None, from the first (decompressed) bytes of a source.

    A tar is known by its ``ustar`` magic; an old-style tar without it by its name and a header
    whose checksum holds.

    >>> archive_kind(b"PK\\x03\\x04...."), archive_kind(b"time,value\\n1,2\\n", "x.csv")
    ('zip', None)
    """
    if head[:4] in ZIP_MAGICS:
        return "zip"
    if head[257:262] == b"ustar":
        return "tar"
    if str(name).lower().endswith(TAR_SUFFIXES) and len(head) >= 512:
        try:
            tarfile.TarInfo.frombuf(head[:512], "utf-8", "surrogateescape")
        except tarfile.HeaderError:
            return None
        return "tar"
    return None


def bytes_kind(data: bytes, name: str | Path = "") -> str | None:
    """:func:`archive_kind` of bytes that may be gzip (only their first KiB is decompressed)."""
    head = data[:1024]
    if is_gzip(data):
        try:
            head = gzip.GzipFile(fileobj=io.BytesIO(data)).read(1024)
        except (OSError, EOFError, zlib.error):
            return None  # a broken gzip: the ordinary reader says so
    name = str(name)
    return archive_kind(head, name[:-3] if name.lower().endswith(".gz") else name)


def _macos(member: str) -> bool:
    parts = member.replace("\\", "/").split("/")
    return parts[0] == "__MACOSX" or parts[-1].startswith("._")


def iter_members(name: str, raw: BinaryIO, size: int, kind: str,
                 limits: IngestLimits | None = None) -> Iterator[Member]:
    """Every file member of the archive ``raw`` (``size`` bytes as stored) as a :class:`Member`.

    Raises
    ------
    IngestError
        The archive is corrupt or truncated, or a member breaks the limits (named
        ``archive!member``); the members yielded before it stay yielded.
    """
    limits = limits or IngestLimits.from_env()
    members = _tar_members if kind == "tar" else _zip_members
    try:
        yield from members(name, raw, size, limits)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error, OSError) as exc:
        raise IngestError(name, f"corrupt or truncated {kind} archive ({exc}); re-create it, or unpack it "
                          "and load the files") from None


def _tar_members(name: str, raw: BinaryIO, size: int, limits: IngestLimits) -> Iterator[Member]:
    # The whole stream is bounded as one gzip is: the ratio and the cap hold across members.
    with open_fileobj(raw, name, size, limits) as reader:
        with tarfile.open(fileobj=reader, mode="r|") as tf:  # type: ignore[call-overload]
            for info in tf:
                if info.isdir():
                    continue
                member = f"{name}!{info.name}"
                if _macos(info.name):
                    yield Member(member, skip=MACOS)
                elif not info.isfile():
                    what = ("a symbolic link" if info.issym() else "a hard link" if info.islnk()
                            else "a device" if info.ischr() or info.isblk() else "a FIFO" if info.isfifo()
                            else "not a regular file")
                    yield Member(member, skip=f"{what} in the archive; skipped (only regular files are read)")
                else:
                    fh = tf.extractfile(info)
                    assert fh is not None  # a regular file always has one
                    try:
                        data = fh.read()
                    except IngestError as exc:
                        raise IngestError(member, exc.message) from None
                    yield Member(member, data, int(info.mtime * 1000) if info.mtime > 0 else None)


def _zip_members(name: str, raw: BinaryIO, size: int, limits: IngestLimits) -> Iterator[Member]:
    budget = limits.decompressed_cap(size)  # every member together, as one gzip of this size
    with zipfile.ZipFile(raw) as zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            member = f"{name}!{info.filename}"
            mode = info.external_attr >> 16
            if _macos(info.filename):
                yield Member(member, skip=MACOS)
                continue
            if stat.S_IFMT(mode) and not stat.S_ISREG(mode):
                what = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
                yield Member(member, skip=f"{what} in the archive; skipped (only regular files are read)")
                continue
            if info.flag_bits & 0x1:
                raise IngestError(member, "an encrypted member; unpack it with its password and load the file")
            cap = min(budget, limits.decompressed_cap(info.compress_size))
            why = (f"{info.compress_size:,} compressed bytes; at most {limits.max_gzip_ratio}x that, and the "
                   f"archive's members at most {limits.decompressed_cap(size):,} together")
            try:
                with zf.open(info) as fh:
                    data = BoundedReader(fh, member, cap, why).read()  # type: ignore[arg-type]
            except NotImplementedError as exc:  # a compression method zipfile has not (deflate64, ...)
                raise IngestError(member, f"cannot read this member ({exc}); re-create the zip with "
                                  "ordinary deflate") from None
            except (zipfile.BadZipFile, EOFError, zlib.error) as exc:
                raise IngestError(member, f"corrupt member ({exc}); re-create the zip") from None
            budget -= len(data)
            y, mo, d, h, mi, s = info.date_time
            yield Member(member, data, calendar.timegm((y, mo, d, h, mi, s)) * 1000 if y > 1980 else None)


def table_bytes(name: str, data: bytes) -> tuple[str, bytes]:
    """``(source, bytes)`` of the table an upload holds, for a preview: its first data member if it
    is an archive (``archive!member``), else its own bytes; gunzipped either way."""
    from analytics.ingest import not_data_reason
    from analytics.ingest.sources import gunzip

    kind = bytes_kind(data, name)
    if kind is None:
        return name, gunzip(name, data)
    for m in iter_members(name, io.BytesIO(data), len(data), kind):
        if m.data is not None and not_data_reason(Path(m.name.split("!", 1)[1])) is None:
            return m.name, gunzip(m.name, m.data)
    raise IngestError(name, f"no table inside this {kind} archive")
