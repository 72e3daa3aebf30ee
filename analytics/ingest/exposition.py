"""Prometheus text exposition (0.0.4) and OpenMetrics 1.0: a streaming, mostly vectorised parser.

A scrape archive is mostly the same few hundred series repeated, so each chunk of lines is split
by polars into *series text* (``name{labels}``) and *value/timestamp* columns; only the distinct
series texts are parsed in Python (labels, escapes, validation). Lines the fast path cannot vouch
for (escapes, quotes or braces after the labels, tabs, exemplars, odd spacing) are parsed one by
one by :func:`parse_sample_line`, which follows ``prometheus_client``'s parser. Samples are
written to the sink in file order, chunk by chunk.

Timestamps: text 0.0.4 carries integer milliseconds, OpenMetrics float seconds (the detected
format decides). Samples without a timestamp take ``default_ts_ms``; a series seen twice without
a timestamp means several untimestamped scrapes were concatenated, which cannot be placed in time
and is refused.
"""

from __future__ import annotations

import gc
import math
import re
from typing import Iterable

import orjson
import polars as pl

from analytics.errors import IngestError
from analytics.store import Sink

_NAME_RE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_ESCAPE_RE = re.compile(r'\\[\\n"]')
_ESCAPES = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}
_SEP = "\x1f"  # a byte exposition text never contains in practice; chunks holding it take the slow path


def _unescape(text: str) -> str:
    return _ESCAPE_RE.sub(lambda m: _ESCAPES[m.group(0)], text) if "\\" in text else text


def _read_quoted(text: str, i: int) -> tuple[str, int]:
    """Read a double-quoted string starting at ``text[i] == '"'``; return (value, index after it)."""
    j = i + 1
    n = len(text)
    while j < n:
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c == '"':
            return _unescape(text[i + 1:j]), j + 1
        j += 1
    raise ValueError("missing closing quote in a label value")


def parse_labels(text: str, *, openmetrics: bool = False) -> tuple[str | None, dict[str, str]]:
    """Parse the inside of ``{...}``: returns (metric name given as a bare quoted term, labels)."""
    labels: dict[str, str] = {}
    name: str | None = None
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in " \t":
            i += 1
        if i >= n:
            break
        if text[i] == '"':
            key, i = _read_quoted(text, i)
            quoted = True
        else:
            j = i
            while j < n and text[j] not in "=, \t":
                j += 1
            key, i, quoted = text[i:j], j, False
        while i < n and text[i] in " \t":
            i += 1
        if i >= n or text[i] != "=":
            if quoted and name is None and "__name__" not in labels:
                name = key  # {"my.metric", a="b"}: a quoted metric name
            else:
                raise ValueError(f"expected '=' after label name {key!r}")
        else:
            i += 1
            while i < n and text[i] in " \t":
                i += 1
            if i >= n or text[i] != '"':
                raise ValueError(f"label {key!r}: the value must be in double quotes")
            value, i = _read_quoted(text, i)
            if not quoted and not _LABEL_RE.match(key):
                raise ValueError(f"invalid label name {key!r}")
            if key in labels:
                raise ValueError(f"duplicate label name {key!r}")
            labels[key] = value
        while i < n and text[i] in " \t":
            i += 1
        if i < n:
            if text[i] != ",":
                raise ValueError(f"expected ',' or '}}' after label, found {text[i]!r}")
            i += 1
            if openmetrics and i >= n:
                raise ValueError("trailing comma in labels")
    if "__name__" in labels:
        if name is not None:
            raise ValueError("metric name given twice")
        name = labels.pop("__name__")
    return name, labels


def parse_series(text: str, *, openmetrics: bool = False) -> tuple[str, dict[str, str]]:
    """Parse ``name{labels}`` (or a bare name) into (name, labels)."""
    brace = text.find("{")
    if brace < 0:
        name, labels = text.strip(), {}
    else:
        if not text.endswith("}"):
            raise ValueError("labels not closed with '}'")
        name = text[:brace].strip()
        inner_name, labels = parse_labels(text[brace + 1:-1], openmetrics=openmetrics)
        if inner_name is not None:
            if name:
                raise ValueError("metric name given twice")
            return inner_name, labels
    if not _NAME_RE.match(name):
        raise ValueError(f"invalid metric name {name!r}")
    return name, labels


def _closing_brace(line: str, start: int) -> int:
    """Index of the '}' closing the labels that open at ``start``, skipping quoted text."""
    i, n = start + 1, len(line)
    in_quotes = False
    while i < n:
        c = line[i]
        if c == "\\" and in_quotes:
            i += 2
            continue
        if c == '"':
            in_quotes = not in_quotes
        elif c == "}" and not in_quotes:
            return i
        i += 1
    raise ValueError("labels not closed with '}'")


def _parse_number(tok: str, what: str) -> float:
    if "_" in tok:
        raise ValueError(f"invalid {what} {tok!r}")
    try:
        return float(tok)
    except ValueError:
        raise ValueError(f"invalid {what} {tok!r} (expected a number, NaN, +Inf or -Inf)") from None


_SERIES_RE = re.compile(r'^[^{"\s]*\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\}')


def parse_sample_line(line: str, *, openmetrics: bool = False,
                      cache: dict[str, tuple[str, dict[str, str]]] | None = None,
                      ) -> tuple[str, str, dict[str, str], float, int | None]:
    """Parse one sample line: (series text, name, labels, value, timestamp in ms or None).

    ``cache`` maps series texts already parsed to (name, labels). Raises ``ValueError`` with a
    readable message on bad input.
    """
    line = line.strip()
    m = _SERIES_RE.match(line)
    if m:
        series, rest = m.group(0), line[m.end():]
    else:
        brace = line.find("{")
        space = min((p for p in (line.find(" "), line.find("\t")) if p >= 0), default=-1)
        if brace >= 0 and (space < 0 or brace < space):
            close = _closing_brace(line, brace)
            series, rest = line[:close + 1], line[close + 1:]
        else:
            if space < 0:
                raise ValueError("sample line has no value")
            series, rest = line[:space], line[space:]
    known = cache.get(series) if cache is not None else None
    if known is None:
        known = parse_series(series, openmetrics=openmetrics)
        if cache is not None:
            cache[series] = known
    name, labels = known
    if openmetrics and " # " in rest:
        rest = rest[:rest.index(" # ")]  # an exemplar: not a sample of this series
    toks = rest.split()
    if not toks:
        raise ValueError("sample line has no value")
    if toks[0].startswith("{"):
        raise ValueError("native histogram samples are not supported; export the classic _bucket series")
    if len(toks) > 2:
        raise ValueError(f"unexpected text after the timestamp: {' '.join(toks[2:])!r}")
    value = _parse_number(toks[0], "sample value")
    ts_ms: int | None = None
    if len(toks) == 2:
        ts = _parse_number(toks[1], "timestamp")
        if math.isnan(ts) or math.isinf(ts):
            raise ValueError(f"invalid timestamp {toks[1]!r}")
        ts_ms = round(ts * 1000.0) if openmetrics else round(ts)
    return series, name, labels, value, ts_ms


class ExpositionParser:
    """Streams exposition text chunks into a :class:`Sink`.

    Parameters
    ----------
    sink:
        Where series and samples go.
    source:
        The file name, for error messages.
    openmetrics:
        OpenMetrics (timestamps in seconds, exemplars) rather than text 0.0.4 (milliseconds).
    default_ts_ms:
        The time given to samples without a timestamp.
    """

    def __init__(self, sink: Sink, source: str, *, openmetrics: bool, default_ts_ms: int,
                 vectorised: bool = True) -> None:
        self.sink = sink
        self.vectorised = vectorised  # False: every line through parse_sample_line (tests compare both)
        self.source = source
        self.openmetrics = openmetrics
        self.default_ts_ms = default_ts_ms
        self.line_no = 0  # lines consumed so far
        self.samples = 0
        self.untimestamped = 0
        self.saw_eof = False
        self._skey_of_text: dict[str, int] = {}
        self._skey_of_identity: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
        self._untimestamped_skeys: set[int] = set()
        self._parsed: dict[str, tuple[str, dict[str, str]]] = {}
        self._map = pl.DataFrame(schema={"series": pl.Utf8, "skey": pl.Int64})

    # -- series identity ------------------------------------------------------------------
    def _skey(self, text: str, name: str, labels: dict[str, str], new: list[tuple[int, str, str]]) -> int:
        ident = (name, tuple(sorted(labels.items())))
        skey = self._skey_of_identity.get(ident)
        if skey is None:
            skey = len(self._skey_of_identity)
            self._skey_of_identity[ident] = skey
            new.append((skey, name, orjson.dumps(labels).decode()))
        self._skey_of_text[text] = skey
        return skey

    def _announce(self, new: list[tuple[int, str, str]]) -> None:
        if new:
            skeys, names, labels = zip(*new)
            self.sink.add_series(pl.DataFrame({"skey": list(skeys), "metric": list(names), "labels": list(labels)},
                                              schema={"skey": pl.Int64, "metric": pl.Utf8, "labels": pl.Utf8}))

    # -- chunks ---------------------------------------------------------------------------
    def feed(self, chunk: bytes) -> None:
        """Parse one chunk of whole lines (the last chunk may lack its final newline)."""
        n_lines = chunk.count(b"\n") + (0 if chunk.endswith(b"\n") else 1)
        frame = self._fast_frame(chunk, n_lines)
        first = self.line_no + 1
        if frame is None:
            self._feed_slow(chunk, first)
        else:
            self._feed_fast(frame, first, ascii_only=chunk.isascii())
        self.line_no += n_lines

    def _fast_frame(self, chunk: bytes, n_lines: int) -> pl.DataFrame | None:
        if not self.vectorised or b"\x1f" in chunk or not chunk:
            return None
        try:
            frame = pl.read_csv(chunk, has_header=False, separator=_SEP, quote_char=None,
                                schema={"l": pl.Utf8})
        except Exception:  # invalid UTF-8 and the like: the slow path names the line
            return None
        return frame if frame.height == n_lines else None

    def _feed_fast(self, frame: pl.DataFrame, first: int, *, ascii_only: bool) -> None:
        l = pl.col("l")
        b, c, s = l.str.find("{", literal=True), l.str.find("}", literal=True), l.str.find(" ", literal=True)
        # str.find gives byte offsets while head/tail count characters: they agree on ASCII lines only
        lf = (frame.lazy().with_row_index("row")
              .filter(l.is_not_null() & ~l.str.starts_with("#"))
              .with_columns(b=b, c=c, s=s)
              .with_columns(labelled=pl.col("b").is_not_null()
                            & (pl.col("s").is_null() | (pl.col("b") < pl.col("s"))))
              .with_columns(cut=pl.when("labelled").then(pl.col("c") + 1).otherwise("s"))
              .with_columns(series=l.str.head(pl.col("cut")), rest=l.str.tail(l.str.len_bytes() - pl.col("cut")))
              .with_columns(vt=pl.col("rest").str.tail(-1).str.splitn(" ", 2)))
        ts_raw = pl.col("vt").struct.field("field_1")
        if self.openmetrics:
            ts = (ts_raw.cast(pl.Float64, strict=False) * 1000.0).round().cast(pl.Int64, strict=False)
        else:
            ts = ts_raw.cast(pl.Int64, strict=False)
        lf = lf.with_columns(value=pl.col("vt").struct.field("field_0").cast(pl.Float64, strict=False),
                             ts_ms=ts, has_ts=ts_raw.is_not_null())
        # A line is vouched for when the text after the series is exactly " <number>[ <integer>]":
        # a '}' inside a quoted label value, tabs, odd spacing, exemplars or junk all fail the casts.
        ok = (pl.col("cut").is_not_null() & (pl.col("series").str.len_bytes() > 0)
              & (~pl.col("labelled") | (pl.col("c") > pl.col("b"))) & pl.col("rest").str.starts_with(" ")
              & pl.col("value").is_not_null() & (~pl.col("has_ts") | pl.col("ts_ms").is_not_null()))
        if not ascii_only:
            ok = ok & (l.str.len_bytes() == l.str.len_chars())
        parsed = lf.with_columns(ok=ok).select("row", "l", "series", "value", "ts_ms", "has_ts", "ok").collect()
        if self.openmetrics and not self.saw_eof:
            self.saw_eof = bool(frame.select((l == "# EOF").any()).item())
        good = parsed.filter(pl.col("ok"))
        bad = parsed.filter(~pl.col("ok")).select("row", "l")

        new: list[tuple[int, str, str]] = []
        unknown = good.select(pl.col("series").unique(maintain_order=True)).to_series().to_list()
        unknown = [t for t in unknown if t not in self._skey_of_text]
        for text in unknown:
            try:
                name, labels = parse_series(text, openmetrics=self.openmetrics)
            except ValueError as exc:
                row, line = good.filter(pl.col("series") == text).row(0, named=False)[:2]
                raise IngestError(self.source, f"{exc}: {line.strip()[:120]!r}", line=first + row) from None
            self._skey(text, name, labels, new)
        if unknown:
            self._map = pl.DataFrame({"series": list(self._skey_of_text), "skey": list(self._skey_of_text.values())},
                                     schema={"series": pl.Utf8, "skey": pl.Int64})
        out = good.select("row", "series", "ts_ms", "value", "has_ts").join(
            self._map, on="series", how="left").select("row", "skey", "ts_ms", "value", "has_ts")
        if bad.height:
            slow_rows: list[tuple[int, int, int | None, float, bool]] = []
            for row, line in bad.iter_rows():
                parsed_line = self._parse_line(line, first + row)
                if parsed_line is None:
                    continue
                text, name, labels, value, ts_ms = parsed_line
                skey = self._skey_of_text.get(text)
                if skey is None:
                    skey = self._skey(text, name, labels, new)
                slow_rows.append((row, skey, ts_ms, value, ts_ms is not None))
            if slow_rows:
                extra = pl.DataFrame(slow_rows, orient="row", schema=out.schema)
                out = pl.concat([out, extra]).sort("row")
        self._announce(new)
        self._emit(out, first)

    def _parse_line(self, line: str, line_no: int) -> tuple[str, str, dict[str, str], float, int | None] | None:
        stripped = line.strip()
        if not stripped:
            return None
        if stripped.startswith("#"):
            if stripped == "# EOF":
                self.saw_eof = True
            return None
        try:
            return parse_sample_line(stripped, openmetrics=self.openmetrics, cache=self._parsed)
        except ValueError as exc:
            raise IngestError(self.source, f"{exc}: {stripped[:120]!r}", line=line_no) from None

    def _feed_slow(self, chunk: bytes, first: int) -> None:
        rows: list[tuple[int, int, int | None, float, bool]] = []
        new: list[tuple[int, str, str]] = []
        for i, raw in enumerate(chunk.split(b"\n")):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise IngestError(self.source, f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                                  line=first + i) from None
            parsed = self._parse_line(line, first + i)
            if parsed is None:
                continue
            text, name, labels, value, ts_ms = parsed
            skey = self._skey_of_text.get(text)
            if skey is None:
                skey = self._skey(text, name, labels, new)
            rows.append((i, skey, ts_ms, value, ts_ms is not None))
        self._announce(new)
        out = pl.DataFrame(rows, orient="row", schema={"row": pl.UInt32, "skey": pl.Int64, "ts_ms": pl.Int64,
                                                      "value": pl.Float64, "has_ts": pl.Boolean})
        self._emit(out, first)

    def _emit(self, out: pl.DataFrame, first: int) -> None:
        if out.height == 0:
            return
        untimestamped = out.filter(~pl.col("has_ts"))
        if untimestamped.height:
            dup = untimestamped.filter(~pl.col("skey").is_first_distinct() | pl.col("skey").is_in(
                list(self._untimestamped_skeys)))
            if dup.height:
                row = dup["row"][0]
                raise IngestError(
                    self.source,
                    "the same series appears again without a timestamp: this looks like several "
                    "scrapes concatenated without timestamps, which cannot be placed in time; load "
                    "each scrape as its own file (with --at), or export with timestamps",
                    line=first + int(row))
            self._untimestamped_skeys.update(untimestamped["skey"].to_list())
            self.untimestamped += untimestamped.height
        self.sink.add_samples(out.select("skey", pl.col("ts_ms").fill_null(self.default_ts_ms), "value"))
        self.samples += out.height


def parse_exposition(chunks: Iterable[bytes], sink: Sink, source: str, *, openmetrics: bool,
                     default_ts_ms: int, vectorised: bool = True) -> ExpositionParser:
    """Parse every chunk into ``sink`` with the garbage collector paused; returns the parser (counts)."""
    parser = ExpositionParser(sink, source, openmetrics=openmetrics, default_ts_ms=default_ts_ms,
                              vectorised=vectorised)
    was_enabled = gc.isenabled()
    gc.disable()  # millions of short-lived objects: the collector would triple the cost
    try:
        for chunk in chunks:
            parser.feed(chunk)
    finally:
        if was_enabled:
            gc.enable()
    return parser
