"""The help text a configuration dataclass carries for each field, read one way everywhere.

Every setting is a dataclass field whose ``metadata["help"]`` says what it means; CLI flags,
sidebar tooltips and page widgets show that text, so they all read it here.

>>> from analytics.view import ViewSettings
>>> field_help(ViewSettings, "step_s")[:13]
'Analysis step'
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import Field, fields
from typing import Any


def fields_help(cls: type) -> dict[str, str]:
    """Field name -> its help text ("" where a field has none), in the class's order."""
    return {f.name: str(f.metadata.get("help", "")) for f in fields(cls)}


def field_help(cls: type, name: str) -> str:
    """The help text of ``cls``'s field ``name``; ``KeyError`` for a field it does not have."""
    return fields_help(cls)[name]


def out_of_bounds(obj: Any) -> Iterator[tuple[Field, Any]]:
    """The fields of the dataclass instance ``obj`` whose number lies outside the ``min``/``max``
    its metadata gives, NaN and infinity included (booleans, non-numbers and ``None`` are not
    bounded), with their values; each caller says the error its own way (a flag, a scenario
    key, a transform).

    >>> from analytics.whatif.transforms import Transforms
    >>> [(f.name, v) for f, v in out_of_bounds(Transforms(traffic_growth=20.0))]
    [('traffic_growth', 20.0)]
    >>> [f.name for f, v in out_of_bounds(Transforms(traffic_growth=float("nan")))]
    ['traffic_growth']
    """
    for f in fields(obj):
        v = getattr(obj, f.name)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        lo, hi = f.metadata.get("min"), f.metadata.get("max")
        if lo is None and hi is None:
            continue
        if not math.isfinite(v) or (lo is not None and v < lo) or (hi is not None and v > hi):
            yield f, v
