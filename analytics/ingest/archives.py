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
members each at most that ratio of their compressed size; the members of either, all together, at
most that ratio of the archive's size. Members are counted in the bytes they unpack to, never in
what a header claims: a tar's sparse member (a 10 KB tar can hold a 1 GiB one, holes unpacking to
zeros) is refused as it unpacks, after a bounded read, naming the member. An archive holds at most
``max_archive_members`` entries: a zip's are counted on its central directory, walked as
:class:`zipfile.ZipFile` walks it, before any member is read or any :class:`~zipfile.ZipInfo` built
(a 1 GB upload of empty members would be 14 million of them); a tar has no directory, so its
entries are counted as they stream, and the members before the one past the limit stay loaded.

A member's name is any bytes: one that is not UTF-8 keeps its other characters and shows each
such byte as ``\\xNN`` (:func:`~analytics.ingest.sources.source_name`); a zip that flags a name as
UTF-8 when it is not is refused in words.
"""

from __future__ import annotations

import calendar
import gzip
import io
import stat
import struct
import tarfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

from analytics.errors import IngestError
from analytics.ingest.sources import BoundedReader, gunzip, is_gzip, not_data_reason, open_fileobj, source_name
from analytics.limits import IngestLimits

ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
# A central directory entry's name, extra and comment lengths (three uint16 at this offset), and the
# zip64 end record and locator that sit between the directory and the end record zipfile reports.
_CD_NAME_LENGTH_AT = 28
_ZIP64_END_BYTES = 56 + 20
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
    except UnicodeDecodeError as exc:  # zipfile decodes a name flagged UTF-8 strictly
        raise IngestError(name, f"a member's name is flagged UTF-8 but is not ({exc.reason} at byte {exc.start} "
                          "of the name); re-create the zip (without the flag, or with the names in UTF-8)") from None


def _members_budget(size: int, limits: IngestLimits) -> tuple[int, str]:
    """The bytes an archive of ``size`` bytes may unpack to, all members together, and why."""
    return limits.decompressed_cap(size), (
        f"an archive of {size:,} bytes; its members together at most {limits.max_gzip_ratio}x that "
        f"(TIDELENS_MAX_GZIP_RATIO), counted in the bytes they unpack to, and at most "
        f"{limits.max_decompressed_bytes:,}")


def _too_many(limit: int, after: str) -> str:
    return (f"more than {limit:,} entries (files, folders and links) in one archive: refused {after}; "
            "each member is a source of its own, so split the archive, load the unpacked folder with "
            "`tidelens ingest`, or raise TIDELENS_MAX_ARCHIVE_MEMBERS")


def zip_entries(raw: BinaryIO, most: int) -> int:
    """The entries of the zip ``raw``'s central directory, counted up to ``most + 1``.

    The directory is walked as :class:`zipfile.ZipFile` walks it (header by header through the
    directory's size: the count its end record claims is not what the library reads), seeking past
    each name, so the cost is ``most`` small reads whatever the archive holds. ``raw`` is left at 0.
    A directory that is not well formed counts what was read before the fault: opening the zip
    then says what is wrong.
    """
    try:
        # the library's own reader of the end record (zip64 and a trailing comment included)
        end = zipfile._EndRecData(raw)  # type: ignore[attr-defined]
        if end is None:
            return 0
        size_cd = end[5]
        start = end[9] - size_cd - (_ZIP64_END_BYTES if end[0] == zipfile.stringEndArchive64 else 0)
        if start < 0:
            return 0
        raw.seek(start)
        n = total = 0
        while total < size_cd and n <= most:
            head = raw.read(zipfile.sizeCentralDir)
            if len(head) != zipfile.sizeCentralDir or head[:4] != zipfile.stringCentralDir:
                break
            name_len, extra_len, comment_len = struct.unpack_from("<3H", head, _CD_NAME_LENGTH_AT)
            raw.seek(name_len + extra_len + comment_len, io.SEEK_CUR)
            total += zipfile.sizeCentralDir + name_len + extra_len + comment_len
            n += 1
        return n
    finally:
        raw.seek(0)


def _tar_members(name: str, raw: BinaryIO, size: int, limits: IngestLimits) -> Iterator[Member]:
    # The whole stream is bounded as one gzip is: the ratio and the cap hold across members. The
    # members' own bytes are bounded too, as they unpack: a sparse member's holes cost no stream.
    budget, why = _members_budget(size, limits)
    with open_fileobj(raw, name, size, limits) as reader:
        with tarfile.open(fileobj=reader, mode="r|") as tf:  # type: ignore[call-overload]
            for entries, info in enumerate(tf, start=1):
                if entries > limits.max_archive_members:
                    raise IngestError(name, _too_many(limits.max_archive_members,
                                                      "at the entry past it (a tar is counted as it is read: "
                                                      "the members before it stay loaded)"))
                if info.isdir():
                    continue
                member = f"{name}!{source_name(info.name)}"
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
                        data = BoundedReader(fh, member, budget, why).read()  # type: ignore[arg-type]
                    except IngestError as exc:  # the stream's bound, met inside this member
                        raise IngestError(member, exc.message) from None
                    budget -= len(data)
                    yield Member(member, data, int(info.mtime * 1000) if info.mtime > 0 else None)


def _zip_members(name: str, raw: BinaryIO, size: int, limits: IngestLimits) -> Iterator[Member]:
    budget, _ = _members_budget(size, limits)  # every member together, as one gzip of this size
    entries = zip_entries(raw, limits.max_archive_members)
    if entries > limits.max_archive_members:
        raise IngestError(name, _too_many(limits.max_archive_members,
                                          "before any member is read (counted on its directory)"))
    with zipfile.ZipFile(raw) as zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            member = f"{name}!{source_name(info.filename)}"
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

    kind = bytes_kind(data, name)
    if kind is None:
        return name, gunzip(name, data)
    for m in iter_members(name, io.BytesIO(data), len(data), kind):
        if m.data is not None and not_data_reason(Path(m.name.split("!", 1)[1])) is None:
            return m.name, gunzip(m.name, m.data)
    raise IngestError(name, f"no table inside this {kind} archive")
