"""OpenMetrics conformance of a file's first scrape, judged by ``prometheus_client``'s parser.

Tidelens' own exposition parser (:mod:`analytics.ingest.exposition`) reads samples fast and checks
their syntax; the spec's rules about *families* (metadata lines, grouping, histogram structure,
which samples may carry exemplars, counter-like values) need a parser that builds families, and
``prometheus_client``'s agrees with the OpenMetrics test suite on all of its cases. It is ~40x
slower than ours, so it judges the first scrape only (up to the first ``# EOF``, at most
:data:`MAX_CHECK_LINES` lines, cut where a family starts): the later scrapes of an archive come
from the same exporter.

A defect of structure (a bad ``# TYPE`` / ``# UNIT`` / ``# HELP`` line, repeated metadata or
metadata after samples, a label, value or timestamp the grammar refuses) refuses the file with
its line. A defect of values (a negative or NaN
counter-like sample, a histogram without ``+Inf`` or ``_count``, decreasing buckets, an exemplar
where none is allowed) or of grouping (a family's series or families interleaved, as when scrapes
are concatenated without their ``# EOF``) loads the file with a note naming it: the negative and
NaN counter-like values are dropped by the parser, and a histogram note reaches the pages that
show percentiles (:data:`HISTOGRAM_DEFECT`).
"""

from __future__ import annotations

from typing import Iterator

from analytics.errors import IngestError

MAX_CHECK_LINES = 4_000  # ~0.1 CPU-s of prometheus_client: a whole dcgm-exporter scrape, and more
_HARD_LIMIT = 5_000  # cut even inside a family (one huge family without metadata lines)
# The phrase a source's note carries when one of its histograms is not a histogram; pages that
# show percentiles look for it (analytics.timeline.facts.histogram_defect_lines).
HISTOGRAM_DEFECT = "not a valid histogram"

_HISTOGRAM = ("+Inf bucket missing", "Count does not match +Inf value", "_count must be present",
              "_gcount must be present", "_sum/_gsum must be present", "Cannot have _sum with negative buckets",
              "Cannot have negative _gsum", "Buckets out of order", "Bucket values out of order")
_VALUES = ("Counter-like samples cannot be", "Quantile values cannot be negative", "Stateset samples can only",
           "Info samples can only", "Invalid line only histogram/gaugehistogram buckets and counters can have "
           "exemplars", "Bucket value must be an integer", "Count value must be an integer",
           "Timestamps went backwards", "Mix of timestamp presence",
           # a family's series interleaved (scrapes concatenated without their # EOF): each sample still
           # has its series and time, so nothing is misread
           "Invalid metric grouping",
           # a family's name met again after another family (families interleaved), or a family named
           # like another's sample: each sample line still names its series
           "Clashing name")


class _Lines:
    """Lines handed to the parser one by one, counting them (the number of the line it judged)."""

    def __init__(self, lines: list[str]) -> None:
        self._lines = lines
        self.count = 0

    def __iter__(self) -> Iterator[str]:
        for line in self._lines:
            self.count += 1
            yield line


class FirstScrapeCheck:
    """Collects an OpenMetrics file's first scrape from its chunks and judges it once.

    Parameters
    ----------
    source:
        The file name, for messages.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self.notes: list[str] = []
        self._lines: list[str] = []
        self._done = False
        self._cut_inside = False  # cut inside a family: what only its end can tell is not judged

    def feed(self, chunk: bytes) -> None:
        """Take the lines of one chunk (whole lines) until the first scrape is complete."""
        if self._done:
            return
        for line in chunk.decode("utf-8", errors="replace").split("\n"):
            line = line.removesuffix("\r")  # CRLF: not the spec's, but the parser reads it; judge the rest
            if line.startswith("# EOF") and line != "# EOF":
                raise IngestError(self.source, f"{line[:80]!r} is not the line '# EOF' that ends OpenMetrics "
                                  "(nothing may follow it on its line)", line=len(self._lines) + 1)
            n = len(self._lines)
            # cut where a family starts (or, past the hard limit, inside one)
            if line == "# EOF" or n >= MAX_CHECK_LINES and (line.startswith("# ") or n >= _HARD_LIMIT):
                self._cut_inside = line != "# EOF" and not line.startswith("# ")
                self._lines.append("# EOF")
                self.finish()
                return
            self._lines.append(line)

    def finish(self) -> None:
        """Judge what was collected (once); raise :class:`IngestError` on a defect of structure."""
        if self._done:
            return
        self._done = True
        lines, self._lines = self._lines, []
        while lines and lines[-1] == "":
            lines.pop()  # the file's final newline
        if not lines or lines[-1] != "# EOF":
            return  # no # EOF at all: the parser's own notes say so where it matters
        from prometheus_client.openmetrics.parser import text_fd_to_metric_families

        fd = _Lines([line + "\n" for line in lines])
        try:
            for _ in text_fd_to_metric_families(fd):  # type: ignore[arg-type]
                pass
        except Exception as exc:  # ValueError mostly; its parser raises bare ones on junk too
            reason = str(exc) or "a line the OpenMetrics grammar does not allow"
            line_no = max(fd.count, 1)
            if self._cut_inside and line_no >= len(lines):
                return  # raised at the end of a family the cut left unfinished (a histogram's +Inf...)
            what = reason.split(": ", 1)[0]
            if what.startswith(_HISTOGRAM):
                self.notes.append(f"{HISTOGRAM_DEFECT} (OpenMetrics) at or before line {line_no}: {reason[:160]} "
                                  "(percentiles from it are not to be trusted)")
            elif what.startswith(_VALUES):
                self.notes.append(f"not valid OpenMetrics at line {line_no}: {reason[:160]} (loaded as written)")
            else:
                raise IngestError(self.source, f"not valid OpenMetrics: {reason[:200]}", line=line_no) from None


def check_text(text: str, source: str = "<text>") -> list[str]:
    """Judge one OpenMetrics text whole (tests, and the doctest below).

    >>> check_text("# TYPE a counter\\na_total -1\\n# EOF\\n")
    ['not valid OpenMetrics at line 2: Counter-like samples cannot be negative: a_total -1 (loaded as written)']
    """
    check = FirstScrapeCheck(source)
    check.feed(text.encode())
    check.finish()
    return check.notes


__all__ = ["FirstScrapeCheck", "HISTOGRAM_DEFECT", "MAX_CHECK_LINES", "check_text"]
