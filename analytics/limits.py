"""How much one source may make the loader hold: decompressed bytes, line length, series.

A shared server loads what its users upload, and a 10 MB gzip can hold 10 GB of zeros. Every
read of a source goes through these bounds while it streams, so a bomb is refused after a
bounded amount of work and memory, with the file named, instead of filling the machine:

- decompressed bytes at most ``max_gzip_ratio`` times the compressed size and at most
  ``max_decompressed_bytes`` (both: whichever is smaller); an archive's members together at most
  that ratio of the archive's size, counted in the bytes they unpack to, never in what their
  headers claim (a 10 KB tar holding a 1 GiB sparse member took 24 s and 2.2 GB before this);
- a line at most ``max_line_bytes`` long (a file with no newline is one line);
- at most ``max_series`` distinct series per source, and ``max_services`` services per request log;
  counted while a source streams, before its new series are kept. A million by default: a load of
  that many new series peaks at 924-980 MiB (exposition, line protocol, CSV), 2 million at
  1.4-1.5 GiB, of which the store's series table and its key index take about 0.35 GiB a million
  (DuckDB, in the load's transaction); a file of 2.1 million series is refused at 446-818 MiB
  (3.6 GB, 1.8 GB and 1.4 GB before: ``bench/hostile.py --only series``);
- at most ``max_columns`` columns in a table (CSV, Parquet), counted on the header before any row
  is parsed (a one-row CSV of 3 million columns took 22.9 s and 3.4 GB before this), and as many
  fields in one line of line protocol (a row of a wide table: one 10 MB line of 950,000 fields
  made 950,000 series, 26 s and 2.5 GB before this);
- at most ``max_archive_members`` entries in an archive (each member is a source of its own: a
  zip of 100,000 members was still loading after 40 s); a zip's are counted on its directory
  before any member is read, a tar's as they stream;
- a request's latency at most ``max_latency_s`` (a larger one is a wrong unit or a broken log).

Every format meets the same bounds: the line length for every line-based text (exposition, CSV,
line protocol, request logs; JSON documents are often one line and are bounded by the series
count instead, counted on the raw bytes before parsing).

Each is set by an environment variable (the field's ``env``, one of
:data:`analytics.config.LIMIT_ENVS`), for servers that load more.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from analytics.config import env_setting
from analytics.errors import ConfigError


def _f(default: int, env: str, help_: str) -> int:
    return field(default=default, metadata={"env": env, "help": help_})


@dataclass(frozen=True)
class IngestLimits:
    """Bounds on one source's load (see the module docstring)."""

    max_gzip_ratio: int = _f(200, "TIDELENS_MAX_GZIP_RATIO",
                             "decompressed bytes of a gzip source at most this many times its compressed size")
    max_decompressed_bytes: int = _f(8 << 30, "TIDELENS_MAX_DECOMPRESSED_BYTES",
                                     "decompressed bytes of any source at most this many (default 8 GiB)")
    max_line_bytes: int = _f(16 << 20, "TIDELENS_MAX_LINE_BYTES",
                             "a line of a text source at most this many bytes (default 16 MiB)")
    max_series: int = _f(1_000_000, "TIDELENS_MAX_SERIES_PER_SOURCE",
                         "distinct series in one source at most this many (a load of a million new series "
                         "peaks near 1 GiB)")
    max_services: int = _f(10_000, "TIDELENS_MAX_SERVICES_PER_SOURCE",
                           "distinct services in one request log at most this many")
    max_columns: int = _f(10_000, "TIDELENS_MAX_COLUMNS",
                          "columns of one table (CSV, Parquet), fields of one line-protocol line, at most this many")
    max_archive_members: int = _f(10_000, "TIDELENS_MAX_ARCHIVE_MEMBERS",
                                  "entries (files, folders, links) of one archive at most this many")
    max_latency_s: int = _f(86_400, "TIDELENS_MAX_LATENCY_S",
                            "a request's latency (or time to first token) at most this many seconds (default a day)")

    @classmethod
    def from_env(cls) -> "IngestLimits":
        """The defaults, each overridden by its environment variable when set.

        >>> IngestLimits.from_env().max_gzip_ratio
        200
        """
        values = {}
        for f in fields(cls):
            text = env_setting(f.metadata["env"])
            if text is None:
                continue
            try:
                values[f.name] = int(text)
            except ValueError:
                raise ConfigError(f"{f.metadata['env']}={text!r}: write a whole number ({f.metadata['help']})") from None
            if values[f.name] <= 0:
                raise ConfigError(f"{f.metadata['env']}={text!r}: must be positive")
        return cls(**values)

    def decompressed_cap(self, compressed_bytes: int | None) -> int:
        """The most decompressed bytes a source of ``compressed_bytes`` (gzip) may give."""
        if compressed_bytes is None:
            return self.max_decompressed_bytes
        return min(self.max_decompressed_bytes, max(1, compressed_bytes) * self.max_gzip_ratio)
