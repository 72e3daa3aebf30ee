"""Reading source bytes: files, folders, gzip, content hashes and newline-aligned chunks.

Everything a parser sees is the *decompressed* content; the content hash that makes a re-load a
no-op is taken over those bytes, so the same data gzip-compressed or not is the same source.
Large text sources are never held whole: :func:`iter_chunks` streams them in pieces that end
on a line boundary.
"""

from __future__ import annotations

import gzip
import io
import re
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

from analytics.errors import IngestError
from analytics.limits import IngestLimits
from analytics.store import ContentHasher

GZIP_MAGIC = b"\x1f\x8b"
# Big enough to amortise per-chunk work; below glibc's 32 MB mmap ceiling, so each chunk's buffer
# reuses freed heap instead of page-faulting fresh memory (1.5 GB read: 0.3 CPU-s at 8 MB, 1.8 at 32 MB).
CHUNK_BYTES = 8 << 20
PEEK_BYTES = 1 << 20



def _read_error(source: str | Path, exc: BaseException) -> IngestError:
    """One message for a file that cannot be read, whether it came as a path or as an upload."""
    if isinstance(exc, (EOFError, zlib.error)) or "gzip" in str(exc).lower():
        return IngestError(source, f"corrupt or truncated gzip data ({exc}); re-export or "
                           "re-compress the file")
    return IngestError(source, f"cannot read: {exc}")

# A name decoded with Python's "surrogateescape" (file names, tar members) holds each byte that
# was not UTF-8 as a lone surrogate, which no UTF-8 text (DuckDB, a terminal, JSON) can carry.
_SURROGATES = re.compile("[\ud800-\udfff]")


def source_name(name: str) -> str:
    r"""``name`` (a file's or an archive member's) with each byte that was not UTF-8 written ``\xNN``.

    A name in any bytes then loads, and reads the same in the store, a message and a terminal.

    >>> source_name("caf\udce9.prom"), source_name("ok.prom")
    ('caf\\xe9.prom', 'ok.prom')
    """
    if not _SURROGATES.search(name):
        return name
    return _SURROGATES.sub(lambda m: "".join(f"\\x{b:02x}" for b in m.group().encode(
        "utf-8", "surrogateescape" if "\udc80" <= m.group() <= "\udcff" else "surrogatepass")), name)


def is_gzip(head: bytes) -> bool:
    """True when ``head`` starts with the gzip magic number."""
    return head[:2] == GZIP_MAGIC


# Decompressed bytes a gzip may give before its running ratio is judged (a header of repeated
# comments compresses far better than the samples after it).
RATIO_SLACK_BYTES = 64 << 20


class BoundedReader:
    """A binary stream that refuses to give more than ``cap`` bytes (a decompression bomb).

    With ``consumed`` (the compressed bytes read so far) and ``ratio``, it also refuses as soon as
    the output runs ahead of ``ratio`` times the input (past :data:`RATIO_SLACK_BYTES`): a bomb
    is then stopped after tens of megabytes, not at the whole file's cap (a 24 MB gzip of
    valid lines was read 5 GB deep, 47 s and 5.7 GB of memory, before this check).
    """

    def __init__(self, raw: BinaryIO, name: str | Path, cap: int, why: str,
                 consumed: Callable[[], int] | None = None, ratio: int | None = None,
                 also_close: BinaryIO | None = None) -> None:
        self.raw, self.name, self.cap, self.why, self.read_bytes = raw, name, cap, why, 0
        self.consumed, self.ratio, self.also_close = consumed, ratio, also_close

    def _count(self, block: bytes) -> bytes:
        self.read_bytes += len(block)
        if self.read_bytes > self.cap:
            raise IngestError(self.name, f"more than {self.cap:,} bytes once decompressed ({self.why}); refused as "
                              "a likely decompression bomb: split the export, or raise the limit")
        if self.consumed is not None and self.ratio and self.read_bytes > RATIO_SLACK_BYTES:
            used = max(1, self.consumed())
            if self.read_bytes > self.ratio * used:
                raise IngestError(self.name, f"{used:,} bytes of gzip gave {self.read_bytes:,} bytes, more than "
                                  f"{self.ratio}x; refused as a likely decompression bomb: split the "
                                  "export, or raise TIDELENS_MAX_GZIP_RATIO")
        return block

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:  # all of it, in blocks, so that each block is judged as it comes
            out = io.BytesIO()
            while block := self.read(min(CHUNK_BYTES, self.cap + 1 - self.read_bytes)):
                out.write(block)
            return out.getvalue()
        return self._count(self.raw.read(n))

    def readline(self, limit: int = -1) -> bytes:
        return self._count(self.raw.readline(limit))

    def __enter__(self) -> "BoundedReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.raw.close()
        if self.also_close is not None:  # GzipFile(fileobj=...) leaves the file it reads open
            self.also_close.close()


def open_binary(path: Path, limits: IngestLimits | None = None) -> BoundedReader:
    """Open ``path`` for reading its decompressed bytes (gzip detected from content), bounded by
    ``limits`` (:class:`~analytics.ingest.limits.IngestLimits`: a gzip at most ``max_gzip_ratio``
    times its size, anything at most ``max_decompressed_bytes``)."""
    return open_fileobj(open(path, "rb"), path, path.stat().st_size, limits)


def open_fileobj(raw: BinaryIO, name: str | Path, size: int, limits: IngestLimits | None = None) -> BoundedReader:
    """Like :func:`open_binary` over an open binary stream of ``size`` bytes (an upload in memory);
    the returned reader closes ``raw``."""
    limits = limits or IngestLimits.from_env()
    head = raw.read(2)
    raw.seek(0)
    if is_gzip(head):
        return BoundedReader(gzip.GzipFile(fileobj=raw, mode="rb"), name,  # type: ignore[arg-type]
                             limits.decompressed_cap(size),
                             f"{size:,} bytes of gzip; at most {limits.max_gzip_ratio}x that, and at most "
                             f"{limits.max_decompressed_bytes:,}", consumed=raw.tell, ratio=limits.max_gzip_ratio,
                             also_close=raw)
    return BoundedReader(raw, name, limits.max_decompressed_bytes,
                         f"at most {limits.max_decompressed_bytes:,} bytes a source")


def gunzip(name: str, data: bytes, limits: IngestLimits | None = None) -> bytes:
    """Decompress ``data`` if it is gzip (bounded like :func:`open_binary`), else return it unchanged."""
    if not is_gzip(data):
        return data
    limits = limits or IngestLimits.from_env()
    cap = limits.decompressed_cap(len(data))
    out = io.BytesIO()
    try:
        raw = io.BytesIO(data)
        with BoundedReader(gzip.GzipFile(fileobj=raw), name, cap,  # type: ignore[arg-type]
                           f"{len(data):,} bytes of gzip; at most {limits.max_gzip_ratio}x that, and at most "
                           f"{limits.max_decompressed_bytes:,}", consumed=raw.tell,
                           ratio=limits.max_gzip_ratio) as fh:
            while block := fh.read(CHUNK_BYTES):
                out.write(block)
    except (OSError, EOFError, zlib.error) as exc:
        raise _read_error(name, exc) from exc
    return out.getvalue()


def read_path(path: Path) -> bytes:
    """The whole decompressed content of ``path``."""
    try:
        with open_binary(path) as fh:
            return fh.read()
    except (OSError, EOFError, zlib.error) as exc:
        raise _read_error(path, exc) from exc


def peek_path(path: Path, n: int = PEEK_BYTES) -> bytes:
    """The first ``n`` decompressed bytes of ``path`` (for format detection)."""
    try:
        with open_binary(path) as fh:
            return fh.read(n)
    except (OSError, EOFError, zlib.error) as exc:
        raise _read_error(path, exc) from exc


def tail_path(path: Path, n: int = 4096) -> bytes:
    """The last ``n`` bytes of an uncompressed file (``b""`` for gzip: a tail needs a full read)."""
    with open(path, "rb") as fh:
        if is_gzip(fh.read(2)):
            return b""
        fh.seek(0, io.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - n))
        return fh.read()


def content_hash_path(path: Path) -> str:
    """Content hash of the decompressed content, streamed (same as ``content_hash(read_path(path))``)."""
    h = ContentHasher()
    try:
        with open_binary(path) as fh:
            while block := fh.read(CHUNK_BYTES):
                h.update(block)
    except (OSError, EOFError, zlib.error) as exc:
        raise _read_error(path, exc) from exc
    return h.hexdigest()


class HashedChunks:
    """A file's decompressed, newline-aligned chunks, hashed as they stream past.

    One read serves both the parse and the content hash (reading a 1.5 GB archive twice
    cost more than hashing it). :meth:`hexdigest` is the content hash of the whole content once a
    pass has run to the end; if the pass stopped early (a parse error), it hashes the file with
    a pass of its own, so the hash always names the whole content.
    """

    def __init__(self, path: Path, chunk_bytes: int | None = None) -> None:
        self.path = path
        self.chunk_bytes = chunk_bytes
        self._hash: ContentHasher | None = None
        self._complete = False

    def __iter__(self) -> Iterator[bytes]:
        self._complete = False
        h = self._hash = ContentHasher()
        # The hashers release the GIL on large buffers: hash chunk i on a second core while the
        # parser works on it (same CPU time, less wall).
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="tidelens-hash") as pool:
            pending: Future[None] | None = None
            try:
                with open_binary(self.path) as fh:
                    for chunk in iter_chunks(fh, self.chunk_bytes, name=self.path):
                        if pending is not None:
                            pending.result()
                        pending = pool.submit(h.update, chunk)
                        yield chunk
                if pending is not None:
                    pending.result()
            except (OSError, EOFError, zlib.error) as exc:
                raise _read_error(self.path, exc) from exc
        self._complete = True

    def hexdigest(self) -> str:
        """The content hash of the whole decompressed content (same as :func:`content_hash_path`)."""
        if self._complete and self._hash is not None:
            return self._hash.hexdigest()
        return content_hash_path(self.path)


def iter_chunks(stream: BinaryIO | BoundedReader, chunk_bytes: int | None = None,
                max_line_bytes: int | None = None, name: str | Path = "<source>") -> Iterator[bytes]:
    """Yield pieces of ``stream`` that each end with a newline (the last one may not).

    A line longer than ``max_line_bytes`` (default the limits' 16 MiB) is refused, naming its
    line: a file without newlines is one line, and must not be read whole to find its end.
    """
    chunk_bytes = chunk_bytes or CHUNK_BYTES
    max_line = max_line_bytes or IngestLimits.from_env().max_line_bytes
    lines = 0
    while block := stream.read(chunk_bytes):
        if not block.endswith(b"\n"):
            rest = stream.readline(max_line + 1)  # finish the cut line: one copy, no carried remainder
            block += rest
            last = block.rfind(b"\n", 0, len(block) - len(rest)) + 1
            if len(block) - last - block.endswith(b"\n") > max_line:  # the cut line, newline aside
                raise IngestError(name, f"a line longer than {max_line:,} bytes (raise TIDELENS_MAX_LINE_BYTES if "
                                  "it is real); no export writes lines that long", line=lines + block.count(b"\n", 0, last) + 1)
        lines += block.count(b"\n")
        yield block


def iter_bytes_chunks(data: bytes, chunk_bytes: int | None = None, max_line_bytes: int | None = None,
                      name: str | Path = "<source>") -> Iterator[bytes]:
    """Like :func:`iter_chunks` over bytes already in memory (slices, no copy of the whole)."""
    chunk_bytes = chunk_bytes or CHUNK_BYTES
    max_line = max_line_bytes or IngestLimits.from_env().max_line_bytes
    pos, n = 0, len(data)
    while pos < n:
        end = min(n, pos + chunk_bytes)
        if end < n:
            cut = data.rfind(b"\n", pos, end)
            end = cut + 1 if cut >= 0 else (data.find(b"\n", end) + 1 or n)
        start = data.rfind(b"\n", pos, end - 1) + 1  # where the piece's last line starts
        if end - start > max_line + 1:
            raise IngestError(name, f"a line longer than {max_line:,} bytes (raise TIDELENS_MAX_LINE_BYTES if "
                              "it is real); no export writes lines that long", line=data.count(b"\n", 0, start) + 1)
        yield data[pos:end]
        pos = end


def _long_line(name: str | Path, max_line: int, line: int) -> IngestError:
    return IngestError(name, f"a line longer than {max_line:,} bytes (raise TIDELENS_MAX_LINE_BYTES if "
                       "it is real); no export writes lines that long", line=line)


def check_line_lengths(data: bytes, name: str | Path = "<source>", max_line_bytes: int | None = None) -> None:
    """Refuse ``data`` when a line is longer than ``max_line_bytes`` (default the limits' 16 MiB).

    Jumps a window of ``max_line_bytes`` at a time to the last newline inside it, so a file of
    short lines costs one backwards search per 16 MiB, not one step per line.

    >>> check_line_lengths(b"ab\\ncd\\n", max_line_bytes=2)
    >>> check_line_lengths(b"ab\\ncde\\n", "x.csv", max_line_bytes=2)
    Traceback (most recent call last):
    analytics.errors.IngestError: x.csv:2: a line longer than 2 bytes ...
    """
    max_line = max_line_bytes or IngestLimits.from_env().max_line_bytes
    pos, n = 0, len(data)
    while n - pos > max_line:
        cut = data.rfind(b"\n", pos, pos + max_line + 1)
        if cut < 0:
            raise _long_line(name, max_line, data.count(b"\n", 0, pos) + 1)
        pos = cut + 1


def read_path_lines(path: Path, max_line_bytes: int | None = None) -> bytes:
    """The whole decompressed content of a line-based source, refused at the first line longer
    than the limit after reading at most one chunk past it (a file of one 500 MB line is never
    held whole: it took 18-24 s and 2.4 GB before)."""
    out = io.BytesIO()
    try:
        with open_binary(path) as fh:
            for chunk in iter_chunks(fh, max_line_bytes=max_line_bytes, name=path):
                out.write(chunk)
    except (OSError, EOFError, zlib.error) as exc:
        raise _read_error(path, exc) from exc
    return out.getvalue()


def list_files(path: Path) -> list[Path]:
    """``path`` itself, or every regular file under a folder (recursed, sorted, dot-files skipped)."""
    if path.is_dir():
        return sorted(p for p in path.rglob("*")
                      if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts))
    return [path]


# What a folder of exports also holds, skipped (and counted) rather than failed: a README or a
# LICENSE beside the data is not a broken export. ``.txt`` is absent: Prometheus text often is one.
NOT_DATA_NAMES = ("readme", "license", "licence", "notice", "copying", "changelog", "authors", "contributing")
NOT_DATA_SUFFIXES: dict[str, str] = {
    **dict.fromkeys((".md", ".rst", ".pdf", ".html", ".htm", ".doc", ".docx"), "documentation"),
    **dict.fromkeys((".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".bmp", ".ico"), "an image"),
    **dict.fromkeys((".ipynb",), "a notebook"),
    **dict.fromkeys((".py", ".sh", ".r", ".sql", ".js"), "code"),
    **dict.fromkeys((".yaml", ".yml", ".toml", ".ini", ".cfg"), "configuration"),
}


def not_data_reason(path: Path) -> str | None:
    """Why ``path`` is not an export to load (documentation, an image, ...), or None.

    >>> not_data_reason(Path("real/LICENSE.dcgm-exporter")), not_data_reason(Path("a.png"))
    ('documentation', 'an image')
    >>> not_data_reason(Path("scrape.txt")) is None, not_data_reason(Path("x.prom.gz")) is None
    (True, True)
    """
    name = path.name.lower()
    if name.split(".")[0] in NOT_DATA_NAMES:
        return "documentation"
    return NOT_DATA_SUFFIXES.get(path.suffix.lower())


def csv_header(head: bytes) -> list[str]:
    """The first line of ``head`` split on commas, unquoted and stripped."""
    first = head.split(b"\n", 1)[0].decode("utf-8-sig", errors="replace").strip("\r")
    return [c.strip().strip('"').strip() for c in first.split(",")]
