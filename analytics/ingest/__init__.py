"""File ingest: every export format Tidelens reads, detected from content, into the store.

Public API
----------
:func:`ingest_path`
    A file or a folder (recursed, sorted); one :class:`~analytics.store.LoadResult` per file,
    failures reported per file while the others still load.
:func:`ingest_bytes`
    One upload's bytes (possibly gzip); raises :class:`~analytics.errors.IngestError` on bad input.
:func:`ingest_upload`
    One upload that may be an archive (``.tar``, ``.tar.gz``, ``.zip``): one result per member
    (:mod:`analytics.ingest.archives`), each a source named ``archive!member``.
:func:`detect_format`
    ``prom-text | openmetrics | prom-json | csv-long | csv-grafana | nvidia-smi-csv | parquet-long``, the
    other formats of :data:`FORMATS`, and per-request logs (``requests-csv | -jsonl | -parquet``).

Each source loads atomically through :meth:`Store.load`; the content hash is over the
decompressed bytes, so the same data again (compressed or not) is ``skipped``.
"""

from __future__ import annotations

import io
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Callable, Iterable

from analytics.errors import IngestError, bounded
from analytics.ingest.archives import MACOS, NESTED, archive_kind, bytes_kind, iter_members
from analytics.ingest.datadog import parse_datadog_v1
from analytics.ingest.exposition import parse_exposition
from analytics.ingest.formats import (
    EXPOSITION_FORMATS,
    FORMATS,
    REQUEST_FORMATS,
    detect_format,
    exposition_flavour,
    refine_format,
)
from analytics.ingest.lineprotocol import parse_line_protocol
from analytics.ingest.mapping import parse_mapped
from analytics.ingest.promjson import parse_prom_json
from analytics.ingest.requests import parse_requests
from analytics.ingest.servegen import parse_servegen_chunk
from analytics.ingest.sources import (
    PEEK_BYTES,
    HashedChunks,
    check_line_lengths,
    gunzip,
    iter_bytes_chunks,
    list_files,
    not_data_reason,
    peek_path,
    read_path,
    read_path_lines,
    source_name,
    tail_path,
)
from analytics.ingest.tabular import parse_csv_grafana, parse_csv_long, parse_nvidia_smi, parse_parquet_long
from analytics.store import LoadResult, Sink, Store, content_hash
from analytics.times import iso_utc

if TYPE_CHECKING:
    from analytics.ingest.mapping import ColumnMapping

__all__ = ["ingest_path", "ingest_bytes", "ingest_upload", "detect_format", "FORMATS", "iso_utc", "group_failures",
           "group_messages", "not_data_reason"]


# Formats read line by line: every line at most the limits' max_line_bytes, checked before parsing
# (JSON documents are often one line; they are bounded by their series count instead).
LINE_FORMATS = ("influx-lp", "servegen-rate", "csv-long", "csv-grafana", "nvidia-smi-csv", "requests-csv",
                "requests-jsonl")


def _default_time(at_ms: int | None, mtime_ms: int | None) -> tuple[int, str]:
    if at_ms is not None:
        return at_ms, f"timestamps from --at {iso_utc(at_ms)}"
    if mtime_ms is not None:
        return mtime_ms, f"timestamps from file mtime {iso_utc(mtime_ms)}"
    now = int(time.time() * 1000)
    return now, f"timestamps from load time {iso_utc(now)} (no --at and no file time)"


def _exposition_parse(name: str, fmt: str, chunks: Callable[[], Iterable[bytes]], at_ms: int | None,
                      mtime_ms: int | None, why: str | None = None) -> Callable[[Sink], str | None]:
    default_ts, note = _default_time(at_ms, mtime_ms)

    def parse(sink: Sink) -> str | None:
        parser = parse_exposition(chunks(), sink, name, openmetrics=fmt == "openmetrics", default_ts_ms=default_ts)
        notes = [n for n in (why, note if parser.untimestamped else None, *parser.notes()) if n]
        return "; ".join(notes) or None
    return parse


def _data_parse(name: str, fmt: str, data: bytes, store: Store) -> Callable[[Sink], str | None]:
    stem = Path(name).name.split(".")[0] or "value"
    if fmt == "prom-json":
        return lambda sink: parse_prom_json(data, sink, name, default_metric=stem)
    if fmt == "influx-lp":
        return lambda sink: parse_line_protocol(iter_bytes_chunks(data, name=name), sink, name)
    if fmt == "servegen-rate":

        return lambda sink: parse_servegen_chunk(data, sink, name)
    if fmt == "datadog-v1":

        return lambda sink: parse_datadog_v1(data, sink, name)
    if fmt in REQUEST_FORMATS:

        return lambda sink: parse_requests(data, sink, name, con=store.con)
    if fmt == "csv-long":
        return lambda sink: parse_csv_long(data, sink, name)
    if fmt == "csv-grafana":
        return lambda sink: parse_csv_grafana(data, sink, name, default_metric=stem)
    if fmt == "nvidia-smi-csv":
        return lambda sink: parse_nvidia_smi(data, sink, name)
    if fmt == "parquet-long":
        return lambda sink: parse_parquet_long(data, sink, name)
    raise IngestError(name, f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")


def _mapped(store: Store, name: str, data: bytes, columns: "ColumnMapping") -> LoadResult:
    """A table read through a column mapping: the mapping's digest is part of its identity."""
    import hashlib


    fmt = "mapped-parquet" if data[:4] == b"PAR1" else "mapped-csv"
    identity = hashlib.sha256(f"{content_hash(data)}:{columns.digest()}".encode()).hexdigest()
    if fmt == "mapped-csv":
        check_line_lengths(data, name)
    return store.load(name, fmt, identity, lambda sink: parse_mapped(data, sink, name, columns, con=store.con))


def ingest_bytes(store: Store, name: str, data: bytes, *, at_ms: int | None = None,
                 mtime_ms: int | None = None, columns: "ColumnMapping | None" = None) -> LoadResult:
    """Load one source given as bytes (an upload), gzip or not.

    Parameters
    ----------
    store:
        The store to load into.
    name:
        The source's name (file name), used in messages and in ``sources``.
    data:
        The file's bytes.
    at_ms:
        Time for samples without a timestamp (wins over ``mtime_ms``).
    mtime_ms:
        The file's modification time, used when ``at_ms`` is not given.
    columns:
        A column mapping (:mod:`analytics.ingest.mapping`): read the table through it.

    Raises
    ------
    IngestError
        On bad input; nothing of the source is left in the store.
    """
    data = gunzip(name, data)
    kind = archive_kind(data[:1024], name)
    if kind is not None:
        raise IngestError(name, NESTED if "!" in name else f"a {kind} archive; load it with `tidelens ingest` "
                          "or the Data page's upload, which read it member by member")
    if columns is not None:
        return _mapped(store, name, data, columns)
    fmt = detect_format(data, name)
    if fmt in EXPOSITION_FORMATS:
        fmt, why = exposition_flavour(data[:1 << 20], data[-4096:])
        parse = _exposition_parse(name, fmt, lambda: iter_bytes_chunks(data, name=name), at_ms, mtime_ms, why)
    else:
        fmt = refine_format(fmt, data, name)
        if fmt in LINE_FORMATS:
            check_line_lengths(data, name)
        parse = _data_parse(name, fmt, data, store)
    return store.load(name, fmt, content_hash(data), parse)


def _ingest_file(store: Store, path: Path, at_ms: int | None,
                 columns: "ColumnMapping | None" = None) -> LoadResult:
    name = source_name(str(path))
    if columns is not None:
        parquet = peek_path(path, 4) == b"PAR1"
        return _mapped(store, name, read_path(path) if parquet else read_path_lines(path), columns)
    head = peek_path(path)
    fmt = detect_format(head, name)
    why = None
    if fmt in EXPOSITION_FORMATS:
        fmt, why = exposition_flavour(head, tail_path(path))
    mtime_ms = int(path.stat().st_mtime * 1000)
    if fmt in EXPOSITION_FORMATS:
        # One pass: the parse hashes what it reads; the store checks "already loaded" after it.
        chunks = HashedChunks(path)
        parse = _exposition_parse(name, fmt, lambda: chunks, at_ms, mtime_ms, why)
        return store.load(name, fmt, chunks.hexdigest, parse)
    if fmt == "influx-lp":  # streamed the same way: never held whole
        lp_chunks = HashedChunks(path)
        return store.load(name, fmt, lp_chunks.hexdigest, lambda sink: parse_line_protocol(lp_chunks, sink, name))
    data = read_path_lines(path) if fmt in LINE_FORMATS else read_path(path)
    fmt = refine_format(fmt, data, name)
    return store.load(name, fmt, content_hash(data), _data_parse(name, fmt, data, store))


def message_reason(name: str, text: str) -> str:
    """A failure's message without its file, line and quoted specifics: failures that share one
    are one problem (a folder of 162 traces in an unknown layout is one message, not 162).

    >>> message_reason("a/x.csv", "a/x.csv:1: no layout; found header '0,1'")
    "no layout; found header '…'"
    """
    if text.startswith(name):
        text = text[len(name):]
        text = re.sub(r"^(:\d+)?( at [^:]+)?: ", "", text)
    # quoted specifics (a header, a value) start after a space, '(' or '=': "Grafana's" is no quote
    text = re.sub(r"(?:^|(?<=[\s(=\[]))(?:'[^']*'|\"[^\"]*\")", "'…'", text)
    return text.strip()


def group_failures(results: Iterable[LoadResult]) -> list[tuple[str, list[str]]]:
    """``(reason, [file, ...])`` of every failure, the most common reason first."""
    return group_messages((r.name, r.error or "") for r in results if r.status == "failed")


def group_messages(failures: Iterable[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """``(reason, [file, ...])`` of ``(file, message)`` pairs, the most common reason first.

    >>> group_messages([("a.csv", "a.csv:1: bad 'x'"), ("b.csv", "b.csv:9: bad 'y'"), ("c", "c: other")])
    [("bad '…'", ['a.csv', 'b.csv']), ('other', ['c'])]
    """
    groups: dict[str, list[str]] = {}
    for name, message in failures:
        groups.setdefault(message_reason(name, message), []).append(name)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def missing_path(path: str | Path) -> LoadResult:
    """The failed result of a path that is not there (said before any store is opened)."""
    return LoadResult(name=str(path), format="unknown", status="failed",
                      error=bounded(f"{path}: no such file or folder"))


def ingest_path(store: Store, path: str | Path, *, at_ms: int | None = None,
                columns: "ColumnMapping | None" = None) -> list[LoadResult]:
    """Load a file, or every file under a folder (recursed, sorted).

    A file that fails is reported as ``LoadResult(status="failed", error=...)`` (the message
    names the file and the line or JSON path); the other files still load.
    """
    path = Path(path)
    if not path.exists():
        return [missing_path(path)]
    results = []
    for file in list_files(path):
        name = source_name(str(file))  # the path opens the file; the name is what the store and messages hold
        why = not_data_reason(file)
        if why is not None:
            results.append(LoadResult(name=name, format="none", status="skipped",
                                      note=f"not a data file ({why})"))
            continue
        try:
            kind = archive_kind(peek_path(file, 1024), file)
        except IngestError:
            kind = None  # unreadable: the ordinary load says why
        if kind is not None:
            with open(file, "rb") as raw:
                results.extend(_ingest_archive(store, name, raw, file.stat().st_size, kind, at_ms, columns))
            continue
        results.append(_guarded(name, lambda: _ingest_file(store, file, at_ms, columns),
                                lambda: peek_path(file)))
    return results


def _guarded(name: str, load: Callable[[], LoadResult], head: Callable[[], bytes]) -> LoadResult:
    """``load()``, or its failure as a result (``head()``: the bytes its format is told from)."""
    try:
        return load()
    except IngestError as exc:
        fmt = "unknown"
        try:
            fmt = detect_format(head(), name)
        except IngestError:
            pass
        return LoadResult(name=name, format=fmt, status="failed", error=str(exc))
    except Exception as exc:  # a parser bug must not stop the other files
        return LoadResult(name=name, format="unknown", status="failed",
                          error=bounded(f"{name}: internal error while loading: {exc!r}"))


def _ingest_archive(store: Store, name: str, raw: BinaryIO, size: int, kind: str, at_ms: int | None,
                    columns: "ColumnMapping | None") -> list[LoadResult]:
    """Every member of an archive, each loaded as its own source (see :mod:`analytics.ingest.archives`)."""
    results: list[LoadResult] = []
    macos = 0
    try:
        for m in iter_members(name, raw, size, kind):
            member = m.name.split("!", 1)[1]
            why = m.skip or (f"not a data file ({r})" if (r := not_data_reason(Path(member))) else None)
            if m.skip == MACOS:
                macos += 1
            elif why is not None:
                results.append(LoadResult(name=m.name, format="none", status="skipped", note=why))
            else:
                data = m.data or b""
                results.append(_guarded(m.name, lambda: ingest_bytes(store, m.name, data, at_ms=at_ms,
                                                                     mtime_ms=m.mtime_ms, columns=columns),
                                        lambda: gunzip(m.name, data[:PEEK_BYTES])))
    except IngestError as exc:  # the archive itself (corrupt, a bomb): the members before it stay loaded
        results.append(LoadResult(name=exc.source, format=kind, status="failed", error=str(exc)))
    if macos:
        results.append(LoadResult(name=name, format=kind, status="skipped",
                                  note=f"{macos} macOS metadata member(s) skipped (._* files and __MACOSX/)"))
    if not results:
        results.append(LoadResult(name=name, format=kind, status="failed",
                                  error=str(IngestError(name, f"an empty {kind} archive: no file inside to load"))))
    return results


def ingest_upload(store: Store, name: str, data: bytes, *, at_ms: int | None = None,
                  mtime_ms: int | None = None, columns: "ColumnMapping | None" = None) -> list[LoadResult]:
    """Load one upload: an archive member by member (one result each, failures among them), any
    other file as :func:`ingest_bytes` does (which raises :class:`~analytics.errors.IngestError`)."""
    kind = bytes_kind(data, name)
    if kind is None:
        return [ingest_bytes(store, name, data, at_ms=at_ms, mtime_ms=mtime_ms, columns=columns)]
    return _ingest_archive(store, name, io.BytesIO(data), len(data), kind, at_ms, columns)
