"""Prometheus text exposition (0.0.4) and OpenMetrics 1.0: a streaming, mostly vectorised parser.

A scrape archive is mostly the same few hundred series repeated, so each chunk of lines is split
by polars into *series text* (``name{labels}``) and *value/timestamp* columns (polars' CSV reader
with '}' as the separator does the cut when every sample line is labelled; otherwise whole lines
are split); series texts are dictionary-encoded by a join against those already seen, and only
new ones are parsed in Python (labels, escapes, validation). A series is its text as written
(the store's merge makes two spellings of one label set one series), kept once, in a polars
frame, and counted against the series limit before a chunk's new ones are parsed: a file of 2.1
million series was refused after 133 s at 3.6 GB while three dicts of Python objects held each
series. Lines the fast path cannot vouch
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
from typing import Iterable

import numpy as np
import orjson
import polars as pl

from analytics.errors import IngestError
from analytics.limits import IngestLimits
from analytics.sink import too_many_series
from analytics.ingest.om_check import FirstScrapeCheck
from analytics.ingest.exposition_line import UnrepresentableTime, finer_than_ms, parse_sample_line, parse_series
from analytics.ingest.series_index import SeriesIndex
from analytics.store import Sink

_SEP = "\x1f"  # a byte exposition text never contains in practice; chunks holding it take the slow path
_SUB_MS = pl.col("t").str.contains(r"\.\d{3}0*[1-9]").fill_null(False).alias("sub_ms")
# The samples that are counts, by family type: they are never negative and never NaN.
_COUNTS_OF_TYPE = {"counter": ("", "_total"), "histogram": ("_bucket", "_count"),
                   "gaugehistogram": ("_bucket", "_gcount"), "summary": ("_count",)}
_COUNT_SUFFIXES = ("_total", "_bucket", "_count", "_gcount")
# Series texts of the line parser kept parsed (a file read line by line repeats its few series);
# past this many the cache starts again, so a file of millions of series never holds them all.
_PARSED_CACHE_MAX = 100_000
_MAP_SCHEMA = {"series": pl.Utf8, "skey": pl.Int64}


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
        self.eof_line = 0
        # What the load report must mention, kind -> [count, first line]: lines after the first
        # # EOF (loaded as concatenated scrapes), counter values dropped (negative, NaN/Inf).
        self.dropped: dict[str, list[int]] = {}
        # family -> the suffixes of its counter-like samples (counts: never negative, never NaN)
        self._counter_families: dict[str, tuple[str, ...]] = {}
        self.max_series = IngestLimits.from_env().max_series
        self.n_series = 0
        # per skey: a count (counter, bucket...), and seen without a timestamp; one byte each
        self._counter = np.zeros(1024, dtype=bool)
        self._untimestamped = np.zeros(1024, dtype=bool)
        self._parsed: dict[str, tuple[str, dict[str, str]]] = {}
        # every series text -> its skey (-1: the vectorised path does not vouch for it); a labelled
        # text without its closing '}', as the vectorised path cuts it: one frame, no Python objects
        self._index = SeriesIndex(("series",))
        self.check: FirstScrapeCheck | None = FirstScrapeCheck(source) if openmetrics else None

    # -- series identity ------------------------------------------------------------------
    def _skey(self, name: str, labels: dict[str, str], new: list[tuple[int, str, str]], line_no: int) -> int:
        """A new series' skey (announced with the chunk's other new ones); past the limit, refused."""
        if self.n_series >= self.max_series:
            raise too_many_series(self.source, self.max_series, line_no)
        skey = self.n_series
        self.n_series += 1
        new.append((skey, name, orjson.dumps(labels).decode()))
        if skey >= len(self._counter):
            self._counter = np.concatenate([self._counter, np.zeros(len(self._counter), dtype=bool)])
            self._untimestamped = np.concatenate([self._untimestamped, np.zeros(len(self._untimestamped), dtype=bool)])
        if self._is_counter(name):
            self._counter[skey] = True
        return skey

    def _check_room(self, fresh: pl.DataFrame, first: int) -> None:
        """Refuse before parsing a chunk's new series texts (``fresh``: ``series, row`` in file order)
        when they alone would take the source past the series limit; the line is the first past it."""
        room = self.max_series - self.n_series
        if fresh.height > room:
            raise too_many_series(self.source, self.max_series, first + int(fresh["row"][room]))

    def _remember(self, keys: list[str], skeys: list[int]) -> pl.DataFrame:
        """Add ``keys -> skeys`` to the index (replacing a key the vectorised path did not vouch for)."""
        added = pl.DataFrame({"series": keys, "skey": skeys}, schema=_MAP_SCHEMA)
        self._index.add(added)
        return added

    def _is_counter(self, name: str) -> bool:
        """A count by its family's ``# TYPE``: a counter (OpenMetrics names the family, samples add
        _total), a histogram's _bucket and _count, a gauge histogram's _bucket and _gcount, a
        summary's _count."""
        fams = self._counter_families
        if not fams:
            return False
        if "" in fams.get(name, ()):
            return True
        for suffix in _COUNT_SUFFIXES:
            if name.endswith(suffix) and suffix in fams.get(name[:-len(suffix)], ()):
                return True
        return False

    def _note_type(self, line: str) -> None:
        parts = line.split()
        if len(parts) >= 4 and parts[1] == "TYPE" and parts[3] in _COUNTS_OF_TYPE:
            self._counter_families[parts[2]] = _COUNTS_OF_TYPE[parts[3]]

    def _drop(self, kind: str, count: int, line: int) -> None:
        """Count ``count`` lines or values of ``kind``, the first at ``line``, for the report."""
        if count:
            seen = self.dropped.setdefault(kind, [0, line])
            seen[0] += count
            seen[1] = min(seen[1], line)

    def notes(self) -> list[str]:
        """What the load report says was read and not loaded, with the first line of each."""
        words = {"after_eof": f"line(s) after the # EOF at line {self.eof_line} (OpenMetrics ends "
                              "there) read as scrapes concatenated one after another",
                 "negative_counter": "negative counter value(s) dropped (a counter, a histogram's bucket or "
                                     "count never goes below 0)",
                 "nonfinite_counter": "NaN/Inf counter value(s) dropped (counters, buckets and counts)",
                 "unrepresentable_time": "sample(s) dropped whose timestamp is valid OpenMetrics but beyond "
                                         "what epoch milliseconds can hold (about 292 million years)",
                 "sub_ms": "sample(s) timestamped finer than a millisecond: Tidelens keeps milliseconds, so "
                           "samples of one series within the same millisecond are merged (the last kept) and "
                           "counted among the duplicates"}
        checked = self.check.notes if self.check is not None else []
        return [*checked, *(f"{n} {words[k]}, first at line {line}" for k, (n, line) in self.dropped.items())]

    def _announce(self, new: list[tuple[int, str, str]]) -> None:
        if new:
            skeys, names, labels = zip(*new)
            self.sink.add_series(pl.DataFrame({"skey": list(skeys), "metric": list(names), "labels": list(labels)},
                                              schema={"skey": pl.Int64, "metric": pl.Utf8, "labels": pl.Utf8}))

    # -- chunks ---------------------------------------------------------------------------
    def feed(self, chunk: bytes) -> None:
        """Parse one chunk of whole lines (the last chunk may lack its final newline)."""
        first = self.line_no + 1
        if self.check is not None:
            self.check.feed(chunk)
        frame = self._fast_frame(chunk)
        if frame is None:
            self._feed_slow(chunk, first)
            n_lines = chunk.count(b"\n") + (0 if chunk.endswith(b"\n") else 1)
        else:
            self._feed_fast(frame, first)
            n_lines = frame.height  # one row per line, empty ones included (no quoting, strict width)
        self.line_no += n_lines

    def _fast_frame(self, chunk: bytes) -> pl.DataFrame | None:
        """The chunk as ``(a, r)``: each line's text before its first '}' and after it (null: no '}')."""
        if not self.vectorised or b"\x1f" in chunk or not chunk:
            return None
        try:
            # '}' as the CSV separator: the reader itself cuts series text from value and timestamp
            # (~0.1 CPU-s per 1M lines cheaper than splitting afterwards). A second '}' on a line is a
            # ragged row and raises; a line without one (a bare metric name) or ending on its only '}'
            # reads as r = null, which is ambiguous, so such chunks are re-read whole-line below.
            frame = pl.read_csv(chunk, has_header=False, separator="}", quote_char=None,
                                schema={"a": pl.Utf8, "r": pl.Utf8}, missing_columns="insert")
            a = pl.col("a")
            if not frame["r"].null_count():
                return frame
            nulls = frame.filter(pl.col("r").is_null())  # comments and blank lines, mostly: few
            if not nulls.select((~a.str.starts_with("#") & (a.str.strip_chars() != "")).any()).item():
                return frame
        except Exception:  # a ragged line, invalid UTF-8 and the like: whole lines, or the slow path
            pass
        try:
            lines = pl.read_csv(chunk, has_header=False, separator=_SEP, quote_char=None, schema={"l": pl.Utf8})
        except Exception:
            return None
        head = pl.col("l").str.splitn("}", 2)
        return lines.select(a=head.struct.field("field_0"), r=head.struct.field("field_1"))

    def _feed_fast(self, frame: pl.DataFrame, first: int) -> None:
        a, r = pl.col("a").fill_null(""), pl.col("r")
        if self.openmetrics:
            eof = frame.select(((pl.col("a") == "# EOF") & r.is_null()).arg_true()).to_series()
            e = -1 if self.saw_eof else (int(eof[0]) if eof.len() else None)
            if e is not None:
                if not self.saw_eof:
                    self.saw_eof, self.eof_line = True, first + e
                after = frame.slice(e + 1).with_row_index("i").filter(
                    (a.str.strip_chars() != "") | r.is_not_null())
                if after.height:
                    self._drop("after_eof", after.height, first + e + 1 + int(after["i"][0]))
        for line in frame.filter(pl.col("a").str.starts_with("# TYPE ") & r.is_null())["a"]:
            self._note_type(line)
        # Byte-level splits (no character offsets): the series text ends at the first '}' on
        # labelled lines and at the first space otherwise; what follows is " <value>[ <ts>]".
        lf = (frame.lazy().with_row_index("row")
              .filter(~(pl.col("a").is_null() & r.is_null()) & ~a.str.starts_with("#"))
              .with_columns(labelled=r.is_not_null())
              .with_columns(sp=pl.when("labelled").then(r).otherwise(a).str.splitn(" ", 3))
              .with_columns(f0=pl.col("sp").struct.field("field_0"), v=pl.col("sp").struct.field("field_1"),
                            t=pl.col("sp").struct.field("field_2"))
              .with_columns(series=pl.when("labelled").then(a).otherwise(pl.col("f0"))))
        if self.openmetrics:
            ts = (pl.col("t").cast(pl.Float64, strict=False) * 1000.0).round().cast(pl.Int64, strict=False)
        else:
            ts = pl.col("t").cast(pl.Int64, strict=False)
        lf = lf.with_columns(value=pl.col("v").cast(pl.Float64, strict=False), ts_ms=ts, has_ts=pl.col("t").is_not_null())
        # A line is vouched for when the text after the series is exactly " <number>[ <integer>]" and
        # a labelled series text holds the '{' (so labelled and bare series texts never collide);
        # a '}' inside a quoted label value, tabs, odd spacing, exemplars or junk all fail here.
        ok = (pl.when("labelled").then(pl.col("f0") == "").otherwise(pl.col("f0") != "")
              & (pl.col("labelled") == pl.col("series").str.contains("{", literal=True))
              & pl.col("value").is_not_null() & (~pl.col("has_ts") | pl.col("ts_ms").is_not_null())).fill_null(False)
        parsed = self._index.lookup(lf.with_columns(ok=ok).select(
            "row", "series", "value", "ts_ms", "has_ts", "ok", *([_SUB_MS] if self.openmetrics else [])).collect())
        if self.openmetrics:
            fine = parsed.filter(pl.col("ok") & pl.col("sub_ms"))
            if fine.height:
                self._drop("sub_ms", fine.height, first + int(fine["row"][0]))

        new: list[tuple[int, str, str]] = []
        fresh = parsed.filter(pl.col("ok") & pl.col("skey").is_null()) if parsed["skey"].null_count() else None
        if fresh is not None and fresh.height:
            fresh = fresh.group_by("series", maintain_order=True).agg(pl.col("row").first())
            self._check_room(fresh, first)
            keys = fresh["series"].to_list()
            skeys = [self._vouch(key, first + row, frame, new) for key, row in fresh.iter_rows()]
            added = self._remember(keys, skeys).rename({"skey": "skey_new"})
            parsed = (parsed.join(added, on="series", how="left", maintain_order="left")
                      .with_columns(pl.coalesce("skey", "skey_new").alias("skey")).drop("skey_new"))
        vouched = parsed.select(pl.col("ok") & (pl.col("skey") >= 0)).to_series()
        if vouched.all():  # the usual case: no copy
            out = parsed.select("row", "skey", "ts_ms", "value", "has_ts")
        else:
            out = parsed.filter(vouched).select("row", "skey", "ts_ms", "value", "has_ts")
            bad_rows = parsed.filter(~vouched).select("row")
            # a line of the vectorised path holds at most one '}': it is a + '}' + r exactly
            whole = pl.when(r.is_null()).then(a).otherwise(pl.concat_str(a, pl.lit("}"), r))
            bad = (frame.with_row_index("row").join(bad_rows, on="row", how="semi", maintain_order="left")
                   .select("row", l=whole))
            lines = [(row, parsed_line) for row, line in bad.iter_rows()
                     if (parsed_line := self._parse_line(line, first + row)) is not None]
            if lines:
                extra = self._rows_of(lines, first, new, out.schema)
                out = pl.concat([out, extra]).sort("row")
        self._announce(new)
        self._emit(out, first)

    def _vouch(self, key: str, line_no: int, frame: pl.DataFrame, new: list[tuple[int, str, str]]) -> int:
        """A new series text of the vectorised path: its skey, or -1 to send its lines to the line parser."""
        labelled = "{" in key
        brace = key.find("{")
        if labelled and " " in key[:brace]:
            return -1  # "name {": not vouched for, as the line parser judges it
        text = key + "}" if labelled else key
        try:
            name, labels = parse_series(text, openmetrics=self.openmetrics)
        except ValueError as exc:
            a, r = frame.row(line_no - self.line_no - 1)
            line = (a or "") + ("" if r is None else "}" + r)
            raise IngestError(self.source, f"{exc}: {line.strip()[:120]!r}", line=line_no) from None
        return self._skey(name, labels, new, line_no)

    def _rows_of(self, lines: list[tuple[int, tuple[str, str, dict[str, str], float, int | None]]], first: int,
                 new: list[tuple[int, str, str]], schema: dict[str, pl.DataType] | pl.Schema) -> pl.DataFrame:
        """``row, skey, ts_ms, value, has_ts`` of the line parser's ``(row, parsed line)`` pairs: each
        text looked up in the map as the vectorised path cuts it, the new ones given skeys in order."""
        keys = [text.removesuffix("}") for _, (text, *_) in lines]
        known = self._index.lookup(pl.DataFrame({"series": keys}, schema={"series": pl.Utf8}))["skey"].to_list()
        fresh: dict[str, int] = {}
        rows = []
        for (row, (_, name, labels, value, ts_ms)), key, skey in zip(lines, keys, known):
            if skey is None or skey < 0:
                skey = fresh.get(key)
                if skey is None:
                    skey = fresh[key] = self._skey(name, labels, new, first + row)
            rows.append((row, skey, ts_ms, value, ts_ms is not None))
        self._remember(list(fresh), list(fresh.values()))
        return pl.DataFrame(rows, orient="row", schema=schema)

    def _parse_line(self, line: str, line_no: int) -> tuple[str, str, dict[str, str], float, int | None] | None:
        stripped = line.strip()
        if not stripped:
            return None
        if self.openmetrics and self.saw_eof and line_no > self.eof_line:
            # the chunk's # EOF was found before its lines went one by one: only those after it count
            self._drop("after_eof", 1, line_no)
        if stripped.startswith("#"):
            if stripped == "# EOF" and not self.saw_eof:
                self.saw_eof, self.eof_line = True, line_no
            elif stripped.startswith("# TYPE "):
                self._note_type(stripped)
            return None
        if len(self._parsed) > _PARSED_CACHE_MAX:
            self._parsed.clear()
        try:
            parsed = parse_sample_line(stripped, openmetrics=self.openmetrics, cache=self._parsed)
        except UnrepresentableTime:
            self._drop("unrepresentable_time", 1, line_no)
            return None
        except ValueError as exc:
            raise IngestError(self.source, f"{exc}: {stripped[:120]!r}", line=line_no) from None
        if self.openmetrics and parsed[4] is not None and finer_than_ms(stripped):
            self._drop("sub_ms", 1, line_no)
        return parsed

    def _feed_slow(self, chunk: bytes, first: int) -> None:
        lines = []
        new: list[tuple[int, str, str]] = []
        for i, raw in enumerate(chunk.split(b"\n")):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise IngestError(self.source, f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                                  line=first + i) from None
            parsed = self._parse_line(line, first + i)
            if parsed is not None:
                lines.append((i, parsed))
        out = self._rows_of(lines, first, new, {"row": pl.UInt32, "skey": pl.Int64, "ts_ms": pl.Int64,
                                                "value": pl.Float64, "has_ts": pl.Boolean})
        self._announce(new)
        self._emit(out, first)

    def _emit(self, out: pl.DataFrame, first: int) -> None:
        if out.height and self._counter.any():
            v = pl.col("value")
            counter = pl.lit(pl.Series(self._counter[out["skey"].to_numpy()]))
            marks = out.select(neg=counter & (v < 0), odd=counter & (v.is_nan() | v.is_infinite()))
            if marks["neg"].any() or marks["odd"].any():
                for kind, mask in (("negative_counter", marks["neg"]), ("nonfinite_counter", marks["odd"])):
                    hits = out.filter(mask)
                    if hits.height:
                        self._drop(kind, hits.height, first + int(hits["row"].min()))
                out = out.filter(~(marks["neg"] | marks["odd"]))
        if out.height == 0:
            return
        untimestamped = out.filter(~pl.col("has_ts")) if not out["has_ts"].all() else out.clear()
        if untimestamped.height:
            seen = pl.lit(pl.Series(self._untimestamped[untimestamped["skey"].to_numpy()]))
            dup = untimestamped.filter(~pl.col("skey").is_first_distinct() | seen)
            if dup.height:
                row = dup["row"][0]
                raise IngestError(
                    self.source,
                    "the same series appears again without a timestamp: this looks like several "
                    "scrapes concatenated without timestamps, which cannot be placed in time; load "
                    "each scrape as its own file (with --at), or export with timestamps",
                    line=first + int(row))
            self._untimestamped[untimestamped["skey"].to_numpy()] = True
            self.untimestamped += untimestamped.height
        rows = out["row"]
        self.sink.add_samples(out.select("skey", pl.col("ts_ms").fill_null(self.default_ts_ms), "value"),
                              locate=lambda i: {"line": first + int(rows[i])})
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
        if parser.check is not None:
            parser.check.finish()
    finally:
        if was_enabled:
            gc.enable()
    return parser
