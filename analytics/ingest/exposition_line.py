"""One line of Prometheus text exposition or OpenMetrics: names, labels and their escapes, sample
values and timestamps, as ``prometheus_client``'s parser reads them. The streaming parser
(:mod:`analytics.ingest.exposition`) sends here the lines its vectorised path cannot vouch for,
and each new series text.
"""

from __future__ import annotations

import math
import re



_NAME_RE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_ESCAPE_RE = re.compile(r'\\(.?)', re.S)
_ESCAPES = {"\\": "\\", "n": "\n", '"': '"'}
INT64_MAX = 2**63 - 1


def _unescape_one(m: re.Match[str]) -> str:
    try:
        return _ESCAPES[m.group(1)]
    except KeyError:
        # Prometheus' own parser refuses these too ("invalid escape sequence"): guessing whether
        # '\q' meant 'q' or '\\q' would silently change a label, and so a series' identity.
        raise ValueError(f"invalid escape sequence '\\{m.group(1)}' in a label value (only \\\\, "
                         "\\n and \\\" are allowed)") from None


def _keep_unknown_escape(m: re.Match[str]) -> str:
    # OpenMetrics' grammar allows a backslash before any character; only \\, \n and \" stand for
    # something else, so '\z' is the two characters it reads as (prometheus_client does the same).
    return _ESCAPES.get(m.group(1), m.group(0))


def _unescape(text: str, openmetrics: bool = False) -> str:
    if "\\" not in text:
        out = text
    else:
        out = _ESCAPE_RE.sub(_keep_unknown_escape if openmetrics else _unescape_one, text)
    if "\x00" in out:
        raise ValueError("a label value holds a NUL byte, which no exporter writes: the file is "
                         "damaged or hostile")
    return out


def _read_quoted(text: str, i: int, openmetrics: bool = False) -> tuple[str, int]:
    """Read a double-quoted string starting at ``text[i] == '"'``; return (value, index after it)."""
    j = i + 1
    n = len(text)
    while j < n:
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c == '"':
            return _unescape(text[i + 1:j], openmetrics), j + 1
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
            key, i = _read_quoted(text, i, openmetrics)
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
            value, i = _read_quoted(text, i, openmetrics)
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


# An OpenMetrics timestamp with a non-zero digit below the millisecond ("1.0001", not "1.5000")
_FRACTION_RE = re.compile(r"^[+-]?\d*\.\d+$")
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
        ts_ms = parse_timestamp_ms(toks[1], openmetrics=openmetrics)
    return series, name, labels, value, ts_ms


def finer_than_ms(line: str) -> bool:
    """Whether an OpenMetrics sample line's timestamp has digits below the millisecond."""
    head = line.split(" # ", 1)[0].split()
    frac = head[-1].partition(".")[2] if len(head) >= 3 else ""
    return "e" not in frac.lower() and len(frac.rstrip("0")) > 3


class UnrepresentableTime(ValueError):
    """A well-formed OpenMetrics timestamp beyond what epoch milliseconds in int64 can hold."""


def parse_timestamp_ms(tok: str, *, openmetrics: bool) -> int:
    """A sample's timestamp as epoch ms: text 0.0.4 writes integer milliseconds, OpenMetrics
    seconds (a fraction allowed). Raises ``ValueError`` on anything else, or beyond int64.

    >>> parse_timestamp_ms("1780000000000", openmetrics=False), parse_timestamp_ms("1780000000.5", openmetrics=True)
    (1780000000000, 1780000000500)
    """
    if not openmetrics:
        if not tok.lstrip("+-").isdigit() or not tok.isascii():
            kind = "a fraction" if _FRACTION_RE.match(tok) else "not an integer"
            raise ValueError(f"timestamp {tok!r} is {kind}: text format 0.0.4 writes whole "
                             "milliseconds (an OpenMetrics file, in seconds, starts with # TYPE "
                             "lines and ends with # EOF)")
        ts_ms = int(tok)
    else:
        ts = _parse_number(tok, "timestamp")
        if math.isnan(ts) or math.isinf(ts):
            raise ValueError(f"invalid timestamp {tok!r}")
        ts_ms = round(ts * 1000.0)
    if abs(ts_ms) > INT64_MAX:
        raise (UnrepresentableTime if openmetrics else ValueError)(f"timestamp {tok[:40]!r} is beyond any representable time "
                         f"({'seconds' if openmetrics else 'milliseconds'} since 1970)")
    return ts_ms
