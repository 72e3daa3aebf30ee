"""The series a streaming reader has seen so far, and the skey it gave each: one polars frame.

A reader that streams a source chunk by chunk looks up each chunk's series (its text columns:
the exposition's series text, line protocol's metric and sorted tags) among those seen before.
Held as Python dicts, a source of 2 million series took 1.5-3.6 GB; a frame holds each key's
text once. Each key also keeps a 64-bit hash of its text, so that a chunk is matched on integers
(one probe of the seen keys per chunk, not a hash of every seen text each time), then checked
text for text: two texts with the same hash stay two series.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

_HASH = "_h"
_ROW = "_row"
# Up to this many seen keys a chunk is joined on the texts themselves (a scrape archive's few
# hundred series: one join, as cheap as it gets); past it, on hashes of the chunk's distinct keys.
DIRECT_MAX = 100_000


class SeriesIndex:
    """Seen series keys (``columns``, text) and their skeys.

    >>> index = SeriesIndex(("series",))
    >>> index.add(pl.DataFrame({"series": ["up{a=\\"1\\"", "up"], "skey": [0, 1]}))
    >>> index.lookup(pl.DataFrame({"series": ["up", "down"]}))["skey"].to_list()
    [1, None]
    """

    def __init__(self, columns: Sequence[str]) -> None:
        self.columns = tuple(columns)
        self._schema = {_HASH: pl.UInt64, **{c: pl.Utf8 for c in self.columns}, "skey": pl.Int64}
        self._seen = pl.DataFrame(schema=self._schema)
        self._has_negative = False

    def __len__(self) -> int:
        return self._seen.height

    def _hashed(self, keys: pl.DataFrame) -> pl.DataFrame:
        return keys.with_columns(pl.struct(*self.columns).hash().alias(_HASH))

    def lookup(self, keys: pl.DataFrame) -> pl.DataFrame:
        """``keys`` (its key columns, any others kept) with ``skey``: the one given before, or null."""
        if self._seen.height <= DIRECT_MAX:
            return keys.join(self._seen.drop(_HASH), on=self.columns, how="left", maintain_order="left")
        probe = self._hashed(keys.select(self.columns).unique())
        hits = probe.join(self._seen, on=_HASH, how="inner", suffix="_seen")
        same = pl.all_horizontal(pl.col(c) == pl.col(f"{c}_seen") for c in self.columns)
        found = hits.filter(same).select(*self.columns, "skey")
        return keys.join(found, on=self.columns, how="left", maintain_order="left")

    def add(self, keys: pl.DataFrame) -> None:
        """Remember ``keys`` (key columns and ``skey``), new to the index or given -1 before (a key a
        reader first set aside, then keyed: the new skey replaces the -1)."""
        if keys.height == 0:
            return
        added = self._hashed(keys.select(*self.columns, pl.col("skey").cast(pl.Int64))).select(*self._schema)
        seen = self._seen
        if self._has_negative:
            seen = seen.join(added, on=[_HASH, *self.columns], how="anti")
        self._has_negative = self._has_negative or bool((added["skey"] < 0).any())
        self._seen = pl.concat([seen, added], rechunk=False)
